// Why: a cluster takes nodes back with a warning signal — Slurm sends SIGUSR1
// `--signal=USR1@120` seconds before the end (or SIGTERM, then SIGKILL after
// KillWait) — and a run that days of compute went into must then stop at a
// step boundary with a checkpoint, not die mid-save or lose the hours since
// the last periodic one. The signal may reach only some ranks (one node's
// slurmstepd, a user's `kill` of one pid), so the decision is a collective:
// at every step boundary all ranks take the maximum of their pending signal
// numbers (one int64 all-reduce) and stop together after that step.
//
// The signal is only recorded; the trainer polls. How it is received matters:
// a handler that interrupts a compute thread corrupted the heap in ~16 % of
// SIGUSR1 runs on this project's Sapphire Rapids VMs (glibc "corrupted size vs.
// prev_size" in the step the signal arrived; 0 of 25 runs without a signal;
// root cause not found — the handler itself only stores an int). So `longctx`
// blocks SIGTERM and SIGUSR1 in every thread from the start of main()
// (BlockPreemptionSignals, inherited by OpenMP, MPI and std::thread threads)
// and one watcher thread takes them with sigwait(): no compute thread ever
// runs a handler or sees EINTR. Until a trainer arms it, the watcher gives a
// signal its default action (the process ends as before). Exit code: a run stopped this way exits kPreemptedExitCode (75,
// EX_TEMPFAIL: "try again later") after its checkpoint is complete, distinct
// from 0 (finished) and 1 (error), so a batch script can requeue on 75 only
// (launch/slurm/longctx.sbatch does). Resuming is rerunning the same command:
// `longctx train` resumes from the newest complete checkpoint in out_dir.
#ifndef LONGCTX_TRAIN_PREEMPTION_H_
#define LONGCTX_TRAIN_PREEMPTION_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "launch/communicator.h"

namespace longctx {

inline constexpr int kPreemptedExitCode = 75;

// Called first in main(), before any thread exists: blocks SIGTERM and SIGUSR1
// in this thread (so in every thread created later) and starts the watcher
// thread. Idempotent.
void BlockPreemptionSignals();
// From here on SIGTERM and SIGUSR1 are recorded instead of ending the process
// (idempotent). Called by Trainer::Run; a second signal of either kind is
// recorded too (the run still stops at the step boundary, it does not die
// mid-checkpoint). Without BlockPreemptionSignals (a test binary) it installs
// a recording handler instead.
void InstallPreemptionHandlers();
// The last preemption signal this process received (0 = none).
int PendingPreemptionSignal();
// Forgets a received signal (tests; a run that handled it).
void ClearPreemptionSignal();
// Collective: the largest pending signal number over all ranks (0 = none), the
// same on every rank. One AllReduce(max) of an int64.
absl::StatusOr<int> AgreePreemptionSignal(Communicator& comm);
// "SIGTERM", "SIGUSR1", or "signal N".
const char* PreemptionSignalName(int sig);

}  // namespace longctx

#endif  // LONGCTX_TRAIN_PREEMPTION_H_
