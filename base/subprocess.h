// Why: `longctx` blocks SIGTERM and SIGUSR1 in every thread from the first line
// of main() (train/preemption.h: one sigwait watcher thread takes them), and a
// child started with popen() or system() inherits that blocked mask and keeps
// it across exec: a PyTorch peer (`longctx bench --peer=pytorch`) or a groff
// child of `longctx corpus` would then ignore SIGTERM from a user's kill or a
// cluster's preemption. RunShellCommand is the one way longctx starts a child:
// posix_spawn of /bin/sh -c with an empty signal mask and SIGTERM and SIGUSR1
// at their default action (POSIX_SPAWN_SETSIGMASK, POSIX_SPAWN_SETSIGDEF), its
// stdout read through a pipe as popen(..., "r") did. It sits in base/, below
// every layer, because data/ (groff) and train/ (the bench peer) both use it.
#ifndef LONGCTX_BASE_SUBPROCESS_H_
#define LONGCTX_BASE_SUBPROCESS_H_

#include <string>

#include "absl/status/statusor.h"

namespace longctx {

struct ShellResult {
  int exit_status = -1;  // the child's exit status; -1 when it did not exit normally (a signal)
  std::string stdout_text;
};

// Runs `/bin/sh -c command` and waits for it: its stdout captured, stdin and
// stderr the caller's. The child starts with no signal blocked and SIGTERM and
// SIGUSR1 at their default action, whatever the caller blocks or ignores.
// Thread-safe (the pipe is close-on-exec, so a child another thread starts
// meanwhile holds no end of it). Error: the child could not be started
// ("cannot start: COMMAND: why"); a command that fails is an exit_status.
absl::StatusOr<ShellResult> RunShellCommand(const std::string& command);

}  // namespace longctx

#endif  // LONGCTX_BASE_SUBPROCESS_H_
