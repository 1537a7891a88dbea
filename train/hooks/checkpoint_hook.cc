// Why: see checkpoint_hook.h.
#include "train/hooks/checkpoint_hook.h"

#include <cstdio>

#include "train/checkpoint/checkpoint.h"
#include "train/evaluate.h"

namespace longctx {

absl::StatusOr<std::string> CheckpointHook::Save(HookContext& ctx, int64_t step, const PackerCursor& last_batch_cursor,
                                                 const PackedBatch* last_batch, double* batch_loss) {
  nlohmann::json state = ctx.state_json(last_batch_cursor);
  if (last_batch != nullptr) {
    // The saved weights' loss on the last step's first micro-batch: what
    // `longctx eval --batch=last_train` recomputes from this checkpoint.
    EvalResult r = EvaluateBatch(*ctx.model, *last_batch, *ctx.device_batch);
    state["checkpoint_batch_loss"] = r.mean();
    state["checkpoint_batch_tokens"] = r.tokens;
    if (batch_loss != nullptr) *batch_loss = r.mean();
  }
  if (ctx.rank != 0) return std::string();
  const TrainConfig& config = *ctx.config;
  absl::StatusOr<std::string> path = SaveCheckpoint(config.out_dir(), step, config, *ctx.model, ctx.optimizer, state,
                                                    config.keep_checkpoints(), bos_id_, eos_id_);
  if (path.ok()) ctx.last_checkpoint = *path;
  return path;
}

absl::Status CheckpointHook::OnStepEnd(HookContext& ctx, const StepEvent& e) {
  if (!PeriodicBeforeLast(e.result.step, ctx.config->ckpt_every(), ctx.config->steps())) return absl::OkStatus();
  absl::StatusOr<std::string> path = Save(ctx, e.result.step, e.batch_cursor, &e.micro[0], nullptr);
  if (!path.ok()) return path.status();
  if (ctx.rank == 0) std::printf("checkpoint %s\n", path->c_str());
  return absl::OkStatus();
}

absl::Status CheckpointHook::OnRunEnd(HookContext& ctx, const RunEndEvent& e) {
  if (!e.final && e.steps_this_run == 0) return absl::OkStatus();  // nothing new to save
  double batch_loss = 0;
  absl::StatusOr<std::string> path =
      Save(ctx, e.step, e.batch_cursor, e.has_step ? &e.micro[0] : nullptr, &batch_loss);
  if (!path.ok()) return path.status();
  ctx.summary->checkpoint = *path;
  if (!e.final) return absl::OkStatus();  // an interrupted run saves quietly
  if (e.has_step) ctx.summary->final_batch_loss = batch_loss;
  if (ctx.rank == 0) std::printf("checkpoint %s\n", path->c_str());
  return absl::OkStatus();
}

}  // namespace longctx
