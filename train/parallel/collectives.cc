// Why: see collectives.h.
#include "train/parallel/collectives.h"

#include <vector>

#include "absl/strings/str_cat.h"

namespace longctx {

namespace {
double comm_seconds = 0;
}  // namespace

double TakeCommSeconds() {
  const double s = comm_seconds;
  comm_seconds = 0;
  return s;
}
void AddCommSeconds(double s) { comm_seconds += s; }
CommTimer::CommTimer() : start_(std::chrono::steady_clock::now()) {}
CommTimer::~CommTimer() {
  comm_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

Tensor RangeView(const Tensor& t, ElementRange r) {
  return Tensor(static_cast<char*>(t.data) + r.begin * DTypeSize(t.dtype), t.dtype, {r.size()}, t.device);
}

absl::Status ReduceScatterSum(Communicator& comm, Backend& be, const Tensor& full, const Tensor& shard) {
  (void)be;
  const ElementRange r = ShardOf(full.numel(), comm.rank(), comm.world_size());
  if (shard.numel() != r.size())
    return absl::InvalidArgumentError(absl::StrCat("ReduceScatterSum: ", comm.Where(), " owns ", r.size(), " of ",
                                                   full.numel(), " elements, the shard has ", shard.numel()));
  if (full.dtype != shard.dtype || (full.dtype != DType::kF32 && full.dtype != DType::kF64))
    return absl::InvalidArgumentError(absl::StrCat("ReduceScatterSum: ", comm.Where(), " sums f32 or f64 tensors of one dtype, got ",
                                                   DTypeName(full.dtype), " into ", DTypeName(shard.dtype)));
  CommTimer timer;
  return comm.ReduceScatterSum(full.data, full.numel(), full.dtype, shard.data);
}

absl::Status AllGather(Communicator& comm, Backend& be, const Tensor& shard, const Tensor& full) {
  (void)be;
  const ElementRange r = ShardOf(full.numel(), comm.rank(), comm.world_size());
  if (shard.numel() != r.size())
    return absl::InvalidArgumentError(absl::StrCat("AllGather: ", comm.Where(), " owns ", r.size(), " of ",
                                                   full.numel(), " elements, the shard has ", shard.numel()));
  CommTimer timer;
  return comm.AllGather(shard.data, full.numel(), full.dtype, full.data);
}

}  // namespace longctx
