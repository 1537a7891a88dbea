// Why: the sharded strategies need reduce-scatter and all-gather over a
// parameter buffer split by ShardOf (model/param_layout.h). They are written
// here once, on top of the Communicator interface, so every strategy uses the
// same split and the same "every rank gets the same bits" guarantee:
//  * ReduceScatterSum: full (summed over ranks) restricted to this rank's range.
//  * AllGather: every rank's shard placed at its range of `full`.
// Both currently run through AllReduceSum (gather = sum of one non-zero
// contribution and zeros, which is exact in any order, so every rank gets the
// shard owner's bits; reduce-scatter = all-reduce then keep the range), which
// moves about twice the bytes of native collectives; launch/'s native
// ReduceScatter/AllGather replace these bodies when they land (same contract).
#ifndef LONGCTX_TRAIN_PARALLEL_COLLECTIVES_H_
#define LONGCTX_TRAIN_PARALLEL_COLLECTIVES_H_

#include "absl/status/status.h"
#include "kernels/backend.h"
#include "launch/communicator.h"
#include "model/param_layout.h"

namespace longctx {

// full: 1-D [n], every rank's contribution (clobbered: may hold the full sum
// afterwards). shard: 1-D [ShardOf(n, rank, world).size()], receives the sum
// over ranks of full's elements in this rank's range.
absl::Status ReduceScatterSum(Communicator& comm, Backend& be, const Tensor& full, const Tensor& shard);

// shard: this rank's range (may alias that range of full). full: 1-D [n],
// receives every rank's shard, identical bits on every rank.
absl::Status AllGather(Communicator& comm, Backend& be, const Tensor& shard, const Tensor& full);

// 1-D view of elements [r.begin, r.end) of a dense 1-D tensor.
Tensor RangeView(const Tensor& t, ElementRange r);

}  // namespace longctx

#endif  // LONGCTX_TRAIN_PARALLEL_COLLECTIVES_H_
