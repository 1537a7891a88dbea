// Why: the pieces of the communicator contract that do not depend on the
// transport — the one shard layout (ShardRange), argument checks every
// implementation shares (so they fail alike, on every rank, before any
// communication), agreement built on an int64 min-reduction, and the launcher
// detection the factory decides by.
#include "launch/communicator.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace longctx {

IndexRange ShardRange(int64_t n, int rank, int world) {
  if (n < 0 || world <= 0 || rank < 0 || rank >= world) return IndexRange{0, 0};
  const int64_t q = n / world, rem = n % world;
  const int64_t begin = rank * q + std::min<int64_t>(rank, rem);
  return IndexRange{begin, begin + q + (rank < rem ? 1 : 0)};
}

int ShardOwner(int64_t n, int64_t i, int world) {
  const int64_t q = n / world, rem = n % world;
  // The first rem shards hold q + 1 elements, the rest q.
  const int64_t big = rem * (q + 1);
  if (i < big) return static_cast<int>(i / (q + 1));
  return static_cast<int>(rem + (i - big) / q);
}

std::string Communicator::Where() const {
  return absl::StrFormat("%s rank %d/%d", name(), rank(), world_size());
}

absl::Status Communicator::ReduceScatterSum(const void* full, int64_t n, DType dtype, void* shard) {
  const char* what;
  switch (dtype) {
    case DType::kF32: what = "floats"; break;
    case DType::kF64: what = "doubles"; break;
    default:
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: ReduceScatterSum sums f32 or f64 elements, not %s", Where(), DTypeName(dtype)));
  }
  if (absl::Status st = CheckCount(n, full, "ReduceScatterSum"); !st.ok()) return st;
  const IndexRange mine = ShardRange(n, rank(), world_size());
  if (absl::Status st = CheckCount(mine.size(), shard, "ReduceScatterSum"); !st.ok()) return st;
  return ReduceScatterShards(full, n, SumShards{dtype, what, static_cast<int64_t>(DTypeSize(dtype)), mine}, shard);
}

absl::Status Communicator::ReduceScatterShards(const void*, int64_t, const SumShards& s, void*) {
  return absl::UnimplementedError(absl::StrFormat(
      "%s: ReduceScatterSum of %s elements is not implemented by the %s communicator", Where(), DTypeName(s.dtype),
      name()));
}

absl::StatusOr<std::unique_ptr<Communicator>> Communicator::Split(int, int) {
  return absl::UnimplementedError(
      absl::StrFormat("%s: Split (sub-groups) is not implemented by the %s communicator", Where(), name()));
}

absl::Status Communicator::SendRecv(const void* send, int64_t send_count, int dest, void* recv, int64_t recv_count,
                                    int source, DType dtype) {
  for (auto [peer, what] : {std::pair<int, const char*>{dest, "dest"}, {source, "source"}})
    if (peer < 0 || peer >= world_size())
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: SendRecv: %s %d is not a rank of a world of %d", Where(), what, peer, world_size()));
  if (absl::Status st = CheckCount(send_count, send, "SendRecv (send)"); !st.ok()) return st;
  if (absl::Status st = CheckCount(recv_count, recv, "SendRecv (receive)"); !st.ok()) return st;
  const int64_t esz = static_cast<int64_t>(DTypeSize(dtype));
  if (send_count > 0 && recv_count > 0) {
    const auto a = reinterpret_cast<uintptr_t>(send), b = reinterpret_cast<uintptr_t>(recv);
    if (a < b + static_cast<uintptr_t>(recv_count * esz) && b < a + static_cast<uintptr_t>(send_count * esz))
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: SendRecv: the send and receive buffers overlap", Where()));
  }
  if (dest == rank() && source == rank() && send_count != recv_count)
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: SendRecv to itself sends %d elements but receives %d", Where(), send_count, recv_count));
  return SendRecvElements(send, send_count, dest, recv, recv_count, source, dtype, esz);
}

absl::Status Communicator::SendRecvElements(const void*, int64_t, int, void*, int64_t, int, DType, int64_t) {
  return absl::UnimplementedError(
      absl::StrFormat("%s: SendRecv is not implemented by the %s communicator", Where(), name()));
}

absl::StatusOr<bool> Communicator::AllAgree(bool local_ok) {
  int64_t v = local_ok ? 1 : 0;
  absl::Status st = AllReduce(&v, 1, ReduceOp::kMin);
  if (!st.ok()) return st;
  return v == 1;
}

absl::Status Communicator::CheckRoot(int root, const char* op) const {
  if (root < 0 || root >= world_size())
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: %s: root %d is not a rank of a world of %d", Where(), op, root, world_size()));
  return absl::OkStatus();
}

absl::Status Communicator::CheckCount(int64_t n, const void* p, const char* op) const {
  if (n < 0) return absl::InvalidArgumentError(absl::StrFormat("%s: %s: negative count %d", Where(), op, n));
  if (n > 0 && p == nullptr)
    return absl::InvalidArgumentError(absl::StrFormat("%s: %s: null buffer for %d elements", Where(), op, n));
  return absl::OkStatus();
}

absl::Status Communicator::CheckTensor(const Tensor& x, bool f32_only, const char* op) const {
  if (f32_only && x.dtype != DType::kF32)
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: %s: needs a float32 tensor, got %s", Where(), op, x.DebugString()));
  if (!x.contiguous())
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: %s: needs a contiguous tensor, got %s", Where(), op, x.DebugString()));
  if (x.device != device())
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: %s: tensor is on %s memory, this communicator works on %s memory (%s)", Where(), op,
        x.device == Device::kCuda ? "CUDA" : "host", device() == Device::kCuda ? "CUDA" : "host", x.DebugString()));
  if (x.numel() > 0 && x.data == nullptr)
    return absl::InvalidArgumentError(absl::StrFormat("%s: %s: tensor has no data: %s", Where(), op, x.DebugString()));
  return absl::OkStatus();
}

std::string DetectLauncher() {
  auto has = [](const char* name) {
    const char* v = std::getenv(name);
    return v != nullptr && v[0] != '\0';
  };
  if (has("OMPI_COMM_WORLD_SIZE")) return "openmpi";
  if (has("PMIX_RANK")) return "pmix";
  if (has("PMI_RANK")) return "pmi";
  if (has("SLURM_PROCID") && has("SLURM_NTASKS")) return "slurm";
  return "";
}

}  // namespace longctx
