// Why: data parallelism (DDP), ZeRO-1 and FSDP need a handful of collectives —
// sum-reduce gradients, reduce-scatter them into shards, all-gather shards back
// into full buffers, broadcast initial weights and bytes, and agree on scalars so
// every rank takes the same decision. The trainer talks to this interface only:
// a single process uses the Local communicator (world of one, every collective
// the identity), multi-process runs Open MPI (CPU buffers, mpi_communicator.h)
// or NCCL (CUDA buffers, nccl_communicator.h) behind the same calls.
//
// Contract of every collective:
//  * Every rank of the world calls it, in the same order, with the same sizes,
//    root and dtype. A rank that cannot (an error of its own) must not return
//    into code that skips the collective: it calls AbortJob() (below), which
//    ends the whole job, so that its peers never wait in a collective forever.
//  * Errors come back as absl::Status naming the communicator, the rank and
//    world ("mpi rank 2/4: MPI_Allreduce(...) failed: ..."). Argument errors
//    (bad root, wrong dtype, non-contiguous tensor) are detected locally before
//    any communication; since every rank passes the same arguments, every rank
//    gets the same error and none is left waiting.
//  * Only the thread that created the communicator calls it (MPI is initialized
//    with MPI_THREAD_FUNNELED; OpenMP compute threads never communicate).
//  * Memory: Tensors and float buffers live on device() (host memory for Local
//    and MPI, CUDA device memory for NCCL). Scalars (doubles, int64) and
//    BroadcastBytes are always host memory, in every implementation.
#ifndef LONGCTX_LAUNCH_COMMUNICATOR_H_
#define LONGCTX_LAUNCH_COMMUNICATOR_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/tensor.h"

namespace longctx {

// A half-open range of element indices [begin, end).
struct IndexRange {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
};

// The one definition of how a flat buffer of n elements is split into `world`
// contiguous shards (reduce-scatter, all-gather, FSDP and ZeRO state): shard r
// is [r*q + min(r, n%world), ...) with q = n/world, i.e. the first n % world
// ranks hold one element more than the rest. Shards are in rank order, cover
// [0, n) exactly and may be empty (n < world). Requires n >= 0, 0 <= rank < world.
IndexRange ShardRange(int64_t n, int rank, int world);
// The rank whose shard holds element i (0 <= i < n).
int ShardOwner(int64_t n, int64_t i, int world);

enum class ReduceOp { kSum, kMax, kMin };

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // Rank among the processes on this node (MPI_COMM_TYPE_SHARED), and their count:
  // which GPU to use, how many threads this node's ranks may share.
  virtual int local_rank() const = 0;
  virtual int local_world_size() const = 0;
  // "local", "mpi", "nccl": for logs and error messages.
  virtual std::string name() const = 0;
  // Where Tensors and float buffers of this communicator live.
  virtual Device device() const = 0;
  // "mpi rank 2/4": the prefix of this communicator's error messages.
  std::string Where() const;

  // --- all-reduce ---------------------------------------------------------
  // In-place sum over all ranks of a contiguous tensor: kF32 (gradients); MPI
  // also sums kF64 and kI32. The Local communicator accepts any tensor.
  virtual absl::Status AllReduceSum(const Tensor& x) = 0;
  // In-place sum of doubles (loss sums, token counts, counters).
  virtual absl::Status AllReduceSum(double* values, int count) = 0;
  // In-place sum / max / min of host scalars.
  virtual absl::Status AllReduce(double* values, int64_t count, ReduceOp op) = 0;
  virtual absl::Status AllReduce(int64_t* values, int64_t count, ReduceOp op) = 0;
  absl::Status AllReduceSum(int64_t* values, int64_t count) { return AllReduce(values, count, ReduceOp::kSum); }
  absl::Status AllReduceMax(double* values, int64_t count) { return AllReduce(values, count, ReduceOp::kMax); }
  absl::Status AllReduceMin(double* values, int64_t count) { return AllReduce(values, count, ReduceOp::kMin); }
  absl::Status AllReduceMax(int64_t* values, int64_t count) { return AllReduce(values, count, ReduceOp::kMax); }
  absl::Status AllReduceMin(int64_t* values, int64_t count) { return AllReduce(values, count, ReduceOp::kMin); }

  // --- reduce-scatter / all-gather (FSDP, ZeRO) ----------------------------
  // full: n floats on every rank (read only). shard: ShardRange(n, rank(),
  // world_size()).size() floats, receives the sum over ranks of full[begin, end).
  // shard must not overlap full. The default is the kF32 case of the next.
  virtual absl::Status ReduceScatterSum(const float* full, int64_t n, float* shard) {
    return ReduceScatterSum(full, n, DType::kF32, shard);
  }
  // The same for kF32 or kF64 elements (n of dtype; the gradient sum of
  // train.proto's grad_sum_fp64 reduces doubles). The default is the part
  // every transport shares — the dtype (InvalidArgument for any other), the
  // count and the shard checks, in that order — then ReduceScatterShards.
  virtual absl::Status ReduceScatterSum(const void* full, int64_t n, DType dtype, void* shard);
  absl::Status ReduceScatterSum(const double* full, int64_t n, double* shard) {
    return ReduceScatterSum(full, n, DType::kF64, shard);
  }
  // The inverse: shard holds this rank's ShardRange(n, ...) piece of a buffer of
  // n elements of `dtype`; full (n elements) receives every rank's piece in rank
  // order. In place when shard == full + begin (elements); otherwise they must
  // not overlap. Any dtype (it is a copy), so the bf16 path gathers bf16.
  virtual absl::Status AllGather(const void* shard, int64_t n, DType dtype, void* full) = 0;
  absl::Status AllGather(const float* shard, int64_t n, float* full) { return AllGather(shard, n, DType::kF32, full); }

  // --- broadcast / barrier -------------------------------------------------
  // Root's tensor (any dtype, contiguous) copied into every rank's tensor of
  // the same shape.
  virtual absl::Status Broadcast(const Tensor& x, int root) = 0;
  // Root's nbytes host bytes copied into every rank's buffer.
  virtual absl::Status BroadcastBytes(void* data, int64_t nbytes, int root) = 0;
  virtual absl::Status Barrier() = 0;

  // --- sub-groups ----------------------------------------------------------
  // Context parallelism runs a world of dp × C ranks as groups: the C ranks
  // of a row talk among themselves (ring, halo), the dp ranks of a position in
  // their groups among themselves. Split is a collective of this communicator:
  // every rank calls it, and the ranks passing the same color (>= 0) form a
  // new communicator of the same transport and device, ranked by (key, rank
  // here). It carries its own traffic (nothing it sends can match a message of
  // this one) and may outlive this one. Local: another world of one. The
  // default answers Unimplemented (a communicator without sub-groups).
  virtual absl::StatusOr<std::unique_ptr<Communicator>> Split(int color, int key);

  // --- point-to-point ------------------------------------------------------
  // One step of a ring or a halo exchange: sends send_count elements of dtype
  // from `send` to rank dest and receives recv_count elements from rank source
  // into `recv`, in one call that cannot deadlock when every rank of the
  // pattern calls it together (what a sends to b, b receives from a, with the
  // same count and dtype). dest and source may be this rank (a copy then).
  // Counts may be 0 (that side moves nothing); buffers live on device() and
  // must not overlap. Unlike the collectives, only the ranks of the pattern
  // take part. Checks (ranks, counts, null, overlap) are shared, then the
  // transport's SendRecvElements runs.
  absl::Status SendRecv(const void* send, int64_t send_count, int dest, void* recv, int64_t recv_count, int source,
                        DType dtype);

  // --- agreement -----------------------------------------------------------
  // True on every rank iff local_ok is true on every rank: all ranks take the
  // same decision (skip a step, stop, save) even when only one saw the reason.
  absl::StatusOr<bool> AllAgree(bool local_ok);

 protected:
  // Shared argument checks; errors are prefixed with Where().
  absl::Status CheckRoot(int root, const char* op) const;
  absl::Status CheckCount(int64_t n, const void* p, const char* op) const;
  // Contiguous, on device(), with data; f32_only: dtype kF32.
  absl::Status CheckTensor(const Tensor& x, bool f32_only, const char* op) const;

  // What ReduceScatterSum(void*) hands a transport once its shared checks
  // passed: the dtype is kF32 or kF64, n >= 0 with full non-null when n > 0,
  // and shard non-null when this rank's shard is not empty.
  struct SumShards {
    DType dtype;
    const char* what;   // the summed elements for messages: "floats", "doubles"
    int64_t elem_size;  // bytes of one element
    IndexRange mine;    // ShardRange(n, rank(), world_size())
  };
  // The transport's typed primitive of ReduceScatterSum: the sum over ranks of
  // full[mine.begin, mine.end) into shard, elements of s.dtype (the
  // transport maps it to its own element type). The default answers
  // Unimplemented (a communicator that overrides ReduceScatterSum itself).
  virtual absl::Status ReduceScatterShards(const void* full, int64_t n, const SumShards& s, void* shard);
  // The transport's SendRecv once the shared checks passed (esz = bytes of
  // one element). The default answers Unimplemented.
  virtual absl::Status SendRecvElements(const void* send, int64_t send_count, int dest, void* recv, int64_t recv_count,
                                        int source, DType dtype, int64_t esz);
};

// World of one: every collective is the identity (reduce-scatter and
// all-gather copy, since the one shard is the whole buffer). Any device.
std::unique_ptr<Communicator> MakeLocalCommunicator();

// The launcher that started this process, judged by its environment:
// "openmpi" (OMPI_COMM_WORLD_SIZE), "pmix" (PMIX_RANK), "pmi" (PMI_RANK),
// "slurm" (SLURM_PROCID and SLURM_NTASKS), or "" for none.
std::string DetectLauncher();

// The communicator for this process: MPI (device kCpu) or NCCL (kCuda; needs a
// build with NCCL) when DetectLauncher() finds a launcher, so that
// `mpirun -np N longctx train ...` and `srun --mpi=pmix ...` form a world; the
// Local communicator otherwise — one process without a launcher behaves exactly
// as before MPI existed (world of one, MPI never initialized, no MPI output).
// MPI is finalized at process exit (atexit), after a normal return from main.
absl::StatusOr<std::unique_ptr<Communicator>> MakeCommunicator(Device device = Device::kCpu);

// The failure policy "a rank that fails ends the whole job non-zero with that
// rank's message, never a hang". Prints
//   longctx: rank R/N: error: <status message>
// to stderr, then MPI_Abort(MPI_COMM_WORLD, 1) when MPI is initialized (the
// launcher kills every rank, including those waiting in a collective, and
// exits non-zero), else exit(1). The trainer and the CLI call it on an error on
// any rank instead of returning: a rank that returned from main while its peers
// wait in a collective would hang the job (MPI_Finalize waits for them).
[[noreturn]] void AbortJob(const absl::Status& status);

}  // namespace longctx

#endif  // LONGCTX_LAUNCH_COMMUNICATOR_H_
