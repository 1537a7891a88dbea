// Why: see train_step.h.
#include "train/train_step.h"

#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "base/log.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace longctx {

TrainStep::TrainStep(Transformer* model, DeviceBatch* device_batch, Communicator* comm, ParallelStrategy* strategy,
                     NonfinitePolicy nonfinite, ContextParallel* context)
    : model_(model),
      device_batch_(device_batch),
      comm_(comm),
      strategy_(strategy),
      nonfinite_(nonfinite),
      context_(context) {
  if (const char* env = std::getenv("LONGCTX_TEST_INJECT_NONFINITE"); env != nullptr && *env != '\0') {
    std::vector<std::string> f = absl::StrSplit(env, ':');
    int rank = -1;
    int64_t step = 0;
    if (f.size() == 3 && (f[0] == "loss" || f[0] == "grad") && absl::SimpleAtoi(f[1], &rank) &&
        absl::SimpleAtoi(f[2], &step) && step > 0) {
      inject_grad_ = f[0] == "grad";
      inject_rank_ = rank;
      inject_step_ = step;
    } else {
      LOG(WARNING) << "LONGCTX_TEST_INJECT_NONFINITE=" << env << " ignored: expected loss|grad:RANK:STEP";
    }
  }
}

absl::StatusOr<StepResult> TrainStep::Run(int64_t step, const std::vector<PackedBatch>& micro, int64_t target_tokens,
                                          double lr, std::string_view last_checkpoint) {
  if (target_tokens == 0) return absl::DataLossError(absl::StrCat("step ", step, ": batch has no target tokens"));
  const int world = comm_->world_size(), rank = comm_->rank();
  // Who computes micro-batch i: data rank i % data_world (a rank, or a
  // context-parallel group of ranks).
  const int data_world = context_ != nullptr ? context_->data_world() : world;
  const int data_rank = context_ != nullptr ? context_->data_rank() : rank;
  model_->grads().Zero();
  strategy_->BeginStep();
  const bool inject = inject_step_ == step && inject_rank_ == rank;
  if (inject) inject_step_ = 0;  // once: a skipped step is retried under the same number with the next batch
  // The injected NaN gradient goes into the last local micro-batch's gradient
  // (before EndMicroBatch, so an fp64 accumulator sees it too).
  // Where the gradient storage is gone (FSDP freed it), the loss is made NaN instead.
  bool injected = false;
  auto inject_grad = [&] {
    if (!model_->grads().allocated(0)) return;
    model_->backend()->Fill(model_->grads().buffer(0), std::numeric_limits<double>::quiet_NaN());
    injected = true;
  };
  double loss_sum = 0;
  const int n_micro = static_cast<int>(micro.size());
  for (int i = data_rank; i < n_micro; i += data_world) {
    BatchTensors t;
    if (context_ != nullptr) {
      // Every rank of the group gets the same error from the same rows.
      absl::StatusOr<PackedBatch> shard = context_->Shard(micro[i]);
      if (!shard.ok())
        return absl::Status(shard.status().code(), absl::StrCat("step ", step, ": ", shard.status().message()));
      t = device_batch_->Upload(*shard);
    } else {
      t = device_batch_->Upload(micro[i]);
    }
    strategy_->BeginMicroBatch();
    model_->set_context_attention(context_);
    loss_sum += model_->ForwardBackward(t, 1.0 / static_cast<double>(target_tokens), /*backward=*/true);
    model_->set_context_attention(nullptr);
    if (inject && inject_grad_ && i + data_world >= n_micro) inject_grad();
    strategy_->EndMicroBatch();
  }
  const bool check = nonfinite_.stop || nonfinite_.skip;
  if (inject && inject_grad_ && data_rank >= n_micro) inject_grad();  // this rank had no micro-batch
  if (inject && !injected) loss_sum = std::numeric_limits<double>::quiet_NaN();
  // This rank's own verdict, before any reduction (FSDP has reduced and freed
  // its layers' gradients by now: there the loss and the norm after the update
  // are what is checked).
  int64_t context_bytes[2] = {0, 0};
  if (context_ != nullptr) {
    const std::vector<ContextTraffic> traffic = context_->TakeTraffic();
    for (int kind = 0; kind < 2; ++kind) context_bytes[kind] = traffic[kind].kv_received + traffic[kind].grad_received;
  }
  double sums[2] = {loss_sum, 0};
  if (check && !(std::isfinite(loss_sum) && strategy_->LocalGradientsFinite())) sums[1] = 1;
  if (absl::Status st = strategy_->FinishBackward(); !st.ok()) return st;
  if (absl::Status st = comm_->AllReduceSum(sums, 2); !st.ok()) return st;
  const double loss = sums[0] / static_cast<double>(target_tokens);
  const int bad_ranks = static_cast<int>(sums[1]);
  StepResult r;
  r.step = step;
  r.loss = loss;
  r.target_tokens = target_tokens;
  r.lr = lr;
  r.ranks_nonfinite = bad_ranks;
  r.context_bytes_full = context_bytes[0];
  r.context_bytes_window = context_bytes[1];
  if (bad_ranks > 0 && nonfinite_.skip) {
    r.comm_seconds = strategy_->TakeCommSeconds();
    r.skipped = true;
    r.grad_norm = std::numeric_limits<double>::quiet_NaN();
    return r;
  }
  if (bad_ranks > 0 && nonfinite_.stop)
    return absl::InternalError(absl::StrFormat(
        "step %d: training loss is %f; a non-finite loss or gradient on %d of %d ranks; stopping without updating "
        "or saving (last checkpoint: %s)",
        step, loss, bad_ranks, world, last_checkpoint.empty() ? "none from this run" : std::string(last_checkpoint)));
  absl::StatusOr<StepStats> updated = strategy_->OptimizerStep(lr);
  if (!updated.ok())
    return absl::Status(updated.status().code(),
                        absl::StrCat("step ", step, ": ", strategy_->name(), " update: ", updated.status().message()));
  const StepStats& stats = *updated;
  r.comm_seconds = strategy_->TakeCommSeconds();
  // The norm is agreed across ranks; non-finite here means the update already
  // used it, so even the skip policy cannot take it back.
  if (!std::isfinite(stats.grad_norm) && check)
    return absl::InternalError(absl::StrFormat(
        "step %d: gradient norm is %f (loss %f) after the update; stopping without saving (last checkpoint: %s)",
        step, stats.grad_norm, loss, last_checkpoint.empty() ? "none from this run" : std::string(last_checkpoint)));
  r.grad_norm = stats.grad_norm;
  r.clip_scale = stats.clip_scale;
  return r;
}

}  // namespace longctx
