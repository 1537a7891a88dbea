// Why: the same global batch on 1, 2 or 4 ranks must give the same losses
// (within 1e-5 relative over 50 steps: docs/BENCHMARKS.md, "Data parallel on
// CPU"), and fp32 gradient sums do not: one
// rank accumulates its micro-batches in place (weight-gradient GEMMs add with
// beta = 1 into the running sum), several ranks sum partial sums through MPI,
// and the different rounding of each order is amplified by a loss spike
// (7.8e-5 relative on 4 ranks without it). train.proto's grad_sum_fp64 (default
// on) makes the sum independent of the world size instead:
//  * every micro-batch's gradient is computed on its own, from zeroed fp32
//    storage — the same bits on any world size, given the same threads per
//    rank (a GEMM may round differently with another thread count);
//  * micro-batch gradients are added in fp64, on the rank and across ranks
//    (a reduce-scatter of doubles), and rounded to fp32 once. A sum of a few
//    fp32 values of similar magnitude is exact in fp64, so its order — and so
//    the world size — does not change it; only when magnitudes differ by more
//    than 2^29 can the fp64 sums differ in their last bit, which the final
//    rounding to fp32 almost always hides.
// Fp64GradSum does this for the replicated-gradient modes (DDP, ZeRO-1);
// FSDP reduces each micro-batch's layer gradient as it is freed and keeps an
// fp64 shard accumulator (parallel_strategy.cc) using ToF64/AddF64 below.
// One micro-batch on one process is bit-identical to the fp32 path: one fp32
// term converted to fp64 and back is itself, and then nothing is converted.
// Cost (per parameter): DDP/ZeRO-1 with 2+ local micro-batches an fp64
// accumulator, 8 bytes; FSDP with grad_accum > 1 an fp64 shard accumulator,
// 8 / world bytes (with grad_accum 1 each buffer's one reduce-scatter is
// rounded straight into the fp32 shard);
// plus a fixed 32 MiB send and 32 MiB / world receive buffer (Fp64Reducer).
// Communication: the reduce-scatter moves doubles, 8 bytes instead of 4
// (DDP's all-gather of the reduced fp32 gradient is unchanged) — except when
// the whole sum has two terms (2 ranks, one micro-batch each): fp32's a + b is
// then already the exactly rounded sum, and the fp32 reduce-scatter is used.
#ifndef LONGCTX_TRAIN_PARALLEL_GRAD_SUM64_H_
#define LONGCTX_TRAIN_PARALLEL_GRAD_SUM64_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "kernels/backend.h"
#include "launch/communicator.h"
#include "model/param_layout.h"

namespace longctx {

// dst (kF64, n) = src (kF32, n) converted exactly.
void ToF64(Backend& be, const Tensor& src32, const Tensor& dst64);
// acc (kF64) += src (kF32 or kF64) in fp64, through `scratch` (kF64, any size
// >= 1; reused in chunks) when src is fp32.
void AddF64(Backend& be, const Tensor& acc64, const Tensor& src, const Tensor& scratch64);

// The fp64 reduce-scatter of gradients, in bounded memory: `full` (1-D,
// kF32 or kF64, n elements: this rank's contribution) is summed over ranks
// in fp64 for this rank's ShardOf(n) range, into out_shard (1-D, that
// range's size): kF32 = written, rounded to fp32 once; kF64 = added to it
// (an fp64 accumulator). The doubles travel in chunks: each rank's range is
// cut into pieces of at most chunk_elements(world) elements and piece j of
// every rank is packed (converted to fp64, zero-padded) into one send buffer
// of world × chunk doubles, so no fp64 copy of a whole buffer is made.
// Element sums do not depend on the chunking. Two ranks summing fp32 into an
// fp32 shard use the fp32 reduce-scatter: a + b in fp32 is already the exact
// sum rounded once. Collective.
class Fp64Reducer {
 public:
  explicit Fp64Reducer(Backend* be) : be_(be) {}
  absl::Status ReduceScatter(Communicator& comm, const Tensor& full, const Tensor& out_shard);
  int64_t bytes() const { return static_cast<int64_t>(send_.bytes() + recv_.bytes() + tmp32_.bytes()); }
  // Elements per rank per chunk: 4 Mi / world (a 32 MiB send buffer), at least 1.
  static int64_t chunk_elements(int world);

 private:
  Tensor Buf(DeviceBuffer* d, int64_t n);
  Backend* be_;
  DeviceBuffer send_, recv_;
  DeviceBuffer tmp32_;  // two fp32 terms: the fp32 reduced shard
};

class Fp64GradSum {
 public:
  Fp64GradSum(Backend* be, const ParamLayout* layout);

  // A step starts: no micro-batch gradient counted yet; the caller has zeroed
  // the gradients (TrainStep and the strategies' BeginStep do).
  void BeginStep() { micro_ = 0; }
  // Before a micro-batch's forward/backward: `grads` is zeroed (from the
  // second micro-batch on) so the micro-batch's gradient is computed on its
  // own. A previous micro-batch's gradient still held in `grads` moves into
  // the fp64 accumulator first.
  void BeginMicroBatch(ParamStore& grads);
  // After its backward: counts it (adds it to the accumulator from the second on).
  void EndMicroBatch(ParamStore& grads);
  int micro_batches() const { return micro_; }
  // Every local gradient value finite (the accumulator's, or grads' when it
  // holds the only micro-batch).
  bool LocalFinite(const ParamStore& grads) const;
  // The sum over ranks of every rank's micro-batch gradients of buffer b in
  // this rank's ShardOf range, rounded to fp32 into shard32 (kF32, that
  // range's size). shard32 may be that range of grads.buffer(b) itself.
  // Collective: every rank calls it for the same b in the same order.
  absl::Status ReduceScatter(Communicator& comm, const ParamStore& grads, int b, const Tensor& shard32);
  // Bytes held now (accumulator and scratch).
  int64_t bytes() const;

 private:
  Tensor Acc(int b) const;
  Backend* be_;
  const ParamLayout* layout_;
  int micro_ = 0;
  std::vector<DeviceBuffer> acc_;  // per buffer, fp64, allocated at the second micro-batch
  DeviceBuffer scratch_;           // fp64 conversion chunk of AddF64
  Fp64Reducer reducer_;
};

// DDP: every buffer of `grads` summed over ranks, the same bits on every rank
// (reduce-scatter — fp64 through sum64 when given, else fp32 through *tmp32 —
// then all-gather), so a replicated AdamW keeps the parameters bitwise equal.
// One process without sum64: the identity (today's all-reduce).
absl::Status SumReplicatedGradients(Communicator& comm, Backend& be, ParamStore& grads, Fp64GradSum* sum64,
                                    DeviceBuffer* tmp32);

}  // namespace longctx

#endif  // LONGCTX_TRAIN_PARALLEL_GRAD_SUM64_H_
