// Why: a cluster takes nodes back with a warning signal — Slurm sends SIGUSR1
// `--signal=USR1@120` seconds before the end (or SIGTERM, then SIGKILL after
// KillWait) — and a run that days of compute went into must then stop at a
// step boundary with a checkpoint, not die mid-save or lose the hours since
// the last periodic one. The signal may reach only some ranks (one node's
// slurmstepd, a user's `kill` of one pid), so the decision is a collective:
// at every step boundary all ranks take the maximum of their pending signal
// numbers (one int64 all-reduce) and stop together after that step.
//
// The handler only records the signal number (async-signal-safe); the trainer
// polls. Exit code: a run stopped this way exits kPreemptedExitCode (75,
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

// Installs the recording handler for SIGTERM and SIGUSR1 (idempotent). Called
// by Trainer::Run; a second signal of either kind is recorded too (the run
// still stops at the step boundary, it does not die mid-checkpoint).
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
