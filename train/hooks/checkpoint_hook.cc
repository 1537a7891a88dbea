// Why: see checkpoint_hook.h.
#include "train/hooks/checkpoint_hook.h"

#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "train/checkpoint/checkpoint.h"
#include "train/checkpoint/checkpoint_dir.h"
#include "train/checkpoint/sharded_save.h"
#include "train/evaluate.h"

namespace longctx {

absl::StatusOr<std::string> CheckpointHook::Save(HookContext& ctx, int64_t step, const PackerCursor& last_batch_cursor,
                                                 const PackedBatch* last_batch, double* batch_loss) {
  nlohmann::json state = ctx.state_json(last_batch_cursor);
  if (last_batch != nullptr) {
    // The saved weights' loss on the last step's first micro-batch: what
    // `longctx eval --batch=last_train` recomputes from this checkpoint.
    // Under context parallelism each rank of a group takes its share of the
    // rows (a whole 64K row would need the activations CP exists to split).
    EvalResult r;
    if (ctx.context != nullptr) {
      absl::StatusOr<PackedBatch> shard = ctx.context->Shard(*last_batch);
      if (!shard.ok()) return shard.status();
      ctx.model->set_context_attention(ctx.context);
      r = EvaluateBatch(*ctx.model, *shard, *ctx.device_batch);
      ctx.model->set_context_attention(nullptr);
      double sums[2] = {r.loss_sum, static_cast<double>(r.tokens)};
      if (absl::Status st = ctx.context->SumOverGroup(sums, 2); !st.ok()) return st;
      r.loss_sum = sums[0];
      r.tokens = static_cast<int64_t>(sums[1]);
    } else {
      r = EvaluateBatch(*ctx.model, *last_batch, *ctx.device_batch);
    }
    state["checkpoint_batch_loss"] = r.mean();
    state["checkpoint_batch_tokens"] = r.tokens;
    if (batch_loss != nullptr) *batch_loss = r.mean();
  }
  const TrainConfig& config = *ctx.config;
  if (shards_ != nullptr) {
    std::unique_ptr<Communicator> local;
    Communicator* comm = ctx.comm;
    if (comm == nullptr) {
      local = MakeLocalCommunicator();
      comm = local.get();
    }
    absl::StatusOr<std::string> path = SaveShardedCheckpoint(*comm, config.out_dir(), step, config, *ctx.model,
                                                             shards_(), state, config.keep_checkpoints(), bos_id_,
                                                             eos_id_);
    if (path.ok()) {
      ctx.last_checkpoint = *path;
      return path;
    }
    // Every rank has the same error; the temporary directory is gone. Name
    // the checkpoint a restart will use.
    absl::StatusOr<std::optional<std::string>> kept = FindLatestCheckpoint(config.out_dir());
    return absl::Status(path.status().code(),
                        absl::StrCat("checkpoint at step ", step, comm->world_size() > 1 ? " failed on " : " failed: ",
                                     path.status().message(),
                                     "; the previous checkpoint ",
                                     kept.ok() && kept->has_value() ? **kept : std::string("(none)"), " is intact"));
  }
  absl::StatusOr<std::string> path = std::string();
  std::string error;
  if (ctx.rank == 0) {
    path = SaveCheckpoint(config.out_dir(), step, config, *ctx.model, ctx.optimizer, state, config.keep_checkpoints(),
                          bos_id_, eos_id_);
    if (path.ok()) {
      ctx.last_checkpoint = *path;
    } else {
      // A failed save (full disk, I/O error, non-finite weights) removed its
      // temporary directory; name the checkpoint a restart will use.
      absl::StatusOr<std::optional<std::string>> kept = FindLatestCheckpoint(config.out_dir());
      error = absl::StrCat(path.status().message(), "; the previous checkpoint ",
                           kept.ok() && kept->has_value() ? **kept : std::string("(none)"), " is intact");
    }
  }
  // Every rank learns whether rank 0 saved, so all of them stop with the same
  // error instead of the others running on (or hanging) after a failed save.
  if (ctx.world_size > 1 && ctx.comm != nullptr) {
    std::vector<char> msg(2048, 0);
    if (!error.empty()) std::strncpy(msg.data(), error.c_str(), msg.size() - 1);
    if (absl::Status st = ctx.comm->BroadcastBytes(msg.data(), static_cast<int64_t>(msg.size()), 0); !st.ok())
      return absl::Status(st.code(), absl::StrCat("checkpoint at step ", step, ": agreeing on the save: ", st.message()));
    if (msg[0] != 0 && ctx.rank != 0)
      return absl::UnavailableError(
          absl::StrCat("checkpoint at step ", step, " failed on rank 0 (rank ", ctx.rank, " stops too): ", msg.data()));
  }
  if (!error.empty()) return absl::Status(path.status().code(), error);
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
