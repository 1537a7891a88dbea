// Why: see progress.h.
#include "train/report/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>

namespace longctx {
namespace {
using Clock = std::chrono::steady_clock;
double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
}  // namespace

std::string FormatDuration(double s) {
  const long long t = std::llround(std::max(0.0, std::isfinite(s) ? s : 0.0));
  char buf[48];
  if (t < 60) std::snprintf(buf, sizeof(buf), "%lld s", t);
  else if (t < 3600) std::snprintf(buf, sizeof(buf), "%lld min %02lld s", t / 60, t % 60);
  else std::snprintf(buf, sizeof(buf), "%lld h %02lld min", t / 3600, (t % 3600) / 60);
  return buf;
}

Progress::Progress(std::string label, int64_t total, std::string unit, FILE* out, Mode mode)
    : label_(std::move(label)), unit_(std::move(unit)), total_(total), out_(out), start_(Clock::now()) {
  live_ = mode == Mode::kLive || (mode == Mode::kAuto && isatty(fileno(out)) == 1);
  last_draw_ = start_ - std::chrono::seconds(1);
}

Progress::~Progress() { Clear(); }

void Progress::Clear() {
  if (live_ && drawn_) {
    std::fputs("\r\033[K", out_);
    std::fflush(out_);
    drawn_ = false;
    last_draw_ = start_ - std::chrono::seconds(1);
  }
}

std::string Progress::Line(int64_t done, double seconds, const std::string& detail) const {
  char buf[256];
  const double rate = seconds > 0 ? done / seconds : 0;
  std::string eta = "?";
  if (done >= total_) eta = "done";
  else if (done > 0 && rate > 0) eta = FormatDuration((total_ - done) / rate);
  std::snprintf(buf, sizeof(buf), "%s %lld/%lld %s | %.2f %s/s | %s elapsed | ETA %s", label_.c_str(),
                static_cast<long long>(done), static_cast<long long>(total_), unit_.c_str(), rate, unit_.c_str(),
                FormatDuration(seconds).c_str(), eta.c_str());
  std::string line = buf;
  if (!detail.empty()) line += " | " + detail;
  return line;
}

void Progress::Draw(int64_t done, const std::string& detail) {
  const std::string line = Line(done, Since(start_), detail);
  if (live_) std::fprintf(out_, "\r\033[K%s", line.c_str());
  else std::fprintf(out_, "%s\n", line.c_str());
  std::fflush(out_);
  drawn_ = true;
  last_draw_ = Clock::now();
}

void Progress::Update(int64_t done) {
  if (!live_ || Since(last_draw_) < 0.2) return;
  Draw(done, "");
}

void Progress::Event(int64_t done, const std::string& detail) { Draw(done, detail); }

void Progress::Tick(int64_t done, const std::string& detail) {
  if (live_) {
    if (done >= total_ || Since(last_draw_) >= 0.2) Draw(done, detail);  // the final count even inside the throttle
    return;
  }
  if (total_ <= 0) return;
  const int64_t quarter = std::min<int64_t>(4, std::max<int64_t>(0, done) * 4 / total_);
  if (quarter > last_quarter_) {
    last_quarter_ = quarter;
    Draw(done, detail);
  }
}

}  // namespace longctx
