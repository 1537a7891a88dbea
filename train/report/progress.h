// Why: minutes of work (probes, analyses, tokenizing) should show how far they
// are and how long is left. A Progress prints "label done/total | rate | ETA":
// on a terminal one live line redrawn in place (at most 5 times a second) and
// erased when done, so the command's own result lines stay clean; elsewhere
// (CI logs, pipes) one line per Event() call only, never a redraw.
#ifndef LONGCTX_TRAIN_REPORT_PROGRESS_H_
#define LONGCTX_TRAIN_REPORT_PROGRESS_H_

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace longctx {

// "42 s", "3 min 05 s", "1 h 02 min" (negative: "0 s").
std::string FormatDuration(double seconds);

class Progress {
 public:
  enum class Mode { kAuto, kLive, kLines };  // kAuto: kLive when `out` is a terminal
  Progress(std::string label, int64_t total, std::string unit, FILE* out = stdout, Mode mode = Mode::kAuto);
  ~Progress();  // erases a live line

  // `done` units finished. Live mode: redraws (throttled). Lines mode: nothing.
  void Update(int64_t done);
  // An event worth a line in logs (a finished length, a finished shard): lines
  // mode prints the progress line with `detail`; live mode redraws it.
  void Event(int64_t done, const std::string& detail);
  // For many small units (samples, pages, documents): live mode as Update;
  // lines mode prints a line (with `detail`) when `done` enters the next
  // quarter of the total, and at the total, so a log gets at most 4 lines.
  void Tick(int64_t done, const std::string& detail = "");
  // Erases a live line (before the caller prints lines of its own); the next Update redraws it.
  void Clear();

  // The text of the line for `done` after `seconds` (no newline); for tests.
  std::string Line(int64_t done, double seconds, const std::string& detail) const;
  bool live() const { return live_; }

 private:
  void Draw(int64_t done, const std::string& detail);
  std::string label_, unit_;
  int64_t total_;
  FILE* out_;
  bool live_;
  bool drawn_ = false;
  int64_t last_quarter_ = 0;  // Tick: quarters of the total already printed in lines mode
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace longctx

#endif  // LONGCTX_TRAIN_REPORT_PROGRESS_H_
