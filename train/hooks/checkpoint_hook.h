// Why: checkpoints at three moments, one writer: every ckpt_every steps
// (except the last), at the final step, and when a run stops early
// (max_steps_this_run: the interrupted-run save a resume continues from).
// Runs on every rank: the trainer state (including the saved weights' loss on
// the last step's first micro-batch, what `longctx eval --batch=last_train`
// recomputes) is computed everywhere; rank 0 writes the files today, and a
// sharded checkpoint will have every rank write its shard here.
#ifndef LONGCTX_TRAIN_HOOKS_CHECKPOINT_HOOK_H_
#define LONGCTX_TRAIN_HOOKS_CHECKPOINT_HOOK_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "train/hooks/hook.h"

namespace longctx {

class CheckpointHook final : public Hook {
 public:
  // bos/eos: the tokenizer's ids, recorded in the exported config.
  CheckpointHook(int32_t bos_id, int32_t eos_id) : bos_id_(bos_id), eos_id_(eos_id) {}
  std::string name() const override { return "checkpoint"; }
  bool rank0_only() const override { return false; }
  absl::Status OnStepEnd(HookContext& ctx, const StepEvent& e) override;
  absl::Status OnRunEnd(HookContext& ctx, const RunEndEvent& e) override;

 private:
  // Saves at the current step; "" on ranks other than 0. *batch_loss gets the
  // saved weights' loss on last_batch when that is given.
  absl::StatusOr<std::string> Save(HookContext& ctx, int64_t step, const PackerCursor& last_batch_cursor,
                                   const PackedBatch* last_batch, double* batch_loss);

  int32_t bos_id_, eos_id_;
};

}  // namespace longctx

#endif  // LONGCTX_TRAIN_HOOKS_CHECKPOINT_HOOK_H_
