// Why: context parallelism (parallel.context_parallel = C, docs/parallelism.md)
// puts one packed row on C ranks so a long row's activations are ~1/C per
// rank and a step with fewer rows than ranks can still use them all. The
// world of dp x C ranks is cut into dp groups of C consecutive ranks; the
// ranks of a group take the same micro-batches (the data-parallel index is
// rank / C), each keeps its zig-zag share of every row (data/context_split:
// chunks r and 2C - 1 - r, with their targets, positions and document
// boundaries), and every layer's attention runs through this hook: per row,
// the group swaps the key blocks its queries need (train/parallel/
// context_exchange.h) and each rank runs its chunks against them
// (model/context_parallel_attention.h); the backward returns dK, dV to the
// keys' owners. Everything else in the model is per token, so nothing else
// changes: the loss sum and token count, the gradients (summed over the
// whole world by the parallel strategy, exactly as over dp ranks of whole
// rows) and the non-finite verdicts reduce as they do without C. Parameters
// and their sharding stay over the whole world.
//
// Eval and the probes run whole rows on each rank (the hook is set only
// around a training micro-batch).
#ifndef LONGCTX_TRAIN_PARALLEL_CONTEXT_PARALLEL_H_
#define LONGCTX_TRAIN_PARALLEL_CONTEXT_PARALLEL_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "data/context_split.h"
#include "data/packer.h"
#include "kernels/backend.h"
#include "launch/communicator.h"
#include "model/context_parallel_attention.h"
#include "model/layer_attention.h"
#include "train/parallel/context_exchange.h"

namespace longctx {

// Bytes a rank moved through the exchange, by layer kind (full attention or
// sliding window): K, V sent and received (forward, and again in the
// backward and for recomputed layers), dK, dV sent and received.
struct ContextTraffic {
  int64_t kv_sent = 0, kv_received = 0, grad_sent = 0, grad_received = 0;
  int64_t total() const { return kv_sent + kv_received + grad_sent + grad_received; }
};

class ContextParallel final : public ContextAttentionHook {
 public:
  // How a row's tokens are dealt to the group's ranks.
  enum class Split {
    kZigZag,    // 2C chunks, rank r: chunks r and 2C - 1 - r (fixed)
    kBalanced,  // 8C chunks dealt by attention work, 8 to each rank (data/context_balance.h), per row
  };
  // world: the job's communicator (not owned); cp >= 1 dividing its size;
  // windows: every layer's window (0 = full), which the balanced split
  // weighs work by. A collective of the world (it splits it into the groups).
  static absl::StatusOr<std::unique_ptr<ContextParallel>> Create(Communicator* world, Backend* backend, DType dtype,
                                                                 int cp, Split split = Split::kZigZag,
                                                                 std::vector<int32_t> windows = {});

  int cp() const { return cp_; }
  int group_rank() const { return group_->rank(); }
  // The data-parallel index of this rank's group, and the number of groups.
  int data_rank() const { return data_rank_; }
  int data_world() const { return data_world_; }

  // This rank's tokens of every row of `micro`, the rows one after another
  // (each row's T / C tokens, cu_seqlens cut at the piece edges), and
  // remembers the rows' layouts and document boundaries for the layers that
  // follow. Errors when seq_len is not a multiple of 2C (8C balanced).
  absl::StatusOr<PackedBatch> Shard(const PackedBatch& micro);

  void Forward(int layer, int window, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o,
               const Tensor& lse) override;
  void Backward(int layer, int window, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o,
                const Tensor& lse, const Tensor& d_o, const Tensor& dq, const Tensor& dk, const Tensor& dv) override;

  // In-place sum over the group's ranks (a loss sum and token count of the
  // rows' shares).
  absl::Status SumOverGroup(double* values, int count) { return group_->AllReduceSum(values, count); }

  // Traffic since the last TakeTraffic, [0] full layers, [1] sliding-window layers.
  std::vector<ContextTraffic> TakeTraffic();

 private:
  ContextParallel(Backend* backend, DType dtype, int cp, Split split, std::vector<int32_t> windows,
                  std::unique_ptr<Communicator> group, int data_rank, int data_world);
  void Count(int window);
  // Row b's share of a layer's tensors (rows of [rows * n, ...], lse's columns).
  ContextAttentionArgs RowArgs(size_t b, int window, const Tensor& q, const Tensor& k, const Tensor& v,
                               const Tensor& o, const Tensor& lse) const;

  Backend* backend_;
  int cp_;
  Split split_;
  std::vector<int32_t> windows_;
  int data_rank_, data_world_;
  std::unique_ptr<Communicator> group_;
  CommKvExchange exchange_;
  ContextParallelAttention attention_;
  std::vector<ContextLayout> layouts_;         // [rows]: which rank holds which chunks of each row
  std::vector<std::vector<int32_t>> row_cu_;   // [rows]: each row's document boundaries, 0..T
  std::vector<ContextTraffic> traffic_{2};
};

}  // namespace longctx

#endif  // LONGCTX_TRAIN_PARALLEL_CONTEXT_PARALLEL_H_
