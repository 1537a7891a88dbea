// Why: `longctx` blocks SIGTERM and SIGUSR1 in every thread (train/preemption.h),
// and a popen() child inherits that blocked mask, so it would ignore SIGTERM.
// RunShellCommand (base/subprocess.h) must start children with an empty mask
// and SIGTERM/SIGUSR1 at their default action, while capturing stdout and
// reporting exit statuses as popen did. The mask test blocks SIGTERM here as
// main() does and checks the child's /proc/self/status; popen in the same
// state is the control showing the block is real (SIGTERM's bit, 0x4000, set).
#include "base/subprocess.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <cstdint>
#include <cstdio>
#include <string>

namespace longctx {
namespace {

// The hex mask of a "Name:\tHEX" line of /proc/PID/status text; -1 if absent.
int64_t MaskOf(const std::string& status_text, const std::string& name) {
  const size_t at = status_text.find(name + ":");
  if (at == std::string::npos) return -1;
  return static_cast<int64_t>(std::stoull(status_text.substr(at + name.size() + 1), nullptr, 16));
}

std::string Popen(const std::string& command) {
  std::string out;
  FILE* f = popen(command.c_str(), "r");
  if (f == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, n);
  pclose(f);
  return out;
}

// Signal s is bit s - 1 of a /proc mask.
constexpr int64_t Bit(int s) { return int64_t{1} << (s - 1); }

// Blocks SIGTERM and SIGUSR1 and ignores SIGUSR1 for its lifetime.
class BlockedAndIgnored {
 public:
  BlockedAndIgnored() {
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGTERM);
    sigaddset(&s, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &s, &old_mask_);
    struct sigaction ign {};
    ign.sa_handler = SIG_IGN;
    sigaction(SIGUSR1, &ign, &old_usr1_);
  }
  ~BlockedAndIgnored() {
    sigaction(SIGUSR1, &old_usr1_, nullptr);
    pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
  }

 private:
  sigset_t old_mask_;
  struct sigaction old_usr1_ {};
};

TEST(SubprocessTest, ChildHasNoBlockedSignalsWhenTheParentBlocksSigterm) {
  BlockedAndIgnored blocked;
  // Control: popen's child inherits the block. Debian's dash clears the mask
  // before it forks or execs a plain command itself, but not across `exec`
  // (bash as /bin/sh keeps it for both), so the control execs.
  const std::string inherited = Popen("exec grep SigBlk /proc/self/status");
  ASSERT_NE(MaskOf(inherited, "SigBlk"), -1) << inherited;
  EXPECT_NE(MaskOf(inherited, "SigBlk") & Bit(SIGTERM), 0) << inherited;

  for (const std::string command :
       {"grep -E 'SigBlk|SigIgn' /proc/self/status", "exec grep -E 'SigBlk|SigIgn' /proc/self/status"}) {
    SCOPED_TRACE(command);
    absl::StatusOr<ShellResult> r = RunShellCommand(command);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->exit_status, 0);
    EXPECT_NE(r->stdout_text.find("SigBlk:\t0000000000000000\n"), std::string::npos) << r->stdout_text;
    EXPECT_EQ(MaskOf(r->stdout_text, "SigBlk"), 0) << r->stdout_text;
    // SIGUSR1, ignored here, is back at its default action; so is SIGTERM.
    const int64_t ignored = MaskOf(r->stdout_text, "SigIgn");
    ASSERT_NE(ignored, -1) << r->stdout_text;
    EXPECT_EQ(ignored & (Bit(SIGUSR1) | Bit(SIGTERM)), 0) << r->stdout_text;
  }
}

TEST(SubprocessTest, CapturesStdoutAndExitStatus) {
  absl::StatusOr<ShellResult> r = RunShellCommand("printf 'a\\nb'; echo to-stderr >&2; exit 3");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_status, 3);
  EXPECT_EQ(r->stdout_text, "a\nb");  // stderr is the caller's, not captured

  r = RunShellCommand("true");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_status, 0);
  EXPECT_EQ(r->stdout_text, "");

  // A large output (beyond a pipe buffer) arrives whole.
  r = RunShellCommand("head -c 1000000 /dev/zero");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->stdout_text.size(), 1000000u);

  r = RunShellCommand("no-such-command-longctx 2>/dev/null");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_status, 127);  // sh: command not found
}

TEST(SubprocessTest, ChildKilledBySigtermHasNoExitStatus) {
  BlockedAndIgnored blocked;  // the child still dies of SIGTERM
  absl::StatusOr<ShellResult> r = RunShellCommand("echo before; kill -TERM $$; echo after");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_status, -1);
  EXPECT_EQ(r->stdout_text, "before\n");
}

}  // namespace
}  // namespace longctx
