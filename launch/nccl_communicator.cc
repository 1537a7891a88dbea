// Why: see nccl_communicator.h — NCCL collectives on CUDA device buffers
// behind the Communicator interface; host scalars and bytes go over MPI.
#include "launch/nccl_communicator.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdint>
#include <string>

#include "absl/strings/str_format.h"

namespace longctx {
namespace {

ncclDataType_t NcclType(DType dtype) {
  switch (dtype) {
    case DType::kF32: return ncclFloat32;
    case DType::kF64: return ncclFloat64;
    case DType::kBF16: return ncclBfloat16;
    case DType::kI32: return ncclInt32;
  }
  return ncclUint8;
}

class NcclCommunicator final : public Communicator {
 public:
  using Communicator::AllGather;
  using Communicator::AllReduceSum;
  using Communicator::ReduceScatterSum;

  NcclCommunicator(std::unique_ptr<Communicator> host, int gpu) : host_(std::move(host)), gpu_(gpu) {}
  // A sub-group's: comm made by ncclCommSplit (taken over).
  NcclCommunicator(std::unique_ptr<Communicator> host, int gpu, ncclComm_t comm)
      : host_(std::move(host)), gpu_(gpu), comm_(comm) {}

  // Second phase of a split communicator's construction: its own stream.
  absl::Status InitStream() {
    if (absl::Status st = Cuda(cudaSetDevice(gpu_), absl::StrFormat("cudaSetDevice(%d)", gpu_)); !st.ok()) return st;
    return Cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  }

  // Second phase of construction (needs Where() for messages).
  absl::Status Init() {
    if (absl::Status st = Cuda(cudaSetDevice(gpu_), absl::StrFormat("cudaSetDevice(%d)", gpu_)); !st.ok()) return st;
    ncclUniqueId id{};
    if (rank() == 0) {
      if (absl::Status st = Nccl(ncclGetUniqueId(&id), "ncclGetUniqueId"); !st.ok()) return st;
    }
    if (absl::Status st = host_->BroadcastBytes(&id, sizeof(id), 0); !st.ok()) return st;
    if (absl::Status st = Nccl(ncclCommInitRank(&comm_, world_size(), id, rank()), "ncclCommInitRank"); !st.ok())
      return st;
    return Cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  }

  ~NcclCommunicator() override {
    if (comm_ != nullptr) ncclCommDestroy(comm_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  int rank() const override { return host_->rank(); }
  int world_size() const override { return host_->world_size(); }
  int local_rank() const override { return host_->local_rank(); }
  int local_world_size() const override { return host_->local_world_size(); }
  std::string name() const override { return "nccl"; }
  Device device() const override { return Device::kCuda; }

  absl::Status AllReduceSum(const Tensor& x) override {
    if (absl::Status st = CheckTensor(x, /*f32_only=*/false, "AllReduceSum"); !st.ok()) return st;
    if (x.numel() == 0) return absl::OkStatus();  // an empty tensor may have no buffer (Broadcast alike)
    if (absl::Status st = CheckDevicePointer(x.data, "AllReduceSum"); !st.ok()) return st;
    return Run(ncclAllReduce(x.data, x.data, static_cast<size_t>(x.numel()), NcclType(x.dtype), ncclSum, comm_,
                             stream_),
               absl::StrFormat("ncclAllReduce(%s)", x.DebugString()));
  }
  // Host scalars: over MPI.
  absl::Status AllReduceSum(double* values, int count) override { return host_->AllReduceSum(values, count); }
  absl::Status AllReduce(double* values, int64_t count, ReduceOp op) override {
    return host_->AllReduce(values, count, op);
  }
  absl::Status AllReduce(int64_t* values, int64_t count, ReduceOp op) override {
    return host_->AllReduce(values, count, op);
  }

  absl::Status ReduceScatterShards(const void* full, int64_t n, const SumShards& s, void* shard) override {
    const char* what = s.what;
    const size_t esz = static_cast<size_t>(s.elem_size);
    const DType dtype = s.dtype;
    if (n == 0) return absl::OkStatus();
    if (absl::Status st = CheckDevicePointer(full, "ReduceScatterSum"); !st.ok()) return st;
    if (n % world_size() == 0) {
      if (absl::Status st = CheckDevicePointer(shard, "ReduceScatterSum"); !st.ok()) return st;
      return Run(ncclReduceScatter(full, shard, static_cast<size_t>(n / world_size()), NcclType(dtype), ncclSum,
                                   comm_, stream_),
                 absl::StrFormat("ncclReduceScatter(%d %s)", n, what));
    }
    // Uneven shards (ncclReduceScatter needs equal ones): one reduce per owner,
    // grouped so NCCL runs them together.
    const char* full_bytes = static_cast<const char*>(full);
    ncclGroupStart();
    for (int r = 0; r < world_size(); ++r) {
      const IndexRange range = ShardRange(n, r, world_size());
      if (range.size() == 0) continue;
      ncclResult_t res = ncclReduce(full_bytes + range.begin * esz, r == rank() ? shard : nullptr,
                                    static_cast<size_t>(range.size()), NcclType(dtype), ncclSum, r, comm_, stream_);
      if (res != ncclSuccess) {
        ncclGroupEnd();
        return Nccl(res, absl::StrFormat("ncclReduce(ReduceScatterSum of %d %s, root %d)", n, what, r));
      }
    }
    return Run(ncclGroupEnd(), absl::StrFormat("ReduceScatterSum(%d %s, uneven shards)", n, what));
  }

  absl::Status AllGather(const void* shard, int64_t n, DType dtype, void* full) override {
    if (absl::Status st = CheckCount(n, full, "AllGather"); !st.ok()) return st;
    const IndexRange mine = ShardRange(n, rank(), world_size());
    if (absl::Status st = CheckCount(mine.size(), shard, "AllGather"); !st.ok()) return st;
    if (n == 0) return absl::OkStatus();
    if (absl::Status st = CheckDevicePointer(full, "AllGather"); !st.ok()) return st;
    const size_t esz = DTypeSize(dtype);
    char* full_bytes = static_cast<char*>(full);
    if (n % world_size() == 0)
      return Run(ncclAllGather(shard, full, static_cast<size_t>(n / world_size()), NcclType(dtype), comm_, stream_),
                 absl::StrFormat("ncclAllGather(%d %s elements)", n, DTypeName(dtype)));
    ncclGroupStart();
    for (int r = 0; r < world_size(); ++r) {
      const IndexRange range = ShardRange(n, r, world_size());
      if (range.size() == 0) continue;
      char* dst = full_bytes + range.begin * esz;
      ncclResult_t res = ncclBroadcast(r == rank() ? shard : dst, dst, static_cast<size_t>(range.size()),
                                       NcclType(dtype), r, comm_, stream_);
      if (res != ncclSuccess) {
        ncclGroupEnd();
        return Nccl(res, absl::StrFormat("ncclBroadcast(AllGather of %d elements, root %d)", n, r));
      }
    }
    return Run(ncclGroupEnd(), absl::StrFormat("AllGather(%d %s elements, uneven shards)", n, DTypeName(dtype)));
  }

  absl::Status Broadcast(const Tensor& x, int root) override {
    if (absl::Status st = CheckRoot(root, "Broadcast"); !st.ok()) return st;
    if (absl::Status st = CheckTensor(x, /*f32_only=*/false, "Broadcast"); !st.ok()) return st;
    if (x.numel() == 0) return absl::OkStatus();
    if (absl::Status st = CheckDevicePointer(x.data, "Broadcast"); !st.ok()) return st;
    return Run(ncclBroadcast(x.data, x.data, x.nbytes(), ncclUint8, root, comm_, stream_),
               absl::StrFormat("ncclBroadcast(%s, root %d)", x.DebugString(), root));
  }
  absl::Status BroadcastBytes(void* data, int64_t nbytes, int root) override {
    return host_->BroadcastBytes(data, nbytes, root);
  }
  absl::Status Barrier() override {
    if (absl::Status st = Cuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"); !st.ok()) return st;
    return host_->Barrier();
  }

  // Host side first (every rank of this world calls both, in this order), so
  // an MPI error is reported before NCCL is asked; the same color and key make
  // the two sub-groups' ranks agree.
  absl::StatusOr<std::unique_ptr<Communicator>> Split(int color, int key) override {
    if (color < 0)
      return absl::InvalidArgumentError(absl::StrFormat("%s: Split: color %d must be >= 0", Where(), color));
    absl::StatusOr<std::unique_ptr<Communicator>> host = host_->Split(color, key);
    if (!host.ok()) return host.status();
    ncclComm_t sub = nullptr;
    if (absl::Status st = Nccl(ncclCommSplit(comm_, color, key, &sub, nullptr),
                               absl::StrFormat("ncclCommSplit(color %d, key %d)", color, key));
        !st.ok())
      return st;
    auto comm = std::make_unique<NcclCommunicator>(std::move(*host), gpu_, sub);
    int nccl_rank = -1;
    ncclCommUserRank(sub, &nccl_rank);
    if (nccl_rank != comm->rank())
      return absl::InternalError(absl::StrFormat("%s: Split: NCCL rank %d differs from the MPI sub-group's",
                                                 comm->Where(), nccl_rank));
    if (absl::Status st = comm->InitStream(); !st.ok()) return st;
    return std::unique_ptr<Communicator>(std::move(comm));
  }

 protected:
  absl::Status SendRecvElements(const void* send, int64_t send_count, int dest, void* recv, int64_t recv_count,
                                int source, DType dtype, int64_t) override {
    if (send_count > 0)
      if (absl::Status st = CheckDevicePointer(send, "SendRecv"); !st.ok()) return st;
    if (recv_count > 0)
      if (absl::Status st = CheckDevicePointer(recv, "SendRecv"); !st.ok()) return st;
    if (send_count == 0 && recv_count == 0) return absl::OkStatus();
    const std::string what = absl::StrFormat("SendRecv(%d %s elements to rank %d, %d from rank %d)", send_count,
                                             DTypeName(dtype), dest, recv_count, source);
    ncclGroupStart();
    if (send_count > 0) {
      if (ncclResult_t r = ncclSend(send, static_cast<size_t>(send_count), NcclType(dtype), dest, comm_, stream_);
          r != ncclSuccess) {
        ncclGroupEnd();
        return Nccl(r, what + ": ncclSend");
      }
    }
    if (recv_count > 0) {
      if (ncclResult_t r = ncclRecv(recv, static_cast<size_t>(recv_count), NcclType(dtype), source, comm_, stream_);
          r != ncclSuccess) {
        ncclGroupEnd();
        return Nccl(r, what + ": ncclRecv");
      }
    }
    return Run(ncclGroupEnd(), what);
  }

 private:
  absl::Status Cuda(cudaError_t e, const std::string& what) const {
    if (e == cudaSuccess) return absl::OkStatus();
    return absl::InternalError(absl::StrFormat("%s (GPU %d): %s failed: %s", Where(), gpu_, what, cudaGetErrorString(e)));
  }
  absl::Status Nccl(ncclResult_t r, const std::string& what) const {
    if (r == ncclSuccess) return absl::OkStatus();
    const char* last = comm_ != nullptr ? ncclGetLastError(comm_) : nullptr;
    return absl::InternalError(absl::StrFormat("%s (GPU %d): %s failed: %s%s%s", Where(), gpu_, what,
                                               ncclGetErrorString(r), last != nullptr && last[0] ? ": " : "",
                                               last != nullptr ? last : ""));
  }
  // Issue, then wait: collectives return with their result in place.
  absl::Status Run(ncclResult_t r, const std::string& what) {
    if (absl::Status st = Nccl(r, what); !st.ok()) return st;
    return Cuda(cudaStreamSynchronize(stream_), what + ": cudaStreamSynchronize");
  }
  // A host pointer handed to NCCL would crash the process instead of failing.
  absl::Status CheckDevicePointer(const void* p, const char* op) const {
    cudaPointerAttributes attr{};
    if (cudaPointerGetAttributes(&attr, p) != cudaSuccess || (attr.type != cudaMemoryTypeDevice &&
                                                              attr.type != cudaMemoryTypeManaged)) {
      cudaGetLastError();  // clear the sticky-free error of the query
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: %s: buffer %p is not CUDA device memory", Where(), op, p));
    }
    return absl::OkStatus();
  }

  std::unique_ptr<Communicator> host_;
  int gpu_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Communicator>> MakeNcclCommunicator(std::unique_ptr<Communicator> host) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0)
    return absl::FailedPreconditionError(absl::StrFormat("%s: NCCL communicator needs a GPU, found none%s",
                                                         host->Where(),
                                                         e != cudaSuccess ? std::string(": ") + cudaGetErrorString(e)
                                                                          : std::string()));
  if (host->local_world_size() > count)
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s: %d ranks on this node but %d GPUs: NCCL needs one GPU per rank", host->Where(),
        host->local_world_size(), count));
  const int gpu = host->local_rank() % count;
  auto comm = std::make_unique<NcclCommunicator>(std::move(host), gpu);
  if (absl::Status st = comm->Init(); !st.ok()) return st;
  return std::unique_ptr<Communicator>(std::move(comm));
}

}  // namespace longctx
