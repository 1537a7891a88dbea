// Why: every number the trainer reports goes to one append-only JSONL stream
// (<out_dir>/metrics.jsonl), one object per event with "kind" and "step", so
// loss curves, evals, and later position-frequency counters and probes can be
// plotted together. A resumed run appends to the same file.
#ifndef LONGCTX_TRAIN_METRICS_H_
#define LONGCTX_TRAIN_METRICS_H_

#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace longctx {

class MetricsWriter {
 public:
  static absl::StatusOr<MetricsWriter> Open(const std::string& path);
  MetricsWriter(MetricsWriter&& o) noexcept : path_(std::move(o.path_)), f_(o.f_) { o.f_ = nullptr; }
  MetricsWriter(const MetricsWriter&) = delete;
  ~MetricsWriter();
  // Appends one line and flushes it.
  absl::Status Write(const nlohmann::json& event);
  const std::string& path() const { return path_; }

 private:
  MetricsWriter(std::string path, FILE* f) : path_(std::move(path)), f_(f) {}
  std::string path_;
  FILE* f_ = nullptr;
};

}  // namespace longctx

#endif  // LONGCTX_TRAIN_METRICS_H_
