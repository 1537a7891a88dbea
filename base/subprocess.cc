// Why: see subprocess.h — posix_spawn instead of popen()/system(), so a child
// of a process that blocks SIGTERM/SIGUSR1 does not inherit the blocked mask.
#include "base/subprocess.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

extern char** environ;

namespace longctx {
namespace {

absl::Status StartError(const std::string& command, const char* call, int err) {
  return absl::InternalError(absl::StrCat("cannot start: ", command, ": ", call, ": ", std::strerror(err)));
}

}  // namespace

absl::StatusOr<ShellResult> RunShellCommand(const std::string& command) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return StartError(command, "pipe", errno);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  // dup2 onto stdout clears close-on-exec there; both pipe ends themselves
  // close on exec.
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);

  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGTERM);
  sigaddset(&defaults, SIGUSR1);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);

  std::string arg0 = "sh", arg1 = "-c", arg2 = command;
  char* argv[] = {arg0.data(), arg1.data(), arg2.data(), nullptr};
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, "/bin/sh", &actions, &attr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  ::close(fds[1]);
  if (rc != 0) {
    ::close(fds[0]);
    return StartError(command, "posix_spawn", rc);
  }

  ShellResult result;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fds[0], buf, sizeof(buf));
    if (n > 0) {
      result.stdout_text.append(buf, static_cast<size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  ::close(fds[0]);
  int status = 0;
  pid_t waited;
  do {
    waited = ::waitpid(pid, &status, 0);
  } while (waited < 0 && errno == EINTR);
  result.exit_status = waited == pid && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

}  // namespace longctx
