// Why: one plain params struct per op, validated once (Validate) before any
// backend runs it. Backends never re-check shapes; a failed Validate is a
// broken invariant of the caller and aborts with the op and the reason.
//
// Conventions shared by every op:
//  * "Token-major" tensors are [tokens, ...] with dimension 0 possibly strided
//    (Tensor::row_stride), so q/k/v can be column slices of one fused matrix.
//  * Floating tensors of one op share one dtype (F32 or F64; F64 exists so that
//    finite-difference gradient checks are exact to ~1e-9); Gemm's operands
//    may also be BF16 copies (GemmParams).
//  * "accumulate" outputs are added to (+=); the others are overwritten.
#ifndef LONGCTX_KERNELS_OPS_H_
#define LONGCTX_KERNELS_OPS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/attention_args.h"
#include "kernels/tensor.h"

namespace longctx {

// Precision of the products of F32 matrix ops (Gemm, LmHeadLoss), a setting of
// the backend (Backend::SetMatmulPrecision), like PyTorch's
// set_float32_matmul_precision: kBF16 rounds both operands to bf16 (round to
// nearest even, kernels/math/bf16.h) and accumulates in fp32; tensors, master
// weights and everything else stay F32. F64 ops are never affected.
enum class MatmulPrecision : uint8_t { kF32 = 0, kBF16 = 1 };

// C = alpha * op(A) @ op(B) + beta * C, all row-major 2-D; op = transpose if set.
// With an F32 C, A and B may also be BF16: a bf16 copy the caller made once
// to use in several products (the backward's dY in its dX and dW products).
// A product with a BF16 operand is a bf16-precision product (the other
// operand rounded to bf16 too, fp32 accumulation) whatever the backend's
// MatmulPrecision: exactly the product kBF16 computes from F32 operands.
struct GemmParams {
  Tensor a, b, c;
  bool trans_a = false;
  bool trans_b = false;
  double alpha = 1.0;
  double beta = 0.0;
  absl::Status Validate() const;
};

// out[t, :] = table[ids[t], :]. Backward: d_table[ids[t], :] += d_out[t, :].
struct EmbeddingParams {
  Tensor ids;    // I32 [N]
  Tensor table;  // [V, D] (forward) / d_table (backward, accumulate)
  Tensor out;    // [N, D] (forward) / d_out (backward)
  absl::Status Validate() const;
};

// y = x * rstd * weight, rstd = 1/sqrt(mean(x^2) + eps), per row of x [N, D].
struct RmsNormParams {
  Tensor x;       // [N, D]
  Tensor weight;  // [D]
  Tensor y;       // [N, D] forward output; may be BF16 with an F32 x (rounded
                  // as Copy rounds: an operand only bf16 products read)
  Tensor rstd;    // [N] forward output, backward input
  double eps = 1e-5;
  // Backward only:
  Tensor dy;       // [N, D]
  Tensor dx;       // [N, D]; overwritten, or added to when accumulate_dx
  Tensor dweight;  // [D], accumulate
  bool accumulate_dx = false;
  absl::Status Validate(bool backward) const;
};

// Rotary embedding, rotate-half pairing (dim j with j + rotary_dim/2, the Hugging
// Face convention), in place on x [N, heads, head_dim]; the first rotary_dim
// dims of each head rotate, the rest pass through.
// angle(t, j) = direction * position_scale * positions[t] * theta^(-2j/rotary_dim).
// The backward of a rotation is the same op with direction = -1.
struct RopeParams {
  Tensor x;          // [N, H, head_dim], row-strided allowed
  Tensor positions;  // I32 [N]
  double theta = 10000.0;
  int rotary_dim = 0;  // 0 = head_dim
  double position_scale = 1.0;
  int direction = 1;  // +1 rotate, -1 rotate back
  absl::Status Validate() const;
};

// h = silu(gate) * up; gate_up is [N, 2F] with gate in columns [0, F), up in [F, 2F).
struct SwiGluParams {
  Tensor gate_up;   // [N, 2F]
  Tensor h;         // [N, F] forward output; may be BF16 with an F32 gate_up
  Tensor dh;        // [N, F] backward input
  Tensor dgate_up;  // [N, 2F] backward output (overwritten); may be BF16 with
                    // F32 inputs: rounded as Copy rounds, for bf16 products
  absl::Status Validate(bool backward) const;
};

// Causal attention over packed variable-length segments with GQA and an
// optional sliding window, tiled with an online softmax (memory O(N), never
// O(N^2)). Segment s covers tokens [cu_seqlens[s], cu_seqlens[s+1]); a query
// never sees a key of another segment. window w > 0: query i sees keys j with
// i - w < j <= i (itself and its w-1 predecessors); w = 0: all j <= i.
// Query head h reads kv head h / (num_heads / num_kv_heads).
// Forward only (inference: KV-cache decode, chunked prefill, STRING); the
// backward requires both unset (cu_seqlens_k is allowed with query_offset_set,
// below). With cu_seqlens_k set, k and v have their
// own rows (Nk) and segments: segment s has Lq queries and Lk >= Lq keys,
// aligned bottom-right (query r of the segment sits at key index
// Lk - Lq + r, so the last query is the last key). diagonal_offset o >= 0:
// a query at key index i sees keys j <= i - o (and j > i - window with a
// window, measured from i as always); a row that sees no key gets o = 0 and
// lse = -inf.
// Context parallelism (forward and backward, CPU backend): q holds tokens
// [q0, q1) of a row and k, v tokens [k0, k1) of the same row, possibly at
// other positions; segment s pairs the queries of one document
// [cu_seqlens[s], cu_seqlens[s+1]) with its keys [cu_seqlens_k[s],
// cu_seqlens_k[s+1]) (either side may be empty, any lengths). With
// query_offset_set and query_offset = q0 - k0, query row i sits at key index
// i + query_offset (its global row index minus k0), so the causal and window
// rule holds by global index: query row i sees key row j of its segment iff
// j <= i + query_offset and (window == 0 or j > i + query_offset - window).
// Requires cu_seqlens_k; the backward then takes the lse and o of the whole
// attention (all blocks merged) as flash attention does, and returns dq for
// this block's keys only and dk, dv [Nk] (kernels/context_attention.h builds
// these segments from a row's documents).
// The fields are those of AttentionArgs (kernels/attention_args.h), shared
// with the CUDA half of that backend, which cannot include this header; the
// visibility rule above is kernels/math/attention_visibility.h.
struct AttentionParams : AttentionArgs {
  absl::Status Validate(bool backward) const;
};

// Merge of two attentions of the same queries over disjoint key sets (STRING's
// two parts, split-KV): lse = logaddexp(lse1, lse2),
// o = exp(lse1 - lse) o1 + exp(lse2 - lse) o2 (kernels/math/attention_merge.h).
// Rows where both parts are empty (lse = -inf) give o = 0, lse = -inf.
// o may be o1 or o2 and lse may be lse1 or lse2 (in place).
struct AttentionMergeParams {
  Tensor o1, o2;      // [N, H, head_dim], row-strided allowed
  Tensor lse1, lse2;  // [H, N]
  Tensor o;           // [N, H, head_dim] output, row-strided allowed
  Tensor lse;         // [H, N] output
  absl::Status Validate() const;
};

// Cross-entropy of an LM head, fused and chunked so the [N, V] logits are
// never materialised for more than ChunkRows() rows at a time.
// logits = x @ weight^T; loss_t = logsumexp(logits_t) - logits_t[target_t];
// tokens with target < 0 are ignored (loss mask). Returns, via loss_sum, the sum
// over valid tokens (in double). When dx/dweight are set the backward runs in the
// same pass with dL/dloss_t = grad_scale for every valid token:
// dx (overwritten) and dweight (accumulated).
struct LmHeadLossParams {
  Tensor x;        // [N, D]
  Tensor weight;   // [V, D]
  Tensor targets;  // I32 [N]
  Tensor dx;       // optional [N, D]
  Tensor dweight;  // optional [V, D], accumulate
  Tensor losses;   // optional [N] per-token loss (0 where ignored)
  double grad_scale = 1.0;
  int64_t chunk_tokens = 0;  // rows per logits chunk; 0 = DefaultLmHeadChunkRows(V)
  absl::Status Validate() const;
  int64_t ChunkRows() const;  // chunk_tokens, or the default for weight's V
};

// Rows of an LM-head logits chunk when the caller does not choose: as many as
// keep the chunk's F32 logits within 128 MiB, no fewer than 256 and no more
// than 1,024. Why: each chunk's products pass over the whole [V, D] weight
// again, so fewer, larger chunks cost less: at ref-b's vocabulary (32,000)
// 1,024-row chunks (131 MB) make both the fp32 and the bf16 head faster per
// step than 256-row ones; a 128K vocabulary keeps 256 rows
// (docs/history/benchmarks-2026.md, "Attention at GEMM speed").
int64_t DefaultLmHeadChunkRows(int64_t vocab);
// The rows asked for (> 0), or the default for the vocab (0): the one rule
// behind LmHeadLossParams::ChunkRows and the memory plan's logits chunk.
int64_t LmHeadChunkRows(int64_t asked, int64_t vocab);

// Decoupled-weight-decay Adam on a flat buffer (F32 param and state):
// m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
// p -= lr * (m / (1 - b1^t) / (sqrt(v / (1 - b2^t)) + eps) + weight_decay * p).
// grad is read as grad * grad_scale (so clipping needs no extra pass).
struct AdamWParams {
  Tensor param, grad, m, v;  // same shape, F32 (or F64 in tests)
  double lr = 0, beta1 = 0.9, beta2 = 0.95, eps = 1e-8, weight_decay = 0;
  double grad_scale = 1.0;
  int64_t step = 1;  // 1-based, for bias correction
  absl::Status Validate() const;
};

}  // namespace longctx

#endif  // LONGCTX_KERNELS_OPS_H_
