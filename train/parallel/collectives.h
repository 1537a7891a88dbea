// Why: the sharded strategies reduce-scatter and all-gather parameter
// buffers split by ShardOf (model/param_layout.h, the same split as launch/'s
// ShardRange — checked in tests/parallel). These wrappers take Tensors, check
// sizes against that split, and prefix errors with the collective's purpose.
// Every rank receives the same bits: reduce-scatter sums each element once
// (on whichever path the MPI library takes) and all-gather is a copy.
// They also clock themselves (CommTimer): the trainer logs the seconds a step
// spent in them as "comm_s" (train/hooks/metrics_hook.cc). With blocking MPI
// that time includes waiting for the slowest rank to arrive.
#ifndef LONGCTX_TRAIN_PARALLEL_COLLECTIVES_H_
#define LONGCTX_TRAIN_PARALLEL_COLLECTIVES_H_

#include <chrono>

#include "absl/status/status.h"
#include "kernels/backend.h"
#include "launch/communicator.h"
#include "model/param_layout.h"

namespace longctx {

// full: 1-D [n], every rank's contribution (read only). shard: 1-D
// [ShardOf(n, rank, world).size()], not overlapping full, receives the sum
// over ranks of full's elements in this rank's range. Both kF32 or both kF64
// (the fp64 gradient sum, grad_sum64.h).
absl::Status ReduceScatterSum(Communicator& comm, Backend& be, const Tensor& full, const Tensor& shard);

// shard: this rank's range (may alias that range of full). full: 1-D [n],
// receives every rank's shard, identical bits on every rank.
absl::Status AllGather(Communicator& comm, Backend& be, const Tensor& shard, const Tensor& full);

// Seconds this process spent inside CommTimer scopes (the collectives above
// and the strategies' clipping-norm all-reduce) since the last Take, which
// resets the count. Single-threaded, like the communicator (MPI_THREAD_FUNNELED).
double TakeCommSeconds();
void AddCommSeconds(double s);
class CommTimer {
 public:
  CommTimer();
  ~CommTimer();
  CommTimer(const CommTimer&) = delete;
  CommTimer& operator=(const CommTimer&) = delete;

 private:
  std::chrono::steady_clock::time_point start_;
};

// 1-D view of elements [r.begin, r.end) of a dense 1-D tensor.
Tensor RangeView(const Tensor& t, ElementRange r);

}  // namespace longctx

#endif  // LONGCTX_TRAIN_PARALLEL_COLLECTIVES_H_
