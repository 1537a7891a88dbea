// Why: the periodic effective-length probe (probe_every): a NIAH probe of the
// current weights on eval-split haystacks, its metrics event, out_dir/probe/
// step-N.{json,png} and a stdout line, then at the end one line with the probes'
// share of the run's time. It runs with its own thread count (probe_threads)
// through the backend's scoped override, reads the weights only and draws from
// no training RNG, and its time is excluded from tokens/s. Rank 0 only.
#ifndef LONGCTX_TRAIN_HOOKS_PROBE_HOOK_H_
#define LONGCTX_TRAIN_HOOKS_PROBE_HOOK_H_

#include <memory>

#include "absl/status/statusor.h"
#include "data/retrieval_task.h"
#include "data/token_dataset.h"
#include "data/tokenizer.h"
#include "train/hooks/hook.h"
#include "train/probe/niah_probe.h"

namespace longctx {

class ProbeHook final : public Hook {
 public:
  // Validates the probe settings and that a trial can be built now, not at
  // the first probe. FailedPrecondition when the eval split is empty.
  static absl::StatusOr<std::unique_ptr<ProbeHook>> Create(const TrainConfig& config, const TokenDataset* tokens,
                                                           const Tokenizer* tokenizer, Transformer* model);
  std::string name() const override { return "probe"; }
  bool rank0_only() const override { return true; }
  absl::Status OnRunStart(HookContext& ctx) override;
  absl::Status OnStepEnd(HookContext& ctx, const StepEvent& e) override;
  absl::Status OnRunEnd(HookContext& ctx, const RunEndEvent& e) override;

 private:
  ProbeHook() = default;
  absl::Status Probe(HookContext& ctx, int64_t step);

  ProbeSettings settings_;
  std::unique_ptr<HaystackSource> haystack_;
  std::unique_ptr<ProbeModel> model_;
  double seconds_ = 0;  // this run's probes
  double recall_seconds_ = 0;  // of which the teacher-forced recall
  int probes_run_ = 0;
};

}  // namespace longctx

#endif  // LONGCTX_TRAIN_HOOKS_PROBE_HOOK_H_
