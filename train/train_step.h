// Why: one training step, written once, with the parallel strategy behind one
// seam (train/parallel/parallel_strategy.h) so the step never knows which one
// runs: the step brackets each micro-batch's forward/backward with the
// strategy's BeginMicroBatch/EndMicroBatch, asks it whether this rank's
// gradients are finite, lets it finish the backward (DDP: the gradient sum
// across ranks; ZeRO-1: a reduce-scatter; FSDP: per layer, already done) and
// then takes its optimizer step (AdamW over all parameters or over this rank's
// shard, the clipping norm agreed across ranks).
// Data fetching is not here: the caller hands over the step's micro-batches
// (train/batch_source.h) in the global data order, the same on every rank; rank
// r computes those with index % world == r (with context parallelism: the C
// ranks of group g those with index % groups == g, each its share of their
// rows), so what a run learns from does not depend on how many ranks share it.
#ifndef LONGCTX_TRAIN_TRAIN_STEP_H_
#define LONGCTX_TRAIN_TRAIN_STEP_H_

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "data/packer.h"
#include "launch/communicator.h"
#include "model/param_layout.h"
#include "model/transformer.h"
#include "optim/adamw.h"
#include "train/device_batch.h"
#include "train/parallel/context_parallel.h"
#include "train/parallel/parallel_strategy.h"

namespace longctx {

struct StepResult {
  int64_t step = 0;           // the step just taken (1-based)
  double loss = 0;            // mean training loss over the step's target tokens (weights before the update)
  int64_t target_tokens = 0;  // target tokens of every rank's micro-batches
  double grad_norm = 0;       // global gradient norm before clipping
  double clip_scale = 1;      // factor the clipping applied
  double lr = 0;
  // A non-finite loss or local gradient on some rank (ranks_nonfinite of them)
  // with skip_nonfinite: no update was applied; every rank returns this alike.
  bool skipped = false;
  int ranks_nonfinite = 0;
  double comm_seconds = 0;  // this rank's seconds in the strategy's collectives during the step
  // Context parallelism: bytes this rank received through the K/V exchange
  // during the step (K, V in the forward, again in the backward and for
  // recomputed layers, and the dK, dV returned to it), by layer kind.
  int64_t context_bytes_full = 0, context_bytes_window = 0;
};

// What a step does when the loss or a gradient is NaN/Inf on any rank. Every
// rank checks its own loss sum and local gradients before the gradients are
// reduced, and the count of ranks that saw one is summed with the loss (the
// same all-reduce), so all ranks take the same decision before any update.
struct NonfinitePolicy {
  bool stop = true;   // return an error (TrainConfig.stop_on_nonfinite)
  bool skip = false;  // no update; StepResult.skipped (TrainConfig.skip_nonfinite; wins over stop)
};

class TrainStep {
 public:
  // Not owned; all outlive the step. comm reduces the loss sum (scalars);
  // strategy reduces the gradients and updates the parameters.
  // context: context parallelism (null = whole rows per rank): micro-batch i
  // is then computed by the C ranks of group i % data_world(), each on its
  // share of the rows.
  TrainStep(Transformer* model, DeviceBatch* device_batch, Communicator* comm, ParallelStrategy* strategy,
            NonfinitePolicy nonfinite, ContextParallel* context = nullptr);

  // Zero grads; forward/backward of this rank's micro-batches (each between
  // the strategy's BeginMicroBatch/EndMicroBatch) with the loss
  // scaled by 1 / target_tokens (the global count over all of `micro`);
  // reduce gradients and the loss sum; on a non-finite loss or gradient on any
  // rank stop or skip as the policy says (before any update; last_checkpoint is
  // named in that error as what the run can resume from); clip and update.
  // Test hook (documented in docs/parallelism.md "Multi-node"): the environment variable
  // LONGCTX_TEST_INJECT_NONFINITE=KIND:RANK:STEP (KIND loss or grad) makes
  // rank RANK's local loss sum or first gradient buffer NaN at step STEP.
  absl::StatusOr<StepResult> Run(int64_t step, const std::vector<PackedBatch>& micro, int64_t target_tokens,
                                 double lr, std::string_view last_checkpoint);

 private:
  Transformer* model_;
  DeviceBatch* device_batch_;
  Communicator* comm_;
  ParallelStrategy* strategy_;
  NonfinitePolicy nonfinite_;
  ContextParallel* context_;
  // LONGCTX_TEST_INJECT_NONFINITE, parsed once (step 0 = none).
  bool inject_grad_ = false;
  int inject_rank_ = -1;
  int64_t inject_step_ = 0;
};

}  // namespace longctx

#endif  // LONGCTX_TRAIN_TRAIN_STEP_H_
