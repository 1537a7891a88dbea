// Why: see train_step.h.
#include "train/train_step.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace longctx {

absl::Status AllReduceGradientSync::Reduce(ParamStore& grads) {
  for (int b = 0; b < grads.layout().num_buffers(); ++b) {
    absl::Status st = comm_->AllReduceSum(grads.buffer(b));
    if (!st.ok()) return st;
  }
  return absl::OkStatus();
}

TrainStep::TrainStep(Transformer* model, DeviceBatch* device_batch, Communicator* comm, GradientSync* sync,
                     ParamUpdate* update, bool stop_on_nonfinite)
    : model_(model),
      device_batch_(device_batch),
      comm_(comm),
      sync_(sync),
      update_(update),
      stop_on_nonfinite_(stop_on_nonfinite) {}

absl::StatusOr<StepResult> TrainStep::Run(int64_t step, const std::vector<PackedBatch>& micro, int64_t target_tokens,
                                          double lr, std::string_view last_checkpoint) {
  if (target_tokens == 0) return absl::DataLossError(absl::StrCat("step ", step, ": batch has no target tokens"));
  const int world = comm_->world_size(), rank = comm_->rank();
  model_->grads().Zero();
  double loss_sum = 0;
  for (int i = rank; i < static_cast<int>(micro.size()); i += world) {
    BatchTensors t = device_batch_->Upload(micro[i]);
    loss_sum += model_->ForwardBackward(t, 1.0 / static_cast<double>(target_tokens), /*backward=*/true);
  }
  if (absl::Status st = sync_->Reduce(model_->grads()); !st.ok()) return st;
  if (absl::Status st = comm_->AllReduceSum(&loss_sum, 1); !st.ok()) return st;
  const double loss = loss_sum / static_cast<double>(target_tokens);
  if (!std::isfinite(loss) && stop_on_nonfinite_)
    return absl::InternalError(absl::StrFormat(
        "step %d: training loss is %f; stopping without updating or saving (last checkpoint: %s)", step, loss,
        last_checkpoint.empty() ? "none from this run" : std::string(last_checkpoint)));
  const StepStats stats = update_->Apply(model_->params(), model_->grads(), lr);
  if (!std::isfinite(stats.grad_norm) && stop_on_nonfinite_)
    return absl::InternalError(
        absl::StrFormat("step %d: gradient norm is %f (loss %f); stopping", step, stats.grad_norm, loss));
  StepResult r;
  r.step = step;
  r.loss = loss;
  r.target_tokens = target_tokens;
  r.grad_norm = stats.grad_norm;
  r.clip_scale = stats.clip_scale;
  r.lr = lr;
  return r;
}

}  // namespace longctx
