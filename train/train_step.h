// Why: one training step, written once, with the parallel strategy behind two
// seams so the step never knows which one runs:
//  * GradientSync turns each rank's locally accumulated gradients into what the
//    update reads. Today: AllReduceGradientSync, an all-reduce of every
//    gradient buffer through the Communicator (the identity for one process).
//    DDP = the same all-reduce across processes (bucketed, overlapped with the
//    backward later); ZeRO-1 / FSDP = a reduce-scatter, each rank keeping its
//    shard of the reduced gradients.
//  * ParamUpdate applies the optimizer to what GradientSync left. Today:
//    AdamWUpdate, AdamW over every parameter (global-norm clipping inside).
//    ZeRO-1 / FSDP = AdamW over the local shard only, the clipping norm agreed
//    across ranks, then (ZeRO-1) an all-gather of the updated parameters.
// Data fetching is not here: the caller hands over the step's micro-batches
// (train/batch_source.h) in the global data order, the same on every rank; rank
// r computes those with index % world == r, so what a run learns from does not
// depend on how many ranks share it.
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
};

// What a step does when the loss or a gradient is NaN/Inf on any rank. Every
// rank checks its own loss sum and local gradients before the gradients are
// reduced, and the count of ranks that saw one is summed with the loss (the
// same all-reduce), so all ranks take the same decision before any update.
struct NonfinitePolicy {
  bool stop = true;   // return an error (TrainConfig.stop_on_nonfinite)
  bool skip = false;  // no update; StepResult.skipped (TrainConfig.skip_nonfinite; wins over stop)
};

class GradientSync {
 public:
  virtual ~GradientSync() = default;
  // Before a step's first micro-batch (after grads are zeroed).
  virtual void BeginStep() {}
  // Around each local micro-batch's forward/backward. The default accumulates
  // in place in `grads` (nothing to do); the fp64 gradient sum
  // (train/parallel/grad_sum64.h) zeroes grads before each micro-batch and
  // adds it to an fp64 accumulator after.
  virtual void BeginMicroBatch(ParamStore& grads) { (void)grads; }
  virtual void EndMicroBatch(ParamStore& grads) { (void)grads; }
  // This rank's accumulated gradient is finite (before Reduce).
  virtual bool LocalFinite(ParamStore& grads);
  // Called once per step after every local micro-batch's backward: `grads`
  // holds this rank's sum (or the sync's own accumulator does); afterwards
  // `grads` holds what ParamUpdate reads.
  virtual absl::Status Reduce(ParamStore& grads) = 0;
};

// Sum of every gradient buffer over all ranks, in place (every rank ends with
// the whole reduced gradient).
class AllReduceGradientSync final : public GradientSync {
 public:
  explicit AllReduceGradientSync(Communicator* comm) : comm_(comm) {}
  absl::Status Reduce(ParamStore& grads) override;

 private:
  Communicator* comm_;
};

class ParamUpdate {
 public:
  virtual ~ParamUpdate() = default;
  // One optimizer update at learning rate lr from the reduced gradients.
  virtual StepStats Apply(ParamStore& params, ParamStore& grads, double lr) = 0;
};

class AdamWUpdate final : public ParamUpdate {
 public:
  explicit AdamWUpdate(AdamW* optimizer) : optimizer_(optimizer) {}
  StepStats Apply(ParamStore& params, ParamStore& grads, double lr) override {
    return optimizer_->Step(params, grads, lr);
  }

 private:
  AdamW* optimizer_;
};

class TrainStep {
 public:
  // Not owned; all outlive the step. comm reduces the loss sum (scalars);
  // sync and update are the strategy's seams above.
  TrainStep(Transformer* model, DeviceBatch* device_batch, Communicator* comm, GradientSync* sync,
            ParamUpdate* update, NonfinitePolicy nonfinite);

  // Zero grads; forward/backward of this rank's micro-batches (each between
  // the sync's BeginMicroBatch/EndMicroBatch) with the loss
  // scaled by 1 / target_tokens (the global count over all of `micro`);
  // reduce gradients and the loss sum; on a non-finite loss or gradient on any
  // rank stop or skip as the policy says (before any update; last_checkpoint is
  // named in that error as what the run can resume from); clip and update.
  // Test hook (documented in README "Multi-node"): the environment variable
  // LONGCTX_TEST_INJECT_NONFINITE=KIND:RANK:STEP (KIND loss or grad) makes
  // rank RANK's local loss sum or first gradient buffer NaN at step STEP.
  absl::StatusOr<StepResult> Run(int64_t step, const std::vector<PackedBatch>& micro, int64_t target_tokens,
                                 double lr, std::string_view last_checkpoint);

 private:
  Transformer* model_;
  DeviceBatch* device_batch_;
  Communicator* comm_;
  GradientSync* sync_;
  ParamUpdate* update_;
  NonfinitePolicy nonfinite_;
  // LONGCTX_TEST_INJECT_NONFINITE, parsed once (step 0 = none).
  bool inject_grad_ = false;
  int inject_rank_ = -1;
  int64_t inject_step_ = 0;
};

}  // namespace longctx

#endif  // LONGCTX_TRAIN_TRAIN_STEP_H_
