// Why: under context parallelism a rank holds some chunks of a packed row and
// its queries must attend to keys that other ranks hold. The attention of a
// query chunk splits exactly into attentions against disjoint key blocks,
// each returning (o, lse) that the log-sum-exp merge combines into the full
// result (and whose backward, given the merged o and lse, sums back to the
// full gradient). What a block call needs beyond the ops' own fields is which
// keys of an offered range any query can see at all (the document and window
// rule by *global* row index: a sliding-window layer needs only the w - 1
// keys before a chunk, a document that ends before the chunk contributes
// nothing) and the per-document segments that pair the chunk's queries with
// those keys. This file is that planning, the block forward/backward calls
// on it (AttentionParams with query_offset_set), and the merge of several
// parts. Nothing here moves data between ranks (model/ does).
#ifndef LONGCTX_KERNELS_CONTEXT_ATTENTION_H_
#define LONGCTX_KERNELS_CONTEXT_ATTENTION_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "kernels/backend.h"
#include "kernels/tensor.h"

namespace longctx {

// One (query chunk, key block) pair of a row. Row positions are global
// (0..T-1 within the row).
struct ContextBlockPlan {
  int64_t q_begin = 0, q_end = 0;  // the query chunk [q0, q1)
  // The keys of the offered range that some query of the chunk sees (the
  // offered range trimmed; empty when none does: the block is skipped).
  int64_t k_begin = 0, k_end = 0;
  int window = 0;
  // Per document meeting the chunk or the trimmed keys, in row order: its
  // queries (rows of the chunk, from 0) and its keys (rows of the trimmed
  // block, from 0). Empty when skipped.
  std::vector<int32_t> cu_q, cu_k;
  bool skipped() const { return k_end <= k_begin; }
  int64_t num_keys() const { return k_end - k_begin; }
  int64_t query_offset() const { return q_begin - k_begin; }
};

// Plans the block of queries [q0, q1) against the offered keys [k0, k1) of a
// row whose documents are row_cu_seqlens (I32 boundaries, 0 = first, last =
// T), under window w (0: full causal). Query p sees key j iff both lie in
// one document, j <= p and (w == 0 or j > p - w). Errors: bad boundaries
// (not starting at 0, decreasing), ranges outside [0, T] or reversed, w < 0.
absl::StatusOr<ContextBlockPlan> PlanContextBlock(absl::Span<const int32_t> row_cu_seqlens, int64_t q0, int64_t q1,
                                                  int64_t k0, int64_t k1, int window);

// Bytes of the K and V rows a block needs ((k_end - k_begin) keys of
// kv_heads x head_dim elements each of K and of V): what a rank must
// receive for it (0 when skipped).
int64_t ContextBlockKvBytes(const ContextBlockPlan& plan, int64_t kv_heads, int64_t head_dim, int64_t element_bytes);

// The fields of the block's attention call: q [q_end - q_begin, H, d] the
// chunk's queries, k, v [num_keys, Hkv, d] the trimmed block's keys (rows
// k_begin - k0 on of what was offered), o and lse outputs ([Nq, H, d],
// [H, Nq]); the plan must outlive the params (they point at its segments).
// In the backward o and lse are the merged (whole-attention) ones, and d_o,
// dq (this block's share, overwritten), dk, dv (overwritten) are set by the
// caller.
AttentionParams ContextBlockParams(const ContextBlockPlan& plan, const Tensor& q, const Tensor& k, const Tensor& v,
                                   const Tensor& o, const Tensor& lse, double scale = 0.0);

// Forward of a planned block: o, lse of the chunk's queries over the block's
// keys only (rows that see none of them: o = 0, lse = -inf). FailedPrecondition
// for a skipped block (nothing to compute), InvalidArgument for shapes that
// do not match the plan.
absl::Status ContextBlockForward(Backend& backend, const ContextBlockPlan& plan, const Tensor& q, const Tensor& k,
                                 const Tensor& v, const Tensor& o, const Tensor& lse, double scale = 0.0);

// Backward of a planned block given the merged o, lse of the chunk's queries
// (over all its blocks) and dO: dq = this block's part of the chunk's dQ,
// dk, dv = the block's keys' gradient from this chunk (all overwritten). The
// sums over blocks are the full attention's gradient.
absl::Status ContextBlockBackward(Backend& backend, const ContextBlockPlan& plan, const Tensor& q, const Tensor& k,
                                  const Tensor& v, const Tensor& o, const Tensor& lse, const Tensor& d_o,
                                  const Tensor& dq, const Tensor& dk, const Tensor& dv, double scale = 0.0);

// Merges attentions of the same queries over disjoint key sets, parts (o_i,
// lse_i), into o, lse (which may be part 0 or 1): exactly the attention
// over the union of the key sets (AttentionMerge, folded left to right).
// One part is copied. InvalidArgument for no parts or mismatched sizes.
absl::Status MergeAttentionParts(Backend& backend, absl::Span<const Tensor> os, absl::Span<const Tensor> lses,
                                 const Tensor& o, const Tensor& lse);

}  // namespace longctx

#endif  // LONGCTX_KERNELS_CONTEXT_ATTENTION_H_
