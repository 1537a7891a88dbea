// Why: how a step's gradients become the next parameters differs between the
// three data-parallel modes of train.proto's `mode`, and nothing else in the
// trainer should care which one runs. A ParallelStrategy owns that part, and
// it is the one seam: TrainStep (train/train_step.h) calls it directly for
// every step, the trainer keeps one for every mode, and the hooks that need
// full state ask it (train/hooks/full_state_hook.h).
//  * DDP: every rank holds everything; on one process this is the
//    single-process strategy (the gradient sum is the identity). Gradients of each buffer are summed by
//    reduce-scatter + all-gather (collectives.h), so every rank receives the
//    same bits and the replicated AdamW keeps the parameters bitwise equal on
//    every rank. One process = today's all-reduce (a no-op) + AdamW, bit for bit.
//  * ZERO1: parameters and gradients replicated; gradients reduce-scattered;
//    ShardedAdamW updates this rank's range of each buffer; the parameters are
//    all-gathered.
//  * FSDP: each rank stores ShardOf of every buffer (parameters, gradient
//    accumulator, AdamW moments). As a Transformer residency hook it gathers a
//    layer's buffer before its forward and again before its backward (or keeps
//    it when fsdp_reshard_after_forward is false), gives it gradient storage
//    for the backward, reduce-scatters the gradient into the shard accumulator
//    right after the layer's backward and frees the full buffers. Buffer 0
//    (embedding, final norm, LM head) is used at both ends of the pass, so it
//    stays gathered from the start of the forward to the end of the backward.
// With grad_sum_fp64 (default) every mode sums micro-batch gradients in fp64
// on the rank and across ranks and rounds once, so the sum does not depend on
// the world size (grad_sum64.h).
// Clipping uses the global norm: the sum of squares of the local gradient
// shards, summed over ranks. The periodic probe calls GatherFullParameters/
// ReleaseFullParameters around its use on every rank (a memory spike of one
// full model per rank, documented); a checkpoint save does not: ZeRO-1 and
// FSDP write this rank's shards (checkpoint_shards()).
#ifndef LONGCTX_TRAIN_PARALLEL_PARALLEL_STRATEGY_H_
#define LONGCTX_TRAIN_PARALLEL_PARALLEL_STRATEGY_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/backend.h"
#include "launch/communicator.h"
#include "model/transformer.h"
#include "optim/adamw.h"
#include "optim/sharded_adamw.h"
#include "train/checkpoint/checkpoint_reader.h"
#include "train/train.pb.h"

namespace longctx {

class ParallelStrategy {
 public:
  virtual ~ParallelStrategy() = default;
  // Without init_seed the model's parameters are full and identical on every
  // rank when this is called (after resume or init_from): sharded modes keep
  // their shard. With init_seed they have not been initialised: DDP and ZeRO-1
  // call Transformer::InitParams(seed); FSDP writes the same values
  // (GenerateInitialParams) into its shards only, never touching a full
  // buffer, so its peak memory is the sharded state. FSDP then frees the full
  // buffers and installs itself as the model's residency hook.
  virtual absl::Status Setup(std::optional<uint64_t> init_seed) = 0;
  // Before a step's first micro-batch (zeroes whatever accumulates gradients).
  virtual void BeginStep() = 0;
  // Around each local micro-batch's forward/backward: with grad_sum_fp64
  // (train/parallel/grad_sum64.h) DDP and ZeRO-1 zero the model's gradients
  // before and add them to their fp64 accumulator after; FSDP does the same
  // per layer in its residency hook and needs nothing here.
  virtual void BeginMicroBatch() {}
  virtual void EndMicroBatch() {}
  // This rank's gradients before FinishBackward are finite (FSDP: what is
  // still unreduced; its reduced shards are checked through the norm).
  virtual bool LocalGradientsFinite() = 0;
  // After the step's last micro-batch backward: gradients summed over ranks
  // (DDP/ZeRO-1 reduce here; FSDP has reduced per layer and reports any error
  // its hook met).
  virtual absl::Status FinishBackward() = 0;
  // Clip by the global norm and update; afterwards every rank's (shard of the)
  // parameters is current.
  virtual absl::StatusOr<StepStats> OptimizerStep(double lr) = 0;
  // Full parameters in model.params() on every rank until Release (collective).
  virtual absl::Status GatherFullParameters() = 0;
  virtual void ReleaseFullParameters() = 0;
  // Full AdamW moments (and step) gathered to rank 0 for a checkpoint; null on
  // other ranks, and the strategy's own AdamW for DDP (collective).
  virtual absl::StatusOr<const AdamW*> FullOptimizerOnRoot() = 0;
  // Frees what FullOptimizerOnRoot gathered.
  virtual void ReleaseFullOptimizer() {}
  // Resume: take the moments from a full AdamW loaded from a checkpoint.
  virtual absl::Status LoadFullOptimizer(const AdamW& full) = 0;
  // DDP: its replicated AdamW (a checkpoint's moments load straight into it);
  // null for the sharded modes (use LoadFullOptimizer).
  virtual AdamW* replicated_optimizer() { return nullptr; }
  virtual int64_t optimizer_step() const = 0;
  virtual void set_optimizer_step(int64_t s) = 0;
  // Sharded checkpoints (ZeRO-1, FSDP): this rank's range of every buffer,
  // with views of its parameters and AdamW moments in the strategy's own
  // storage; every rank writes them in parallel (train/checkpoint/sharded_save.h)
  // and a resume or init_from fills them from any layout and world size
  // (train/checkpoint/checkpoint_reader.h). Empty for DDP: rank 0 writes one
  // full copy from the model and replicated_optimizer().
  virtual std::vector<CheckpointShard> checkpoint_shards() { return {}; }
  // Bytes this rank holds for parameters, gradients and optimizer state now.
  virtual int64_t state_bytes() const = 0;
  virtual const char* name() const = 0;
  // ZeRO-1 and FSDP: parameters or moments live as per-rank shards (the
  // probe gathers them; each rank saves its own). False for DDP.
  virtual bool sharded() const = 0;
  // Seconds this process spent in the strategy's collectives since the last
  // call (the step's "comm_s"; a probe's gathers are taken and dropped).
  double TakeCommSeconds();
};

// The strategy of config.mode (DDP: with its own replicated AdamW, whose
// moments a resume loads through replicated_optimizer()).
absl::StatusOr<std::unique_ptr<ParallelStrategy>> MakeParallelStrategy(const TrainConfig& config,
                                                                       Transformer* model, Communicator* comm);
// FNV-1a 64 of every parameter buffer's bytes (DDP equality check).
uint64_t HashParameters(Transformer& model);

}  // namespace longctx

#endif  // LONGCTX_TRAIN_PARALLEL_PARALLEL_STRATEGY_H_
