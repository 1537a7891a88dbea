// Why: a single-process run goes through the same collective calls as a
// distributed one, so the trainer has one code path. With one rank, sums, max
// and min are the identity, the one shard is the whole buffer, and there is
// nobody to wait for.
#include <cstring>

#include "absl/strings/str_cat.h"
#include "launch/communicator.h"

namespace longctx {
namespace {

class LocalCommunicator final : public Communicator {
 public:
  using Communicator::AllGather;
  using Communicator::AllReduceSum;
  using Communicator::ReduceScatterSum;

  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  int local_rank() const override { return 0; }
  int local_world_size() const override { return 1; }
  std::string name() const override { return "local"; }
  // The identity works on any memory and dtype, so the tensor collectives
  // accept every tensor, as they always have (bf16 or CUDA gradients included).
  Device device() const override { return Device::kCpu; }

  absl::Status AllReduceSum(const Tensor&) override { return absl::OkStatus(); }
  absl::Status AllReduceSum(double* values, int count) override {
    return CheckCount(count, values, "AllReduceSum(double)");
  }
  absl::Status AllReduce(double* values, int64_t count, ReduceOp) override {
    return CheckCount(count, values, "AllReduce(double)");
  }
  absl::Status AllReduce(int64_t* values, int64_t count, ReduceOp) override {
    return CheckCount(count, values, "AllReduce(int64)");
  }
  // World of one: the shard is the whole buffer (the shared checks of
  // ReduceScatterSum passed for it).
  absl::Status ReduceScatterShards(const void* full, int64_t n, const SumShards& s, void* shard) override {
    if (n > 0 && shard != full) std::memmove(shard, full, static_cast<size_t>(n * s.elem_size));
    return absl::OkStatus();
  }
  absl::Status AllGather(const void* shard, int64_t n, DType dtype, void* full) override {
    if (absl::Status st = CheckCount(n, shard, "AllGather"); !st.ok()) return st;
    if (absl::Status st = CheckCount(n, full, "AllGather"); !st.ok()) return st;
    if (n > 0 && shard != full) std::memmove(full, shard, static_cast<size_t>(n) * DTypeSize(dtype));
    return absl::OkStatus();
  }
  absl::Status Broadcast(const Tensor&, int root) override {
    return CheckRoot(root, "Broadcast");
  }
  absl::Status BroadcastBytes(void* data, int64_t nbytes, int root) override {
    if (absl::Status st = CheckRoot(root, "BroadcastBytes"); !st.ok()) return st;
    return CheckCount(nbytes, data, "BroadcastBytes");
  }
  absl::Status Barrier() override { return absl::OkStatus(); }
  // The one rank is its own group, whatever the color.
  absl::StatusOr<std::unique_ptr<Communicator>> Split(int color, int) override {
    if (color < 0)
      return absl::InvalidArgumentError(absl::StrCat(Where(), ": Split: color ", color, " must be >= 0"));
    return MakeLocalCommunicator();
  }

 protected:
  // dest == source == 0 (the shared checks), equal counts: a copy.
  absl::Status SendRecvElements(const void* send, int64_t send_count, int, void* recv, int64_t, int, DType,
                                int64_t esz) override {
    if (send_count > 0) std::memmove(recv, send, static_cast<size_t>(send_count * esz));
    return absl::OkStatus();
  }
};

}  // namespace

std::unique_ptr<Communicator> MakeLocalCommunicator() { return std::make_unique<LocalCommunicator>(); }

}  // namespace longctx
