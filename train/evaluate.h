// Why: one loss evaluation used by the trainer's periodic eval and by
// `longctx eval`, so both print the same number for the same weights and data.
#ifndef LONGCTX_TRAIN_EVALUATE_H_
#define LONGCTX_TRAIN_EVALUATE_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "data/packer.h"
#include "model/transformer.h"
#include "train/device_batch.h"

namespace longctx {

struct EvalResult {
  double loss_sum = 0;  // summed cross-entropy (nats) over target tokens
  int64_t tokens = 0;   // target tokens counted
  int batches = 0;
  double mean() const { return tokens > 0 ? loss_sum / static_cast<double>(tokens) : 0.0; }
};

// Forward passes over up to max_batches batches from the packer (its cursor
// advances). Stops early when the packer's split is exhausted for one epoch.
absl::StatusOr<EvalResult> EvaluateLoss(Transformer& model, Packer& packer, DeviceBatch& device_batch,
                                        int max_batches);

// The loss of one batch (forward only).
EvalResult EvaluateBatch(Transformer& model, const PackedBatch& batch, DeviceBatch& device_batch);

}  // namespace longctx

#endif  // LONGCTX_TRAIN_EVALUATE_H_
