// Why: see evaluate.h.
#include "train/evaluate.h"

namespace longctx {

EvalResult EvaluateBatch(Transformer& model, const PackedBatch& batch, DeviceBatch& device_batch) {
  EvalResult r;
  BatchTensors t = device_batch.Upload(batch);
  r.loss_sum = model.ForwardBackward(t, 0.0, /*backward=*/false);
  r.tokens = batch.num_target_tokens;
  r.batches = 1;
  return r;
}

absl::StatusOr<EvalResult> EvaluateLoss(Transformer& model, Packer& packer, DeviceBatch& device_batch,
                                        int max_batches) {
  EvalResult total;
  const uint64_t start_epoch = packer.cursor().epoch;
  for (int i = 0; i < max_batches; ++i) {
    if (i > 0 && packer.cursor().epoch != start_epoch) break;
    absl::StatusOr<PackedBatch> batch = packer.Next();
    if (!batch.ok()) return batch.status();
    EvalResult r = EvaluateBatch(model, *batch, device_batch);
    total.loss_sum += r.loss_sum;
    total.tokens += r.tokens;
    total.batches += 1;
  }
  return total;
}

}  // namespace longctx
