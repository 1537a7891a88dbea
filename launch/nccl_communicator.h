// Why: GPU ranks exchange gradients and shards in device memory through NCCL
// (NVLink / InfiniBand aware), which host MPI cannot do without staging every
// buffer through the CPU. NCCL has no launcher of its own: the ranks are the
// MPI world, rank 0's ncclUniqueId is broadcast over MPI, and the MPI
// communicator stays inside for what is host memory anyway (scalars, bytes,
// the barrier). Built only with CUDA and NCCL (LONGCTX_HAVE_NCCL).
//
// Each rank uses GPU local_rank() % device_count (one GPU per rank: NCCL
// refuses two ranks on one device, so more local ranks than GPUs is an error).
// Every collective runs on the communicator's own stream and is synchronized
// before returning: the same blocking semantics as the MPI communicator.
// Split splits both halves (MPI_Comm_split for the host side, ncclCommSplit
// for the device side, same color and key, so their ranks agree); SendRecv is
// ncclSend + ncclRecv in one NCCL group on device buffers.
#ifndef LONGCTX_LAUNCH_NCCL_COMMUNICATOR_H_
#define LONGCTX_LAUNCH_NCCL_COMMUNICATOR_H_

#include <memory>

#include "absl/status/statusor.h"
#include "launch/communicator.h"

namespace longctx {

// host: the MPI communicator of the same world (taken over).
absl::StatusOr<std::unique_ptr<Communicator>> MakeNcclCommunicator(std::unique_ptr<Communicator> host);

}  // namespace longctx

#endif  // LONGCTX_LAUNCH_NCCL_COMMUNICATOR_H_
