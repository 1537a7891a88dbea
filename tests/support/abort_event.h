// Why: tests/launch/expect_abort.sh bounds the time from an injected failure
// to the job's end, not from process start (mpirun's start-up on a loaded
// machine is not what the bound is about). The failing rank prints the wall
// clock of the failure with this, right before AbortJob.
#ifndef LONGCTX_TESTS_SUPPORT_ABORT_EVENT_H_
#define LONGCTX_TESTS_SUPPORT_ABORT_EVENT_H_

#include <chrono>
#include <cstdio>

namespace longctx::test {

inline void PrintAbortEvent() {
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  std::fprintf(stderr, "abort_event_ms=%lld\n",
               static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(now).count()));
  std::fflush(stderr);
}

}  // namespace longctx::test

#endif  // LONGCTX_TESTS_SUPPORT_ABORT_EVENT_H_
