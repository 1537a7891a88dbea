// Why: see mpi_communicator.h — the Open MPI transport behind the Communicator
// interface, with every MPI return code turned into a Status that names the
// call, the rank and the world, and int-sized counts chunked.
#include "launch/mpi_communicator.h"

#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"

namespace longctx {
namespace {

void FinalizeMpiAtExit() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Finalize();
}

std::string MpiErrorText(int rc) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) return absl::StrFormat("MPI error code %d", rc);
  return std::string(text, static_cast<size_t>(len));
}

// The MPI datatype of one element of dtype (a copy type for bf16: gathers and
// broadcasts only move bits).
MPI_Datatype ElementType(DType dtype) {
  switch (dtype) {
    case DType::kF32: return MPI_FLOAT;
    case DType::kF64: return MPI_DOUBLE;
    case DType::kBF16: return MPI_UINT16_T;
    case DType::kI32: return MPI_INT32_T;
  }
  return MPI_DATATYPE_NULL;
}

MPI_Op OpOf(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return MPI_SUM;
    case ReduceOp::kMax: return MPI_MAX;
    case ReduceOp::kMin: return MPI_MIN;
  }
  return MPI_OP_NULL;
}

const char* OpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return "sum";
    case ReduceOp::kMax: return "max";
    case ReduceOp::kMin: return "min";
  }
  return "?";
}

bool Overlap(const void* a, int64_t a_bytes, const void* b, int64_t b_bytes) {
  if (a_bytes <= 0 || b_bytes <= 0) return false;
  const auto pa = reinterpret_cast<uintptr_t>(a), pb = reinterpret_cast<uintptr_t>(b);
  return pa < pb + static_cast<uintptr_t>(b_bytes) && pb < pa + static_cast<uintptr_t>(a_bytes);
}

// A communicator over `comm` (taken over: freed on error and by the
// communicator): MPI_ERRORS_RETURN set, ranks asked of MPI, the node-local
// sub-communicator split off. `who` prefixes errors before there is a Where().
absl::StatusOr<std::unique_ptr<Communicator>> WrapComm(MPI_Comm comm, const MpiOptions& options,
                                                       const std::string& who);

// Point-to-point messages of SendRecv. Collectives match in a context of
// their own in MPI, so one tag cannot be confused with them.
constexpr int kSendRecvTag = 0x5e4d;

class MpiCommunicator final : public Communicator {
 public:
  using Communicator::AllGather;
  using Communicator::AllReduceSum;
  using Communicator::ReduceScatterSum;

  MpiCommunicator(MPI_Comm comm, MPI_Comm local, int rank, int world, int local_rank, int local_world,
                  const MpiOptions& options)
      : comm_(comm),
        local_(local),
        rank_(rank),
        world_(world),
        local_rank_(local_rank),
        local_world_(local_world),
        max_count_(std::max<int64_t>(1, std::min<int64_t>(options.max_count, INT_MAX))) {}

  ~MpiCommunicator() override {
    // After MPI_Finalize (a communicator outliving main) nothing may be freed.
    if (MpiIsActive()) {
      MPI_Comm_free(&local_);
      MPI_Comm_free(&comm_);
    }
  }

  int rank() const override { return rank_; }
  int world_size() const override { return world_; }
  int local_rank() const override { return local_rank_; }
  int local_world_size() const override { return local_world_; }
  std::string name() const override { return "mpi"; }
  Device device() const override { return Device::kCpu; }

  absl::Status AllReduceSum(const Tensor& x) override {
    if (absl::Status st = CheckTensor(x, /*f32_only=*/false, "AllReduceSum"); !st.ok()) return st;
    if (x.dtype == DType::kBF16)
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: AllReduceSum: MPI cannot sum bf16; reduce a float32 copy (%s)", Where(), x.DebugString()));
    return AllReduceRaw(x.data, x.numel(), ElementType(x.dtype), MPI_SUM, "AllReduceSum(tensor)");
  }
  absl::Status AllReduceSum(double* values, int count) override {
    if (absl::Status st = CheckCount(count, values, "AllReduceSum(double)"); !st.ok()) return st;
    return AllReduceRaw(values, count, MPI_DOUBLE, MPI_SUM, "AllReduceSum(double)");
  }
  absl::Status AllReduce(double* values, int64_t count, ReduceOp op) override {
    if (absl::Status st = CheckCount(count, values, "AllReduce(double)"); !st.ok()) return st;
    return AllReduceRaw(values, count, MPI_DOUBLE, OpOf(op), absl::StrFormat("AllReduce(double, %s)", OpName(op)));
  }
  absl::Status AllReduce(int64_t* values, int64_t count, ReduceOp op) override {
    if (absl::Status st = CheckCount(count, values, "AllReduce(int64)"); !st.ok()) return st;
    return AllReduceRaw(values, count, MPI_INT64_T, OpOf(op), absl::StrFormat("AllReduce(int64, %s)", OpName(op)));
  }

  absl::Status ReduceScatterShards(const void* full, int64_t n, const SumShards& s, void* shard) override {
    const char* what = s.what;
    const MPI_Datatype type = ElementType(s.dtype);
    const int64_t esz = s.elem_size;
    const IndexRange mine = s.mine;
    if (Overlap(full, n * esz, shard, mine.size() * esz))
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: ReduceScatterSum: the shard buffer overlaps the full buffer (n=%d)", Where(), n));
    if (absl::Status st = CheckThread("ReduceScatterSum"); !st.ok()) return st;
    if (n == 0) return absl::OkStatus();
    if (n <= max_count_) {
      std::vector<int> counts(world_);
      for (int r = 0; r < world_; ++r) counts[r] = static_cast<int>(ShardRange(n, r, world_).size());
      return Check(MPI_Reduce_scatter(full, shard, counts.data(), type, MPI_SUM, comm_),
                   absl::StrFormat("MPI_Reduce_scatter(%d %s)", n, what));
    }
    // Too large for int counts: one reduce per shard owner, in chunks.
    const char* full_bytes = static_cast<const char*>(full);
    char* shard_bytes = static_cast<char*>(shard);
    for (int r = 0; r < world_; ++r) {
      const IndexRange range = ShardRange(n, r, world_);
      for (int64_t off = 0; off < range.size(); off += max_count_) {
        const int c = static_cast<int>(std::min(max_count_, range.size() - off));
        if (absl::Status st = Check(MPI_Reduce(full_bytes + (range.begin + off) * esz,
                                               r == rank_ ? shard_bytes + off * esz : nullptr, c, type, MPI_SUM, r,
                                               comm_),
                                    absl::StrFormat("MPI_Reduce(ReduceScatterSum of %d %s, root %d, chunk at %d)", n,
                                                    what, r, range.begin + off));
            !st.ok())
          return st;
      }
    }
    return absl::OkStatus();
  }

  absl::Status AllGather(const void* shard, int64_t n, DType dtype, void* full) override {
    if (absl::Status st = CheckCount(n, full, "AllGather"); !st.ok()) return st;
    const IndexRange mine = ShardRange(n, rank_, world_);
    if (absl::Status st = CheckCount(mine.size(), shard, "AllGather"); !st.ok()) return st;
    const int64_t esz = static_cast<int64_t>(DTypeSize(dtype));
    char* full_bytes = static_cast<char*>(full);
    const bool in_place = shard == full_bytes + mine.begin * esz;
    if (!in_place && Overlap(full, n * esz, shard, mine.size() * esz))
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: AllGather: the shard buffer overlaps the full buffer but is not its piece [%d, %d) (n=%d)", Where(),
          mine.begin, mine.end, n));
    if (absl::Status st = CheckThread("AllGather"); !st.ok()) return st;
    if (n == 0) return absl::OkStatus();
    const MPI_Datatype type = ElementType(dtype);
    if (n <= max_count_) {
      std::vector<int> counts(world_), displs(world_);
      for (int r = 0; r < world_; ++r) {
        const IndexRange range = ShardRange(n, r, world_);
        counts[r] = static_cast<int>(range.size());
        displs[r] = static_cast<int>(range.begin);
      }
      return Check(MPI_Allgatherv(in_place ? MPI_IN_PLACE : shard, counts[rank_], type, full, counts.data(),
                                  displs.data(), type, comm_),
                   absl::StrFormat("MPI_Allgatherv(%d %s elements)", n, DTypeName(dtype)));
    }
    // Too large for int displacements: each owner broadcasts its shard, in chunks.
    if (!in_place && mine.size() > 0)
      std::memcpy(full_bytes + mine.begin * esz, shard, static_cast<size_t>(mine.size() * esz));
    for (int r = 0; r < world_; ++r) {
      const IndexRange range = ShardRange(n, r, world_);
      for (int64_t off = 0; off < range.size(); off += max_count_) {
        const int c = static_cast<int>(std::min(max_count_, range.size() - off));
        if (absl::Status st = Check(MPI_Bcast(full_bytes + (range.begin + off) * esz, c, type, r, comm_),
                                    absl::StrFormat("MPI_Bcast(AllGather of %d %s elements, root %d, chunk at %d)", n,
                                                    DTypeName(dtype), r, range.begin + off));
            !st.ok())
          return st;
      }
    }
    return absl::OkStatus();
  }

  absl::Status Broadcast(const Tensor& x, int root) override {
    if (absl::Status st = CheckRoot(root, "Broadcast"); !st.ok()) return st;
    if (absl::Status st = CheckTensor(x, /*f32_only=*/false, "Broadcast"); !st.ok()) return st;
    return BroadcastRaw(x.data, static_cast<int64_t>(x.nbytes()), root, "Broadcast(tensor)");
  }
  absl::Status BroadcastBytes(void* data, int64_t nbytes, int root) override {
    if (absl::Status st = CheckRoot(root, "BroadcastBytes"); !st.ok()) return st;
    if (absl::Status st = CheckCount(nbytes, data, "BroadcastBytes"); !st.ok()) return st;
    return BroadcastRaw(data, nbytes, root, "BroadcastBytes");
  }

  absl::Status Barrier() override {
    if (absl::Status st = CheckThread("Barrier"); !st.ok()) return st;
    return Check(MPI_Barrier(comm_), "MPI_Barrier");
  }

  absl::StatusOr<std::unique_ptr<Communicator>> Split(int color, int key) override {
    if (color < 0)
      return absl::InvalidArgumentError(absl::StrFormat("%s: Split: color %d must be >= 0", Where(), color));
    if (absl::Status st = CheckThread("Split"); !st.ok()) return st;
    MPI_Comm sub = MPI_COMM_NULL;
    if (absl::Status st = Check(MPI_Comm_split(comm_, color, key, &sub),
                                absl::StrFormat("MPI_Comm_split(color %d, key %d)", color, key));
        !st.ok())
      return st;
    MpiOptions options;
    options.max_count = max_count_;
    return WrapComm(sub, options, absl::StrFormat("%s: Split(color %d, key %d)", Where(), color, key));
  }

 protected:
  // In chunks of at most max_count_ elements per side. A side sends (or
  // receives) a message in chunk i only while its own count lasts, so both
  // ends of every pair agree on the messages between them (what a sends to b,
  // b receives with the same count); the other side of a step is
  // MPI_PROC_NULL. A count of 0 moves no message at all.
  absl::Status SendRecvElements(const void* send, int64_t send_count, int dest, void* recv, int64_t recv_count,
                                int source, DType dtype, int64_t esz) override {
    if (absl::Status st = CheckThread("SendRecv"); !st.ok()) return st;
    const MPI_Datatype type = ElementType(dtype);
    const char* send_bytes = static_cast<const char*>(send);
    char* recv_bytes = static_cast<char*>(recv);
    for (int64_t off = 0; off < std::max(send_count, recv_count); off += max_count_) {
      const int sc = static_cast<int>(std::clamp<int64_t>(send_count - off, 0, max_count_));
      const int rc = static_cast<int>(std::clamp<int64_t>(recv_count - off, 0, max_count_));
      if (absl::Status st = Check(
              MPI_Sendrecv(sc > 0 ? send_bytes + off * esz : nullptr, sc, type, sc > 0 ? dest : MPI_PROC_NULL,
                           kSendRecvTag, rc > 0 ? recv_bytes + off * esz : nullptr, rc, type,
                           rc > 0 ? source : MPI_PROC_NULL, kSendRecvTag, comm_, MPI_STATUS_IGNORE),
              absl::StrFormat("MPI_Sendrecv(%d %s elements to rank %d, %d from rank %d, chunk at %d)", send_count,
                              DTypeName(dtype), dest, recv_count, source, off));
          !st.ok())
        return st;
    }
    return absl::OkStatus();
  }

 private:
  absl::Status Check(int rc, const std::string& what) const {
    if (rc == MPI_SUCCESS) return absl::OkStatus();
    return absl::InternalError(absl::StrFormat("%s: %s failed: %s", Where(), what, MpiErrorText(rc)));
  }

  // MPI_THREAD_FUNNELED: only the thread that initialized MPI may call it.
  absl::Status CheckThread(const char* op) const {
    int is_main = 0;
    MPI_Is_thread_main(&is_main);
    if (!is_main)
      return absl::FailedPreconditionError(absl::StrFormat(
          "%s: %s called from a thread other than the one that initialized MPI (MPI_THREAD_FUNNELED)", Where(),
          op));
    return absl::OkStatus();
  }

  absl::Status AllReduceRaw(void* data, int64_t count, MPI_Datatype type, MPI_Op op, const std::string& what) {
    if (absl::Status st = CheckThread(what.c_str()); !st.ok()) return st;
    int esz = 0;
    MPI_Type_size(type, &esz);
    char* bytes = static_cast<char*>(data);
    for (int64_t off = 0; off < count; off += max_count_) {
      const int c = static_cast<int>(std::min(max_count_, count - off));
      if (absl::Status st = Check(MPI_Allreduce(MPI_IN_PLACE, bytes + off * esz, c, type, op, comm_),
                                  absl::StrFormat("MPI_Allreduce(%s, %d elements, chunk at %d)", what, count, off));
          !st.ok())
        return st;
    }
    return absl::OkStatus();
  }

  absl::Status BroadcastRaw(void* data, int64_t nbytes, int root, const char* what) {
    if (absl::Status st = CheckThread(what); !st.ok()) return st;
    char* bytes = static_cast<char*>(data);
    for (int64_t off = 0; off < nbytes; off += max_count_) {
      const int c = static_cast<int>(std::min(max_count_, nbytes - off));
      if (absl::Status st = Check(MPI_Bcast(bytes + off, c, MPI_BYTE, root, comm_),
                                  absl::StrFormat("MPI_Bcast(%s, %d bytes from root %d, chunk at %d)", what, nbytes,
                                                  root, off));
          !st.ok())
        return st;
    }
    return absl::OkStatus();
  }

  MPI_Comm comm_;
  MPI_Comm local_;
  int rank_, world_, local_rank_, local_world_;
  int64_t max_count_;
};

}  // namespace

bool MpiIsActive() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized && !finalized;
}

absl::Status EnsureMpiInitialized() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (finalized) return absl::FailedPreconditionError("MPI: already finalized in this process; cannot initialize it again");
  int provided = 0;
  if (!initialized) {
    const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    if (rc != MPI_SUCCESS) return absl::InternalError("MPI_Init_thread failed: " + MpiErrorText(rc));
    std::atexit(FinalizeMpiAtExit);
  } else {
    MPI_Query_thread(&provided);
  }
  if (provided < MPI_THREAD_FUNNELED)
    return absl::FailedPreconditionError(absl::StrFormat(
        "MPI provides thread level %d, below MPI_THREAD_FUNNELED (%d) which longctx needs", provided,
        MPI_THREAD_FUNNELED));
  return absl::OkStatus();
}

namespace {

absl::StatusOr<std::unique_ptr<Communicator>> WrapComm(MPI_Comm comm, const MpiOptions& options,
                                                       const std::string& who) {
  auto fail = [&](const char* what, int rc) {
    MPI_Comm_free(&comm);
    return absl::InternalError(absl::StrFormat("%s: %s failed: %s", who, what, MpiErrorText(rc)));
  };
  if (int rc = MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN); rc != MPI_SUCCESS)
    return fail("MPI_Comm_set_errhandler(MPI_ERRORS_RETURN)", rc);
  int rank = 0, world = 0, local_rank = 0, local_world = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &world);
  MPI_Comm local = MPI_COMM_NULL;
  if (int rc = MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local); rc != MPI_SUCCESS)
    return fail("MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)", rc);
  MPI_Comm_set_errhandler(local, MPI_ERRORS_RETURN);
  MPI_Comm_rank(local, &local_rank);
  MPI_Comm_size(local, &local_world);
  return std::unique_ptr<Communicator>(
      std::make_unique<MpiCommunicator>(comm, local, rank, world, local_rank, local_world, options));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Communicator>> MakeMpiCommunicator(const MpiOptions& options) {
  if (absl::Status st = EnsureMpiInitialized(); !st.ok()) return st;
  int world_rank = -1, world_size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  const std::string who = absl::StrFormat("mpi rank %d/%d", world_rank, world_size);
  MPI_Comm comm = MPI_COMM_NULL;
  if (int rc = MPI_Comm_dup(MPI_COMM_WORLD, &comm); rc != MPI_SUCCESS)
    return absl::InternalError(absl::StrFormat("%s: MPI_Comm_dup(MPI_COMM_WORLD) failed: %s", who, MpiErrorText(rc)));
  return WrapComm(comm, options, who);
}

}  // namespace longctx
