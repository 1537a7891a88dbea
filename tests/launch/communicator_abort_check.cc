// Why: the failure policy "a rank that fails ends the whole job non-zero with
// that rank's message, never a hang" is only true if AbortJob on one rank
// reaches peers that are already blocked in a collective. Here the last rank
// fails (after its peers have entered a barrier / all-reduce) and calls
// AbortJob; expect_abort.sh checks that mpirun exits non-zero, quickly, with
// "longctx: rank R/N: error: injected failure".
//
//   communicator_abort_check [--in=barrier|allreduce]
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "launch/communicator.h"
#include "tests/support/abort_event.h"

int main(int argc, char** argv) {
  using namespace longctx;
  const std::string in = argc > 1 ? std::string(argv[1]) : "--in=barrier";
  absl::StatusOr<std::unique_ptr<Communicator>> comm = MakeCommunicator();
  if (!comm.ok()) AbortJob(comm.status());
  Communicator& c = **comm;
  if (c.world_size() < 2) {
    std::fprintf(stderr, "communicator_abort_check needs at least 2 ranks\n");
    return 2;
  }
  // One healthy collective first: the job really is formed.
  if (absl::Status st = c.Barrier(); !st.ok()) AbortJob(st);
  if (c.rank() == c.world_size() - 1) {
    // Let the others block in the collective first.
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    ::longctx::test::PrintAbortEvent();  // the moment expect_abort.sh measures from
    AbortJob(absl::InternalError(absl::StrFormat("injected failure while peers wait in %s", in.substr(5))));
  }
  absl::Status st;
  if (in == "--in=allreduce") {
    std::vector<float> x(1 << 16, 1.0f);
    st = c.AllReduceSum(Tensor(x.data(), DType::kF32, {static_cast<int64_t>(x.size())}));
  } else {
    st = c.Barrier();
  }
  // Only reached if the collective returned although a rank never joined it.
  std::fprintf(stderr, "rank %d: collective returned (%s) although rank %d aborted\n", c.rank(),
               st.ToString().c_str(), c.world_size() - 1);
  return 0;
}
