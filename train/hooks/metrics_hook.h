// Why: the progress line (`step N/M | loss … | tok/s | elapsed | ETA`) and the "train" metrics
// event, every log_every steps and at the last step. Runs on every rank (each
// rank's TrainSummary reports its tokens/s); prints and writes on rank 0.
// Each event carries the logged step's shape — "seq_len" (its row length, which
// changes from step to step under SFT's length schedule), "rows", "tokens" and
// "loss_tokens" (targets with loss: the response tokens in SFT) — and, when
// log_every > 1, "window_seq_lens": the row length of every step since the
// previous event, so metrics.jsonl records the length of every step.
#ifndef LONGCTX_TRAIN_HOOKS_METRICS_HOOK_H_
#define LONGCTX_TRAIN_HOOKS_METRICS_HOOK_H_

#include <chrono>
#include <vector>

#include "train/hooks/hook.h"

namespace longctx {

class MetricsHook final : public Hook {
 public:
  std::string name() const override { return "metrics"; }
  bool rank0_only() const override { return false; }
  absl::Status OnRunStart(HookContext& ctx) override;
  absl::Status OnStepEnd(HookContext& ctx, const StepEvent& e) override;

 private:
  std::chrono::steady_clock::time_point window_start_;
  double excluded_at_window_start_ = 0;
  int64_t window_tokens_ = 0;
  int64_t window_steps_ = 0;
  double window_comm_seconds_ = 0;  // "comm_s": seconds per step in the strategy's collectives (StepResult)
  std::vector<int32_t> window_seq_lens_;  // row length of each step in the window
};

}  // namespace longctx

#endif  // LONGCTX_TRAIN_HOOKS_METRICS_HOOK_H_
