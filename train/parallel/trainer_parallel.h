// Why: the trainer (train/trainer.cc) plugs a data-parallel mode in through
// its existing seams — TrainStep's GradientSync and ParamUpdate, and hooks —
// so that the loop itself does not change. InstallParallelStrategy picks:
//  * DDP: the trainer's AdamWUpdate; gradients summed by reduce-scatter +
//    all-gather (every rank gets the same bits, so parameters stay bitwise
//    equal), with grad_sum_fp64 in fp64 per micro-batch (grad_sum64.h), also
//    on one process. One process without it: today's AllReduceGradientSync.
//  * ZERO1 / FSDP: the strategy's sync and sharded update; the full AdamW the
//    trainer made (and a resumed checkpoint's moments in it) is handed to the
//    strategy's shards and freed.
// The probe (rank 0) reads full parameters: it runs between
// GatherFullStateHook and ReleaseFullStateHook, so every rank gathers them
// (FSDP: a spike of one full model per rank) on a probe step. A checkpoint
// save gathers nothing: every rank writes its own shards
// (train/checkpoint/sharded_save.h).
#ifndef LONGCTX_TRAIN_PARALLEL_TRAINER_PARALLEL_H_
#define LONGCTX_TRAIN_PARALLEL_TRAINER_PARALLEL_H_

#include <cstdint>
#include <memory>
#include <optional>

#include "absl/status/status.h"
#include "launch/communicator.h"
#include "model/transformer.h"
#include "optim/adamw.h"
#include "train/hooks/hook.h"
#include "train/parallel/parallel_strategy.h"
#include "train/train.pb.h"
#include "train/train_step.h"

namespace longctx {

// After the model's weights are resumed or loaded (init_seed unset), or
// instead of initialising them (init_seed set: the strategy initialises —
// FSDP only each rank's shards, so no rank ever holds the full model). A
// resumed *optimizer holds the moments and step; a null one (ZERO1/FSDP
// starting fresh: the trainer makes no full AdamW for them) means zero
// moments. May replace *sync and *update (the caller rebuilds its TrainStep)
// and reset *optimizer; *strategy stays null for DDP.
absl::Status InstallParallelStrategy(const TrainConfig& config, Transformer* model, Communicator* comm,
                                     std::unique_ptr<AdamW>* optimizer, std::unique_ptr<GradientSync>* sync,
                                     std::unique_ptr<ParamUpdate>* update,
                                     std::unique_ptr<ParallelStrategy>* strategy,
                                     std::optional<uint64_t> init_seed = std::nullopt);

// Registered right before the probe hook and right after the checkpoint hook.
class GatherFullStateHook : public Hook {
 public:
  explicit GatherFullStateHook(ParallelStrategy* s) : s_(s) {}
  std::string name() const override { return "gather_full_state"; }
  bool rank0_only() const override { return false; }
  absl::Status OnStepEnd(HookContext& ctx, const StepEvent& e) override;
  absl::Status OnRunEnd(HookContext& ctx, const RunEndEvent& e) override;

 private:
  absl::Status Gather(HookContext& ctx, bool optimizer);
  ParallelStrategy* s_;
};

class ReleaseFullStateHook : public Hook {
 public:
  explicit ReleaseFullStateHook(ParallelStrategy* s) : s_(s) {}
  std::string name() const override { return "release_full_state"; }
  bool rank0_only() const override { return false; }
  absl::Status OnStepEnd(HookContext& ctx, const StepEvent&) override { return Release(ctx); }
  absl::Status OnRunEnd(HookContext& ctx, const RunEndEvent&) override { return Release(ctx); }

 private:
  absl::Status Release(HookContext& ctx);
  ParallelStrategy* s_;
};

}  // namespace longctx

#endif  // LONGCTX_TRAIN_PARALLEL_TRAINER_PARALLEL_H_
