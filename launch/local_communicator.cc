// Why: a single-process run goes through the same collective calls as a
// distributed one, so the trainer has one code path.
#include "launch/communicator.h"

namespace longctx {
namespace {

class LocalCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  absl::Status AllReduceSum(const Tensor&) override { return absl::OkStatus(); }
  absl::Status AllReduceSum(double*, int) override { return absl::OkStatus(); }
  absl::Status Broadcast(const Tensor&, int) override { return absl::OkStatus(); }
  absl::Status Barrier() override { return absl::OkStatus(); }
};

}  // namespace

std::unique_ptr<Communicator> MakeLocalCommunicator() { return std::make_unique<LocalCommunicator>(); }

}  // namespace longctx
