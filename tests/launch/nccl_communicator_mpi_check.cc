// Why: the NCCL communicator must give the same answers as the MPI one on
// device buffers (all-reduce, reduce-scatter and all-gather with even and
// uneven shards, broadcast, and the context-parallel groundwork: Split into
// sub-groups, SendRecv around a ring) — checked against values each rank computes from
// the rank-dependent fills. Runs under `mpirun -np N` from ctest; with no GPU
// (or fewer GPUs than ranks on the node) every rank prints why and exits 77,
// which ctest reports as skipped. A mismatch calls AbortJob (no hang).
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "launch/communicator.h"

namespace longctx {
namespace {

constexpr int kSkip = 77;

void Fail(const std::string& what) { AbortJob(absl::InternalError("nccl check failed: " + what)); }
void Ok(const absl::Status& st, const char* what) {
  if (!st.ok()) Fail(absl::StrFormat("%s: %s", what, st.ToString()));
}
void CudaOk(cudaError_t e, const char* what) {
  if (e != cudaSuccess) Fail(absl::StrFormat("%s: %s", what, cudaGetErrorString(e)));
}

float Fill(int rank, int64_t i) { return static_cast<float>((rank + 1) * ((i % 1009) + 1)); }
float FillSum(int world, int64_t i) { return static_cast<float>(world * (world + 1) / 2 * ((i % 1009) + 1)); }

struct DeviceFloats {
  explicit DeviceFloats(int64_t n) : n(n) {
    if (n > 0) CudaOk(cudaMalloc(&p, n * sizeof(float)), "cudaMalloc");
  }
  ~DeviceFloats() { cudaFree(p); }
  void Upload(const std::vector<float>& v) {
    if (n > 0) CudaOk(cudaMemcpy(p, v.data(), n * sizeof(float), cudaMemcpyHostToDevice), "upload");
  }
  std::vector<float> Download() const {
    std::vector<float> v(n);
    if (n > 0) CudaOk(cudaMemcpy(v.data(), p, n * sizeof(float), cudaMemcpyDeviceToHost), "download");
    return v;
  }
  float* p = nullptr;
  int64_t n;
};

void Run(Communicator& c) {
  const int r = c.rank(), w = c.world_size();
  if (c.name() != "nccl" || c.device() != Device::kCuda) Fail("communicator is " + c.name());
  for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{12}, (int64_t{1} << 20) + 3}) {
    std::vector<float> host(n);
    for (int64_t i = 0; i < n; ++i) host[i] = Fill(r, i);
    DeviceFloats x(n);
    x.Upload(host);
    Ok(c.AllReduceSum(Tensor(x.p, DType::kF32, {n}, Device::kCuda)), "AllReduceSum");
    std::vector<float> got = x.Download();
    for (int64_t i = 0; i < n; ++i)
      if (got[i] != FillSum(w, i)) Fail(absl::StrFormat("AllReduceSum(%d)[%d] = %g", n, i, got[i]));

    // Reduce-scatter (even when n % w == 0, else grouped reduces), then
    // all-gather in place: equals the all-reduce.
    const IndexRange mine = ShardRange(n, r, w);
    x.Upload(host);
    DeviceFloats shard(mine.size());
    Ok(c.ReduceScatterSum(x.p, n, shard.p), "ReduceScatterSum");
    std::vector<float> s = shard.Download();
    for (int64_t i = 0; i < mine.size(); ++i)
      if (s[i] != FillSum(w, mine.begin + i)) Fail(absl::StrFormat("ReduceScatterSum(%d)[%d]", n, mine.begin + i));
    DeviceFloats full(n);
    if (mine.size() > 0)
      CudaOk(cudaMemcpy(full.p + mine.begin, shard.p, mine.size() * sizeof(float), cudaMemcpyDeviceToDevice), "copy");
    Ok(c.AllGather(full.p + mine.begin, n, full.p), "AllGather");
    std::vector<float> g = full.Download();
    for (int64_t i = 0; i < n; ++i)
      if (g[i] != FillSum(w, i)) Fail(absl::StrFormat("AllGather(ReduceScatterSum(%d))[%d] = %g", n, i, g[i]));

    for (int root = 0; root < w; ++root) {
      x.Upload(host);
      Ok(c.Broadcast(Tensor(x.p, DType::kF32, {n}, Device::kCuda), root), "Broadcast");
      std::vector<float> b = x.Download();
      for (int64_t i = 0; i < n; ++i)
        if (b[i] != Fill(root, i)) Fail(absl::StrFormat("Broadcast(%d, root %d)[%d]", n, root, i));
    }
  }
  double d[2] = {1.0 * r, -1.0 * r};
  Ok(c.AllReduceMax(d, 2), "AllReduceMax");
  if (d[0] != w - 1 || d[1] != 0) Fail("AllReduceMax(double)");
  absl::StatusOr<bool> agreed = c.AllAgree(r != w - 1);
  if (!agreed.ok() || *agreed) Fail("AllAgree with one rank saying no");
  // A host buffer is refused with a message, not a crash inside NCCL.
  std::vector<float> on_host(4, 1.0f);
  absl::Status st = c.AllReduceSum(Tensor(on_host.data(), DType::kF32, {4}, Device::kCuda));
  if (st.ok() || st.message().find("not CUDA device memory") == std::string::npos)
    Fail("a host buffer given as a CUDA tensor was not refused: " + st.ToString());
  Ok(c.Barrier(), "Barrier");
}

// Split into halves (color rank / ceil(w/2)) and a ring of SendRecv on device
// buffers in each: after step s a rank holds the block of the member s places
// before it; then a sum within the half. With one rank: its own group and ring.
void RunGroups(Communicator& c) {
  const int r = c.rank(), w = c.world_size(), half = (w + 1) / 2, color = r / half;
  absl::StatusOr<std::unique_ptr<Communicator>> g = c.Split(color, r);
  if (!g.ok()) Fail("Split: " + g.status().ToString());
  Communicator& grp = **g;
  const int first = color * half, size = std::min(w, first + half) - first;
  if (grp.world_size() != size || grp.rank() != r - first || grp.name() != "nccl")
    Fail(absl::StrFormat("Split: group rank %d/%d, expected %d/%d", grp.rank(), grp.world_size(), r - first, size));
  const int next = (grp.rank() + 1) % size, prev = (grp.rank() + size - 1) % size;
  for (int64_t n : {int64_t{0}, int64_t{5}, (int64_t{1} << 18) + 1}) {
    std::vector<float> host(n);
    for (int64_t i = 0; i < n; ++i) host[i] = Fill(r, i);
    DeviceFloats held(n), incoming(n);
    held.Upload(host);
    for (int step = 1; step <= std::max(1, size - 1); ++step) {
      Ok(grp.SendRecv(held.p, n, next, incoming.p, n, prev, DType::kF32), "SendRecv ring");
      std::swap(held.p, incoming.p);
      const int from = first + (grp.rank() - (size > 1 ? step : 0) + 4 * size) % size;
      std::vector<float> got = held.Download();
      for (int64_t i = 0; i < n; ++i)
        if (got[i] != Fill(from, i)) Fail(absl::StrFormat("SendRecv ring(%d), step %d: [%d] = %g", n, step, i, got[i]));
    }
  }
  DeviceFloats x(3);
  x.Upload({1.0f * r, 1.0f, 2.0f});
  Ok(grp.AllReduceSum(Tensor(x.p, DType::kF32, {3}, Device::kCuda)), "AllReduceSum in a group");
  std::vector<float> sum = x.Download();
  float want = 0;
  for (int k = first; k < first + size; ++k) want += static_cast<float>(k);
  if (sum[0] != want || sum[1] != static_cast<float>(size)) Fail("AllReduceSum in a group");
  std::vector<float> on_host(2, 1.0f), on_host_in(2);
  absl::Status st = grp.SendRecv(on_host.data(), 2, next, on_host_in.data(), 2, prev, DType::kF32);
  if (st.ok() || st.message().find("not CUDA device memory") == std::string::npos)
    Fail("SendRecv of host buffers was not refused: " + st.ToString());
  Ok(c.Barrier(), "Barrier after groups");
}

}  // namespace
}  // namespace longctx

int main() {
  using namespace longctx;
  int devices = 0;
  cudaError_t e = cudaGetDeviceCount(&devices);
  const char* local_size = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  const int local_ranks = local_size != nullptr ? std::atoi(local_size) : 1;
  if (e != cudaSuccess || devices == 0) {
    std::printf("LONGCTX_SKIP(no_cuda_device): no GPU (cudaGetDeviceCount: %d devices, %s)\n", devices, cudaGetErrorString(e));
    return kSkip;
  }
  if (devices < local_ranks) {
    std::printf("LONGCTX_SKIP(too_few_cuda_devices): %d GPUs for %d ranks on this node (NCCL needs one GPU per rank)\n", devices, local_ranks);
    return kSkip;
  }
  absl::StatusOr<std::unique_ptr<Communicator>> comm = MakeCommunicator(Device::kCuda);
  if (!comm.ok()) AbortJob(comm.status());
  Run(**comm);
  RunGroups(**comm);
  std::printf("nccl_communicator_mpi_check: %s: passed\n", (*comm)->Where().c_str());
  return 0;
}
