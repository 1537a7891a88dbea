// Why: data parallelism needs exactly three collectives (sum-reduce gradients,
// broadcast initial weights, agree on a scalar). The trainer talks to this
// interface only; a single process uses LocalCommunicator, multi-process runs
// an MPI (CPU) or NCCL (GPU) implementation behind the same calls.
#ifndef LONGCTX_LAUNCH_COMMUNICATOR_H_
#define LONGCTX_LAUNCH_COMMUNICATOR_H_

#include <memory>

#include "absl/status/status.h"
#include "kernels/tensor.h"

namespace longctx {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // In-place sum over all ranks of a dense float tensor.
  virtual absl::Status AllReduceSum(const Tensor& x) = 0;
  // In-place sum of doubles (loss sums, token counts, counters).
  virtual absl::Status AllReduceSum(double* values, int count) = 0;
  virtual absl::Status Broadcast(const Tensor& x, int root) = 0;
  virtual absl::Status Barrier() = 0;
};

// World of one: every collective is the identity.
std::unique_ptr<Communicator> MakeLocalCommunicator();

}  // namespace longctx

#endif  // LONGCTX_LAUNCH_COMMUNICATOR_H_
