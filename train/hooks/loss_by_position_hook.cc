// Why: see loss_by_position_hook.h.
#include "train/hooks/loss_by_position_hook.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "data/retrieval_task.h"

namespace longctx {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

LossByPositionSettings LossByPositionHook::SettingsFromConfig(const TrainConfig& config) {
  LossByPositionSettings s;
  s.train_len = config.data().seq_len();
  s.max_len = config.loss_by_position_max_len() > 0 ? config.loss_by_position_max_len() : 4 * s.train_len;
  s.max_docs = config.loss_by_position_docs();
  // A training batch's tokens fit in memory with a backward; a forward of as
  // many tokens does too.
  s.tokens_per_forward = std::max<int64_t>(s.max_len, int64_t{config.data().seq_len()} * config.data().batch_size());
  return s;
}

absl::StatusOr<std::unique_ptr<LossByPositionHook>> LossByPositionHook::Create(const TrainConfig& config,
                                                                               const DocumentSource* tokens) {
  std::unique_ptr<LossByPositionHook> h(new LossByPositionHook());
  h->tokens_ = tokens;
  h->settings_ = SettingsFromConfig(config);
  if (absl::Status st = ValidateLossByPositionSettings(h->settings_, "loss_by_position_"); !st.ok()) return st;
  std::vector<uint32_t> eval_docs = SplitDocuments(*tokens, config.data().eval_fraction(), /*eval_split=*/true);
  h->docs_ = LongDocuments(*tokens, eval_docs, h->settings_.train_len, h->settings_.max_docs);
  if (h->docs_.empty())
    return absl::FailedPreconditionError(absl::StrCat(
        "loss_by_position_every: the eval split of ", config.data().path(), " (data.eval_fraction ",
        config.data().eval_fraction(), ", ", eval_docs.size(), " documents) has no document longer than data.seq_len ",
        config.data().seq_len()));
  return h;
}

absl::Status LossByPositionHook::OnRunStart(HookContext& ctx) {
  if (ctx.rank != 0) return absl::OkStatus();
  int64_t tokens = 0;
  for (uint32_t d : docs_) tokens += std::min(tokens_->doc_length(d), settings_.max_len + 1) - 1;
  std::printf("loss by position every %d steps: %zu eval documents longer than %lld, positions 0..%lld, %lld tokens\n",
              ctx.config->loss_by_position_every(), docs_.size(), static_cast<long long>(settings_.train_len),
              static_cast<long long>(settings_.max_len), static_cast<long long>(tokens));
  return absl::OkStatus();
}

absl::Status LossByPositionHook::OnStepEnd(HookContext& ctx, const StepEvent& e) {
  const int every = ctx.config->loss_by_position_every();
  const int64_t step = e.result.step;
  if (every <= 0 || step % every != 0) return absl::OkStatus();
  const auto start = Clock::now();
  absl::StatusOr<LossByPosition> r = RunLossByPosition(*ctx.model, *ctx.device_batch, *tokens_, docs_, settings_);
  if (!r.ok()) return absl::Status(r.status().code(), absl::StrCat("step ", step, ": ", r.status().message()));
  if (ctx.rank == 0) {
    if (absl::Status st = ctx.metrics->Write(LossByPositionEvent(*r, step)); !st.ok()) return st;
    std::printf("lbp    step %lld | loss by position %s\n", static_cast<long long>(step),
                LossByPositionSummary(*r).c_str());
    std::fflush(stdout);
  }
  const double s = std::chrono::duration<double>(Clock::now() - start).count();
  ctx.excluded_seconds += s;  // tokens/s counts training only
  seconds_ += s;
  ++probes_run_;
  return absl::OkStatus();
}

absl::Status LossByPositionHook::OnRunEnd(HookContext& ctx, const RunEndEvent&) {
  if (probes_run_ == 0 || ctx.rank != 0) return absl::OkStatus();
  const double run = std::chrono::duration<double>(Clock::now() - ctx.run_start).count();
  std::printf("lbp    %d loss-by-position probes took %.1f s, %.1f%% of this run's %.1f s\n", probes_run_, seconds_,
              100.0 * seconds_ / std::max(1e-9, run), run);
  return absl::OkStatus();
}

}  // namespace longctx
