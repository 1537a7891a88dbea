// Why: see collectives.h.
#include "train/parallel/collectives.h"

#include <vector>

#include "absl/strings/str_cat.h"

namespace longctx {

Tensor RangeView(const Tensor& t, ElementRange r) {
  return Tensor(static_cast<char*>(t.data) + r.begin * DTypeSize(t.dtype), t.dtype, {r.size()}, t.device);
}

absl::Status ReduceScatterSum(Communicator& comm, Backend& be, const Tensor& full, const Tensor& shard) {
  const ElementRange r = ShardOf(full.numel(), comm.rank(), comm.world_size());
  if (shard.numel() != r.size())
    return absl::InvalidArgumentError(absl::StrCat("ReduceScatterSum: rank ", comm.rank(), " of ", comm.world_size(),
                                                   " owns ", r.size(), " of ", full.numel(),
                                                   " elements, the shard has ", shard.numel()));
  if (comm.world_size() > 1) {
    absl::Status st = comm.AllReduceSum(full);
    if (!st.ok()) return absl::Status(st.code(), absl::StrCat("ReduceScatterSum: ", st.message()));
  }
  if (r.size() > 0 && RangeView(full, r).data != shard.data) be.Copy(shard, RangeView(full, r));
  return absl::OkStatus();
}

absl::Status AllGather(Communicator& comm, Backend& be, const Tensor& shard, const Tensor& full) {
  const ElementRange r = ShardOf(full.numel(), comm.rank(), comm.world_size());
  if (shard.numel() != r.size())
    return absl::InvalidArgumentError(absl::StrCat("AllGather: rank ", comm.rank(), " of ", comm.world_size(),
                                                   " owns ", r.size(), " of ", full.numel(),
                                                   " elements, the shard has ", shard.numel()));
  const Tensor mine = RangeView(full, r);
  if (comm.world_size() == 1) {
    if (r.size() > 0 && mine.data != shard.data) be.Copy(mine, shard);
    return absl::OkStatus();
  }
  // Keep the shard if it aliases full, zero the rest, sum.
  if (r.size() > 0 && mine.data != shard.data) be.Copy(mine, shard);
  if (r.begin > 0) be.Fill(RangeView(full, {0, r.begin}), 0.0);
  if (r.end < full.numel()) be.Fill(RangeView(full, {r.end, full.numel()}), 0.0);
  absl::Status st = comm.AllReduceSum(full);
  if (!st.ok()) return absl::Status(st.code(), absl::StrCat("AllGather: ", st.message()));
  return absl::OkStatus();
}

}  // namespace longctx
