// Why: see preemption.h.
#include "train/preemption.h"

#include <csignal>
#include <cstdio>

namespace longctx {
namespace {

volatile std::sig_atomic_t g_signal = 0;

extern "C" void RecordPreemptionSignal(int sig) { g_signal = sig; }

}  // namespace

void InstallPreemptionHandlers() {
  struct sigaction sa = {};
  sa.sa_handler = RecordPreemptionSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // a write or read in progress is not cut short
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGUSR1, &sa, nullptr);
}

int PendingPreemptionSignal() { return g_signal; }

void ClearPreemptionSignal() { g_signal = 0; }

absl::StatusOr<int> AgreePreemptionSignal(Communicator& comm) {
  int64_t sig = g_signal;
  if (comm.world_size() > 1)
    if (absl::Status st = comm.AllReduceMax(&sig, 1); !st.ok()) return st;
  return static_cast<int>(sig);
}

const char* PreemptionSignalName(int sig) {
  switch (sig) {
    case SIGTERM: return "SIGTERM";
    case SIGUSR1: return "SIGUSR1";
    default: break;
  }
  static thread_local char buf[32];
  std::snprintf(buf, sizeof buf, "signal %d", sig);
  return buf;
}

}  // namespace longctx
