// Why: before anyone rents a GPU for a run, `longctx plan` answers "how many
// parameters, how many FLOPs, how much memory" from the config alone, without
// allocating the model. The numbers are exact counts of what longctx's own
// trainer stores (the activation list mirrors model/transformer.cc), so a plan
// that says a run fits is a promise, and the parameter count is checked
// against the published sizes (TinyLlama-1.1B: 1,100,048,384).
#ifndef LONGCTX_MODEL_PLAN_H_
#define LONGCTX_MODEL_PLAN_H_

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/backend.h"
#include "model/config.h"

namespace longctx {

// Exact parameter counts. Per-layer figures are the same for every layer.
struct ParamCounts {
  int64_t embedding = 0;  // vocab × hidden
  // Attention, one layer.
  int64_t q = 0, k = 0, v = 0, o = 0;
  int64_t qk_norm = 0;         // 2 × head_dim when qk_norm, else 0
  int64_t attention_per_layer = 0;
  // MLP, one layer.
  int64_t gate = 0, up = 0, down = 0;
  int64_t mlp_per_layer = 0;
  int64_t norms_per_layer = 0;  // input_layernorm + post_attention_layernorm = 2 × hidden
  int64_t per_layer = 0;
  int64_t layers_total = 0;     // layers × per_layer
  int64_t final_norm = 0;
  int64_t lm_head = 0;          // 0 when tied
  int64_t total = 0;
  // Parameters that take part in a matrix product per token: every layer
  // matrix plus the LM head (the embedding matrix when tied). The embedding
  // lookup is a gather, not a product, and norm weights are elementwise.
  int64_t matmul = 0;
};

// Training FLOPs per token (forward + backward = 3 × forward) for one step at
// sequence length T, every row one full-length causal segment.
struct FlopCounts {
  int64_t seq_len = 0;
  double matmul_per_token = 0;     // 6 × ParamCounts::matmul
  // Σ over layers 12 × heads × head_dim × mean keys per query; the mean is
  // (T+1)/2 for a causal full layer and mean_i min(i+1, w) for window w.
  double attention_per_token = 0;
  double total_per_token = 0;      // matmul + attention
  // The usual estimate 12 × layers × T × hidden (no causal halving, no windows,
  // hidden in place of heads × head_dim), for comparison.
  double standard_attention_per_token = 0;
  double standard_total_per_token = 0;
  std::vector<double> mean_keys;   // per layer
};

// Training memory in bytes, fp32, for one micro-batch of batch × seq_len tokens.
struct MemoryPlan {
  int64_t batch = 0, seq_len = 0, tokens = 0;
  int64_t logits_chunk_tokens = 0;  // rows of the LM-head logits chunk (min(chunk, tokens))
  int64_t weights = 0, grads = 0, adam_m = 0, adam_v = 0;
  // Activations.
  int64_t layer_floats_per_token = 0;  // stored per layer per token (see plan.cc)
  int recomputed_layers = 0;           // layers that keep only their input (recompute_every)
  // bf16 activation storage (ModelConfig.activation_dtype; model/transformer.h):
  // of layer_floats_per_token, bf16_floats_per_token (xn1, qkv, o, xn2, gu, h,
  // qk-norm's q and k) are stored in 2 bytes by a stored layer; the layer
  // computes them in one F32 working set shared by all layers.
  // bf16 products (precision BF16, F32 model) alone: xn1, xn2 and h
  // (2·hidden + ffn floats) are bf16 tensors, in every layer and working set
  // (Transformer::product_input_dtype); bf16 storage includes them.
  bool bf16_activations = false;
  bool bf16_products = false;
  int64_t bf16_floats_per_token = 0;
  // fp32: (stored layers × layer_floats_per_token + recomputed layers
  //  × hidden + (one shared scratch set: layer_floats_per_token − hidden, if
  //  any)) × tokens × 4. With bf16 floats: a stored layer takes
  //  (layer_floats_per_token − bf16_floats_per_token) × 4 + bf16_floats_per_token
  //  × 2 bytes per token; the recomputed layers' shared set keeps xn1, xn2, h
  //  in 2 bytes with bf16 products, and without recomputed layers bf16 storage
  //  needs a working set of F32 copies of its other kinds (qkv, o, gu, qk-norm's).
  int64_t layer_activations = 0;
  int64_t final_norm = 0;              // tokens × (2·hidden + 1) × 4: final residual, norm out, rstd
  int64_t token_buffers = 0;           // tokens × 3 int32 (ids, targets, positions)
  int64_t logits_chunk = 0;            // logits_chunk_tokens × vocab × 4
  int64_t scratch_floats_per_token = 0;
  int64_t backward_scratch = 0;        // tokens × scratch_floats_per_token × 4, reused by every layer
  // The bf16 products' operand copies (Bf16OperandCopies, kernels/backend.h:
  // what the backend copies), kept across steps: the layer products' two copy
  // buffers, each as large as the largest operand of its side that is
  // copied, and the LM head's copies of its weight, of x and of one chunk's
  // dlogits. Every layer weight and the [tokens, q_dim] attention output are
  // among those operands, so at long L this grows with the tokens.
  Bf16OperandCopies bf16_operands;
  int64_t bf16_copies_layers = 0;   // the layer products' two buffers
  int64_t bf16_copies_lm_head = 0;  // W, x and dlogits of the LM head
  int64_t bf16_operand_copies = 0;  // the two lines above
  int64_t activations = 0;          // the activation lines above and bf16_operand_copies
  int64_t total = 0;                   // weights + grads + m + v + activations
};

struct PlanOptions {
  int64_t batch = 1;        // rows per micro-batch
  int64_t seq_len = 2048;   // tokens per row
  int64_t grad_accum = 1;   // micro-batches per optimizer step (FLOPs per step)
  int64_t logits_chunk_tokens = 0;  // 0 = the LM head's default for the vocab (DefaultLmHeadChunkRows)
  int recompute_every = 0;  // activation recomputation (ModelConfig.recompute_every)
  bool bf16_activations = false;  // ModelConfig.activation_dtype "bf16"
  bool bf16_products = false;     // precision BF16 with an F32 model (xn1, xn2, h in bf16)
  // With bf16 products: the copies the backend keeps for their operands
  // (Backend::bf16_operand_copies, or the registry's answer for a backend
  // name without making one); none by default.
  Bf16OperandCopies bf16_operands;
};

struct Plan {
  ModelDims dims;
  PlanOptions options;
  ParamCounts params;
  FlopCounts flops;
  MemoryPlan memory;
};

ParamCounts CountParams(const ModelDims& dims);
// Mean over queries i = 0..T-1 of the keys query i attends: min(i + 1, window),
// window 0 = full causal ((T+1)/2).
double MeanKeysPerQuery(int64_t seq_len, int64_t window);
FlopCounts CountTrainingFlops(const ModelDims& dims, int64_t seq_len);
// recompute_every: Transformer::set_recompute_every (0 = none; k: layers l
// with l % k == 0 keep only their input plus one shared scratch set).
// bf16_activations: Transformer::set_activation_dtype(kBF16) (all of kActAll).
// bf16_products: MatmulPrecision::kBF16 on an F32 model (implied by
// bf16_activations); bf16_operands: the copies its products keep (no
// effect without bf16 products).
MemoryPlan EstimateTrainingMemory(const ModelDims& dims, int64_t batch, int64_t seq_len,
                                  int64_t logits_chunk_tokens = 0, int recompute_every = 0,
                                  bool bf16_activations = false, bool bf16_products = false,
                                  const Bf16OperandCopies& bf16_operands = {});
Plan MakePlan(const ModelDims& dims, const PlanOptions& options);

// Per-rank training memory of a data-parallel run (train.proto `mode`), in
// bytes, fp32, from what train/parallel/parallel_strategy.cc allocates:
//  DDP:   full weights, grads, AdamW m and v on every rank.
//  ZERO1: full weights and grads; a gradient shard; m and v for the shard.
//  FSDP:  weight shard, gradient-shard accumulator, m and v for the shard, one
//         reduce-scatter staging shard (largest buffer / world), plus the
//         gathered buffers: buffer 0 (embedding, final norm, LM head) weights
//         and grads for the whole step, and at the peak (a layer's backward)
//         one layer's weights and grads — with reshard_after_forward false,
//         every layer's weights (kept from forward to backward) instead.
// With grad_sum_fp64 (train.proto; train/parallel/grad_sum64.h) also the fp64
// gradient sum: an 8-byte accumulator per parameter (DDP/ZeRO-1) or per shard
// element (FSDP) when a rank takes 2+ micro-batches a step, a conversion
// scratch (DDP/ZeRO-1, <= 8 MiB), and the reduce-scatter's send and receive
// buffers (pieces of at most 4 Mi doubles over all ranks) when the sum runs
// in fp64 across ranks (not for 2 ranks x 1 micro-batch: fp32's a + b is
// already exact).
// Shards are the largest rank's (ShardOf gives rank 0 the extra element).
// Not counted: the one-off full-model copy at startup/resume and the full
// parameters gathered for a checkpoint save or the periodic probe (both
// spikes of one full model's weights; rank 0 also gathers m and v to save).
enum class DataParallelMode { kDdp, kZero1, kFsdp };
struct RankMemoryPlan {
  DataParallelMode mode = DataParallelMode::kDdp;
  int world = 1;
  bool reshard_after_forward = true;
  int64_t weights = 0;      // resident weights (full or shard)
  int64_t grads = 0;        // resident gradients (full and/or shard)
  int64_t optimizer = 0;    // AdamW m + v
  int64_t gathered = 0;     // FSDP: gathered buffer 0 + layer(s) weights and grads at the peak
  int64_t grad_sum64 = 0;   // grad_sum_fp64: accumulator, scratch and reduce-scatter buffers
  int64_t activations = 0;  // MemoryPlan::activations (one micro-batch, independent of world)
  int64_t total = 0;
  int64_t rank_memory = 0;  // the budget asked about; 0 = none given
  bool fits() const { return rank_memory <= 0 || total <= rank_memory; }
};
const char* ParallelModeName(DataParallelMode m);
// "ddp", "zero1", "fsdp" (any case); false when unknown.
bool ParseParallelMode(const std::string& s, DataParallelMode* out);
// plan.options.grad_accum is the micro-batches each rank takes per step.
RankMemoryPlan PlanRankMemory(const Plan& plan, DataParallelMode mode, int world, bool reshard_after_forward = true,
                              int64_t rank_memory = 0, bool grad_sum_fp64 = false);
std::string FormatRankMemory(const RankMemoryPlan& r);
nlohmann::json RankMemoryToJson(const RankMemoryPlan& r);

// Human-readable table (counts with thousands separators, bytes in GiB/MiB).
std::string FormatPlan(const Plan& plan);
// Bytes as the table prints them: "94.89 GiB", "1.50 MiB", "12 B".
std::string FormatPlanBytes(int64_t bytes);
nlohmann::json PlanToJson(const Plan& plan);

}  // namespace longctx

#endif  // LONGCTX_MODEL_PLAN_H_
