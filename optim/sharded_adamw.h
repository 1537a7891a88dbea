// Why: ZeRO-1 and FSDP keep AdamW's moments only for this rank's shard of each
// parameter buffer (ShardOf(buffer_size, rank, world)), so optimizer memory
// falls as 1/world. A shard boundary may cut a buffer in the middle of a named
// slice, so the update walks the intersections of the shard with the layout's
// slices and gives each piece its slice's weight decay. Clipping needs the
// norm of the whole gradient: the local sum of squares goes through a caller
// supplied "sum doubles over ranks" function, so optim/ does not link launch/.
// The fp32 master weights are the parameter shard itself (parameters are
// fp32; BF16 precision only rounds matmul operands). With world 1 every shard
// is the whole buffer and the update is AdamW::Step bit for bit.
#ifndef LONGCTX_OPTIM_SHARDED_ADAMW_H_
#define LONGCTX_OPTIM_SHARDED_ADAMW_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/backend.h"
#include "model/param_layout.h"
#include "optim/adamw.h"

namespace longctx {

// In-place sum of `count` doubles over all ranks (identity on one rank).
using ReduceDoublesFn = std::function<absl::Status(double* values, int count)>;

class ShardedAdamW {
 public:
  ShardedAdamW(const ParamLayout* layout, Backend* backend, DType dtype, const AdamWSettings& s, int rank,
               int world);

  // This rank's element range of buffer b.
  ElementRange range(int b) const { return ranges_[b]; }
  int num_buffers() const { return static_cast<int>(ranges_.size()); }

  // One update. param_shards[b] and grad_shards[b] are 1-D views of this
  // rank's range of buffer b (range(b).size() elements). The gradient norm is
  // sqrt(reduce(Σ local sums of squares)); every rank gets the same norm and
  // clip scale. Errors come only from reduce (returned with "ShardedAdamW:").
  absl::StatusOr<StepStats> Step(const std::vector<Tensor>& param_shards, const std::vector<Tensor>& grad_shards,
                                 double lr, const ReduceDoublesFn& reduce);

  int64_t step() const { return step_; }
  void set_step(int64_t s) { step_ = s; }
  // Moments of this rank's shard of buffer b (1-D, range(b).size()).
  Tensor m_shard(int b) const;
  Tensor v_shard(int b) const;
  const AdamWSettings& settings() const { return settings_; }
  int64_t state_bytes() const;

 private:
  const ParamLayout* layout_;
  Backend* backend_;
  DType dtype_;
  AdamWSettings settings_;
  std::vector<ElementRange> ranges_;
  std::vector<DeviceBuffer> m_, v_;
  int64_t step_ = 0;
};

}  // namespace longctx

#endif  // LONGCTX_OPTIM_SHARDED_ADAMW_H_
