// Why: see tensorboard_hook.h.
#include "train/hooks/tensorboard_hook.h"

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "train/report/tensorboard_metrics.h"

namespace longctx {

absl::Status TensorBoardHook::OnRunStart(HookContext& ctx) {
  if (!ctx.config->tensorboard() || ctx.metrics == nullptr) return absl::OkStatus();
  std::error_code ec;
  const auto size = std::filesystem::file_size(ctx.metrics->path(), ec);
  offset_ = ec ? 0 : static_cast<int64_t>(size);  // a resumed run's earlier events are in the earlier file
  enabled_ = true;  // the file itself is created with the first event (Pump)
  return absl::OkStatus();
}

absl::Status TensorBoardHook::Pump(HookContext& ctx) {
  if (!enabled_) return absl::OkStatus();
  std::ifstream in(ctx.metrics->path(), std::ios::binary);
  if (!in) return absl::UnavailableError(absl::StrCat("tensorboard: cannot read ", ctx.metrics->path()));
  in.seekg(offset_);
  std::string line;
  while (std::getline(in, line)) {
    if (in.eof()) break;  // no newline yet: an incomplete line, read it next time
    offset_ += static_cast<int64_t>(line.size()) + 1;
    const nlohmann::json ev = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (ev.is_discarded() || !ev.is_object() || !ev.contains("step") || !ev["step"].is_number()) continue;
    if (!seen_.emplace(ev.value("kind", ""), ev["step"].get<int64_t>()).second) continue;
    if (writer_ == nullptr) {
      absl::StatusOr<std::unique_ptr<EventFileWriter>> w = EventFileWriter::Open(ctx.config->out_dir());
      if (!w.ok()) return w.status();
      writer_ = std::move(*w);
      std::printf("tensorboard: %s (tensorboard --logdir %s)\n", writer_->path().c_str(),
                  ctx.config->out_dir().c_str());
      std::fflush(stdout);
    }
    if (absl::Status st = WriteMetricsEventToTensorBoard(*writer_, ev, ctx.config->out_dir()); !st.ok()) return st;
  }
  return absl::OkStatus();
}

absl::Status TensorBoardHook::OnFinal(HookContext& ctx, const RunEndEvent&) {
  absl::Status st = Pump(ctx);
  if (st.ok() && writer_ != nullptr) {
    std::printf("tensorboard: %lld records in %s\n", static_cast<long long>(writer_->records()),
                writer_->path().c_str());
    std::fflush(stdout);
  }
  return st;
}

}  // namespace longctx
