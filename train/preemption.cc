// Why: see preemption.h.
#include "train/preemption.h"

#include <pthread.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <thread>

namespace longctx {
namespace {

volatile std::sig_atomic_t g_signal = 0;
std::atomic<bool> g_armed{false};
std::atomic<bool> g_watcher{false};

extern "C" void RecordPreemptionSignal(int sig) { g_signal = sig; }

sigset_t PreemptionSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGUSR1);
  return set;
}

void WatchSignals() {
  const sigset_t set = PreemptionSignals();
  for (;;) {
    int sig = 0;
    if (sigwait(&set, &sig) != 0) continue;
    if (g_armed.load()) {
      g_signal = sig;
      continue;
    }
    // Not armed (no trainer running): the default action, as if nothing had
    // been blocked — the process ends by this signal.
    std::signal(sig, SIG_DFL);
    pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
    raise(sig);
  }
}

}  // namespace

void BlockPreemptionSignals() {
  if (g_watcher.exchange(true)) return;
  const sigset_t set = PreemptionSignals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::thread(WatchSignals).detach();
}

void InstallPreemptionHandlers() {
  if (g_watcher.load()) {
    g_armed = true;
    return;
  }
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
