// Why: context parallelism (issue 45: world = data-parallel × C, the C ranks
// of a group holding disjoint token ranges of the same rows) trades
// activation memory for communication. `longctx plan --world N --cp C` has
// to say both before a run is rented: per-rank activations (the rank keeps
// T / C of each row's tokens) and the bytes each layer kind moves per step,
// and whether the rank then fits. This is that arithmetic, closed form like
// model/plan.h, for the zig-zag split of data/context_split.h (rank r holds
// chunks r and 2C − 1 − r of 2C) over a row that is one causal document —
// the worst case for both halo and ring (document edges only remove pairs).
//
// What each layer kind exchanges, per row, as counted here:
//  * full layer (NoPE / RoPE full): every rank receives the K/V of every other
//    rank's tokens, T − T/C tokens (a ring of C − 1 steps or an all-gather:
//    the same bytes; rank 0's last chunk sees the whole row, so no rank may
//    skip any for a single document). Backward receives them again (they are
//    not kept: keeping them would cost a full row of K/V per layer, the
//    memory context parallelism exists to save) and returns the matching
//    dK/dV to their owners.
//  * sliding-window layer, window w: each chunk receives the w − 1 keys and
//    values before it (post-RoPE) from the ranks that hold them — only those
//    (a halo inside the rank's own tokens, like chunk C's on rank C − 1, is
//    not sent); backward receives that halo again and returns its dK/dV.
//  * a recomputed layer (ModelConfig.recompute_every) runs its forward a
//    second time in backward, with its forward exchange.
// K, V and their gradients travel in the activation dtype (2 bytes for bf16
// activations, else 4). Bytes are per rank and received (every exchange here
// is symmetric: what a rank receives, others send); the figure is the most
// loaded rank's. The trainer does not run context parallelism yet
// (docs/parallelism.md): these are the plan's promises for it.
#ifndef LONGCTX_MODEL_CONTEXT_PLAN_H_
#define LONGCTX_MODEL_CONTEXT_PLAN_H_

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "model/plan.h"

namespace longctx {

// Tokens rank `rank` of a zig-zag split of a T-token row over C ranks must
// receive for a window-w layer (w > 0: the union over its chunks of the w − 1
// positions before each chunk, less its own tokens; w = 0: every other rank's
// tokens). T divisible by 2C, 0 <= rank < C (CHECKed).
int64_t ZigZagReceivedTokens(int64_t seq_len, int cp, int rank, int64_t window);

// One layer kind's exchange per row, for the most loaded rank.
struct ContextLayerComm {
  std::string kind;        // "full" or "swa"
  int layers = 0;          // layers of this kind
  int recomputed = 0;      // of them, recomputed (forward exchange twice)
  int64_t window = 0;      // 0 for full
  int64_t tokens = 0;      // K/V tokens received per row (max over ranks)
  int64_t forward = 0;     // bytes per row: K and V
  int64_t backward = 0;    // bytes per row: K and V again + dK and dV back
  int64_t per_row = 0;     // one layer that is not recomputed: forward + backward
  int64_t per_row_all = 0; // all layers of the kind: layers × per_row + recomputed × forward
};

struct ContextParallelPlan {
  int cp = 1, world = 1, dp = 1;
  int64_t seq_len = 0, chunk_tokens = 0, rank_tokens = 0;  // T, T / 2C, T / C
  int64_t rows_per_step = 0;  // rows each group (and so each rank) takes per step: batch × grad_accum
  int64_t tokens_per_step = 0;  // dp × rows_per_step × T: the whole world's step
  int64_t element_bytes = 4;  // K/V element size
  MemoryPlan memory;          // per rank: one micro-batch of batch × T / C tokens
  // Per rank, for the layer in flight (reused by every layer): the ring's
  // two K/V blocks (the one computed on, the one arriving) and, in backward,
  // two dK/dV blocks, each rank_tokens × 2 × kv_dim; for full layers the
  // log-sum-exp merge's fp32 output and LSE (rank_tokens × (q_dim + heads));
  // for SWA layers the received halo and its gradient. The larger of the
  // kinds a model has; 0 for C = 1.
  int64_t exchange_buffers = 0;
  std::vector<ContextLayerComm> layers;  // "full" first when present
  int64_t bytes_per_row = 0;   // all layers, per rank
  int64_t bytes_per_step = 0;  // × rows_per_step
  RankMemoryPlan ranks;        // world ranks; activations = memory.activations + exchange_buffers
};

// The plan of `plan` (its dims and options: batch, seq_len, grad_accum,
// recompute and dtypes) with the context split over cp ranks of a world of
// `world` (FSDP and ZeRO shard over the whole world as today). Errors: cp < 1,
// world not divisible by cp, seq_len not divisible by 2·cp. With cp = 1,
// memory == plan.memory and ranks == PlanRankMemory(plan, ...) exactly, and no
// bytes move.
absl::StatusOr<ContextParallelPlan> PlanContextParallel(const Plan& plan, int cp, DataParallelMode mode, int world,
                                                        bool reshard_after_forward = true, int64_t rank_memory = 0,
                                                        bool grad_sum_fp64 = false);
std::string FormatContextParallelPlan(const ContextParallelPlan& p);
nlohmann::json ContextParallelPlanToJson(const ContextParallelPlan& p);

}  // namespace longctx

#endif  // LONGCTX_MODEL_CONTEXT_PLAN_H_
