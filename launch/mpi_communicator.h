// Why: CPU ranks — on one machine or many — exchange gradients and shards
// through Open MPI, which every launcher speaks: `mpirun -np N` sets
// OMPI_COMM_WORLD_*, Slurm's `srun --mpi=pmix` sets PMIX_*. Rank, world size
// and local rank are asked of MPI itself (MPI_Comm_split_type with
// MPI_COMM_TYPE_SHARED for the node-local rank), never parsed from the
// environment, so every launcher gives the same answers.
//
// Implementation choices: each communicator duplicates MPI_COMM_WORLD (its
// traffic cannot match another library's) and sets MPI_ERRORS_RETURN on it, so
// an MPI error becomes an absl::Status with MPI_Error_string's text instead of
// killing the process without a word. Split makes an MPI_Comm_split
// sub-communicator (its own context, the same options); SendRecv is
// MPI_Sendrecv with one fixed tag. MPI counts are int: collectives over more
// than max_count elements are split into chunks (reduce-scatter and all-gather
// then fall back to one reduce / broadcast per shard owner). MPI is initialized
// once per process with MPI_THREAD_FUNNELED (only the main thread calls MPI;
// OpenMP compute threads never do) and finalized at exit.
#ifndef LONGCTX_LAUNCH_MPI_COMMUNICATOR_H_
#define LONGCTX_LAUNCH_MPI_COMMUNICATOR_H_

#include <climits>
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "launch/communicator.h"

namespace longctx {

struct MpiOptions {
  // The largest element count handed to one MPI call (MPI counts are int).
  // Tests lower it to exercise the chunked paths on small buffers.
  int64_t max_count = INT_MAX;
};

// Initializes MPI with MPI_THREAD_FUNNELED if nobody has (registering
// MPI_Finalize with atexit), or checks that the existing initialization
// provides at least FUNNELED. Errors if MPI was already finalized.
absl::Status EnsureMpiInitialized();
// MPI is initialized and not yet finalized (AbortJob uses MPI_Abort then).
bool MpiIsActive();

// A communicator over all processes of MPI_COMM_WORLD (initializing MPI if
// needed). Callable more than once; each gets its own duplicate of the world.
absl::StatusOr<std::unique_ptr<Communicator>> MakeMpiCommunicator(const MpiOptions& options = {});

}  // namespace longctx

#endif  // LONGCTX_LAUNCH_MPI_COMMUNICATOR_H_
