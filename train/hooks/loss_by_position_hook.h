// Why: the loss-by-position probe during training (loss_by_position_every):
// the same long eval-split documents at every probe, so the curves of two
// steps differ only by the weights; a "loss_by_position" metrics event and a
// stdout line, then at the end the probes' share of the run's time (its time
// is excluded from tokens/s, as the NIAH probe's). Forward passes only, no
// training RNG drawn. Runs on every rank like the eval (a sharded strategy's
// forward gathers its parameters collectively); rank 0 reports.
#ifndef LONGCTX_TRAIN_HOOKS_LOSS_BY_POSITION_HOOK_H_
#define LONGCTX_TRAIN_HOOKS_LOSS_BY_POSITION_HOOK_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "data/document_source.h"
#include "train/hooks/hook.h"
#include "train/probe/loss_by_position_probe.h"

namespace longctx {

class LossByPositionHook final : public Hook {
 public:
  // The settings from the config (max_len 0 = 4 x data.seq_len) and the
  // documents, chosen now: FailedPrecondition when the eval split has no
  // document longer than data.seq_len.
  static absl::StatusOr<std::unique_ptr<LossByPositionHook>> Create(const TrainConfig& config,
                                                                    const DocumentSource* tokens);
  std::string name() const override { return "loss_by_position"; }
  bool rank0_only() const override { return false; }
  absl::Status OnRunStart(HookContext& ctx) override;
  absl::Status OnStepEnd(HookContext& ctx, const StepEvent& e) override;
  absl::Status OnRunEnd(HookContext& ctx, const RunEndEvent& e) override;

  // The settings a run with `config` probes with.
  static LossByPositionSettings SettingsFromConfig(const TrainConfig& config);

 private:
  LossByPositionHook() = default;

  const DocumentSource* tokens_ = nullptr;
  LossByPositionSettings settings_;
  std::vector<uint32_t> docs_;
  double seconds_ = 0;
  int probes_run_ = 0;
};

}  // namespace longctx

#endif  // LONGCTX_TRAIN_HOOKS_LOSS_BY_POSITION_HOOK_H_
