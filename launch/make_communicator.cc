// Why: one decision point for "am I one of many ranks?" — the launcher's
// environment says whether this process was started by mpirun / srun; MPI is
// initialized only then, so a plain `longctx train` never touches MPI (no MPI
// output, no MPI start-up cost). And one place that implements the failure
// policy: a rank that fails ends the whole job (AbortJob).
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/str_format.h"
#include "launch/communicator.h"
#include "launch/mpi_communicator.h"
#ifdef LONGCTX_HAVE_NCCL
#include "launch/nccl_communicator.h"
#endif

namespace longctx {

absl::StatusOr<std::unique_ptr<Communicator>> MakeCommunicator(Device device) {
  const std::string launcher = DetectLauncher();
  if (launcher.empty()) return MakeLocalCommunicator();
  absl::StatusOr<std::unique_ptr<Communicator>> mpi = MakeMpiCommunicator();
  if (!mpi.ok()) return mpi.status();
  // srun without --mpi=pmix starts N singletons that each think they are alone
  // and would train N copies of the same model without a word.
  const char* ntasks = std::getenv("SLURM_NTASKS");
  const bool in_srun_step = std::getenv("SLURM_STEP_ID") != nullptr || std::getenv("SLURM_STEPID") != nullptr;
  if (launcher == "slurm" && in_srun_step && (*mpi)->world_size() == 1 && ntasks != nullptr && std::atoi(ntasks) > 1)
    return absl::FailedPreconditionError(absl::StrFormat(
        "mpi rank 0/1: started by srun with SLURM_NTASKS=%s but MPI sees a world of 1: launch with "
        "`srun --mpi=pmix` (or mpirun) so that the ranks form one world",
        ntasks));
  if (device == Device::kCpu) return mpi;
#ifdef LONGCTX_HAVE_NCCL
  return MakeNcclCommunicator(*std::move(mpi));
#else
  return absl::UnimplementedError(absl::StrFormat(
      "%s: a CUDA communicator needs NCCL, and this build of longctx has none (configure with CUDA and NCCL)",
      (*mpi)->Where()));
#endif
}

void AbortJob(const absl::Status& status) {
  int rank = 0, world = 1;
  const bool mpi = MpiIsActive();
  if (mpi) {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
  }
  const std::string message = status.ok() ? std::string("AbortJob called with an OK status")
                                          : std::string(status.message());
  std::fprintf(stderr, "longctx: rank %d/%d: error: %s\n", rank, world, message.c_str());
  std::fflush(stderr);
  std::fflush(stdout);
  if (mpi) MPI_Abort(MPI_COMM_WORLD, 1);
  std::exit(1);
}

}  // namespace longctx
