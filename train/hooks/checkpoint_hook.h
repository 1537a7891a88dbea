// Why: checkpoints at three moments, one writer: every ckpt_every steps
// (except the last), at the final step, and when a run stops early
// (max_steps_this_run: the interrupted-run save a resume continues from).
// Runs on every rank: the trainer state (including the saved weights' loss on
// the last step's first micro-batch, what `longctx eval --batch=last_train`
// recomputes) is computed everywhere. DDP: rank 0 writes one full copy and
// tells every rank whether it succeeded. ZeRO-1/FSDP (a shard source is
// given): every rank writes its own shard in parallel (sharded_save.h); no
// rank gathers the full model or moments.
#ifndef LONGCTX_TRAIN_HOOKS_CHECKPOINT_HOOK_H_
#define LONGCTX_TRAIN_HOOKS_CHECKPOINT_HOOK_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "train/checkpoint/checkpoint_reader.h"
#include "train/hooks/hook.h"

namespace longctx {

class CheckpointHook final : public Hook {
 public:
  // This rank's pieces of the parameters and moments (the parallel strategy's
  // shards); empty for DDP.
  using ShardSource = std::function<std::vector<CheckpointShard>()>;
  // bos/eos: the tokenizer's ids, recorded in the exported config.
  CheckpointHook(int32_t bos_id, int32_t eos_id, ShardSource shards = nullptr)
      : bos_id_(bos_id), eos_id_(eos_id), shards_(std::move(shards)) {}
  std::string name() const override { return "checkpoint"; }
  bool rank0_only() const override { return false; }
  absl::Status OnStepEnd(HookContext& ctx, const StepEvent& e) override;
  absl::Status OnRunEnd(HookContext& ctx, const RunEndEvent& e) override;

 private:
  // Saves at the current step; the path on every rank (sharded) or "" on
  // ranks other than 0 (DDP). *batch_loss gets the
  // saved weights' loss on last_batch when that is given.
  absl::StatusOr<std::string> Save(HookContext& ctx, int64_t step, const PackerCursor& last_batch_cursor,
                                   const PackedBatch* last_batch, double* batch_loss);

  int32_t bos_id_, eos_id_;
  ShardSource shards_;
};

}  // namespace longctx

#endif  // LONGCTX_TRAIN_HOOKS_CHECKPOINT_HOOK_H_
