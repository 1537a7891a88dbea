// Why: how often each relative distance was trained on (data/position_frequency.h)
// is reported as "posfreq" metrics events every posfreq_every steps and once at
// the end with a summary line per attention kind. The counters are the same on
// every rank (every rank packs every micro-batch), so rank 0 alone reports.
#ifndef LONGCTX_TRAIN_HOOKS_POSFREQ_HOOK_H_
#define LONGCTX_TRAIN_HOOKS_POSFREQ_HOOK_H_

#include "train/hooks/hook.h"

namespace longctx {

// The "posfreq" metrics event at `step`: full-attention and sliding-window
// summaries for the layers of each kind the model has.
nlohmann::json PositionFrequencyEvent(const PositionFrequency& posfreq, const TrainConfig& config,
                                      const ModelDims& dims, int64_t step);

class PositionFrequencyHook final : public Hook {
 public:
  std::string name() const override { return "posfreq"; }
  bool rank0_only() const override { return true; }
  absl::Status OnStepEnd(HookContext& ctx, const StepEvent& e) override;
  absl::Status OnFinal(HookContext& ctx, const RunEndEvent& e) override;
};

}  // namespace longctx

#endif  // LONGCTX_TRAIN_HOOKS_POSFREQ_HOOK_H_
