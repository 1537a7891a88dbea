// Why: which keys a query may attend to — causal, sliding window, document
// segments, diagonal offset, fewer queries than keys aligned bottom-right — is
// one rule (AttentionParams in kernels/ops.h states it). The CPU and CUDA
// attention kernels, the KV cache (which rows a later query can still see) and
// the attention analyses all need it, as a per-pair predicate or as the key
// range of a query row or the query range of a key; written out in each they
// drift. These LONGCTX_HD functions are that rule, once, for host and device.
//
// Coordinates: every index is a key index (absolute or segment-relative: the
// rule is translation invariant). A segment's keys are [k_begin, k_end). Its
// Lq <= Lk queries sit at the key indices [k_end - Lq, k_end) — bottom-right
// alignment, so the last query is the last key (QueryKeyIndex); in training
// queries and keys are the same tokens and the shift is 0. The query at key
// index p sees key j iff
//   k_begin <= j,  j <= p - diagonal_offset,  and (window == 0 or j > p - window).
// Both ends of a query's range are nondecreasing in p, so a block of
// consecutive queries [p0, p1] sees keys only in
// [FirstVisibleKey(p0), EndVisibleKey(p1)): the tiled kernels skip whole key
// tiles outside it; likewise the queries seeing a key block [j0, j1] lie in
// [FirstQuerySeeing(j0), EndQuerySeeing(j1)).
//
// Tested exhaustively against an independent brute-force definition in
// tests/kernels/attention_visibility_test.cc.
#ifndef LONGCTX_KERNELS_MATH_ATTENTION_VISIBILITY_H_
#define LONGCTX_KERNELS_MATH_ATTENTION_VISIBILITY_H_

#include <cstdint>

#include "kernels/math/hd.h"

namespace longctx::math {

// The two numbers that shape a segment's mask (AttentionParams::window and
// ::diagonal_offset, both >= 0).
struct AttentionMask {
  int window = 0;           // w > 0: the query at p sees keys j > p - w; 0: no lower bound but the segment
  int diagonal_offset = 0;  // o >= 0: the query at p sees keys j <= p - o
};

// What bottom-right alignment adds to a query row index to get its key index,
// for a segment whose queries end at q_end and keys at k_end.
LONGCTX_HD int64_t QueryKeyShift(int64_t q_end, int64_t k_end) { return k_end - q_end; }

// Key index of query row i of that segment.
LONGCTX_HD int64_t QueryKeyIndex(int64_t i, int64_t q_end, int64_t k_end) { return i + QueryKeyShift(q_end, k_end); }

// The first key the query at key index p sees, in a segment whose keys begin
// at k_begin.
LONGCTX_HD int64_t FirstVisibleKey(const AttentionMask& m, int64_t k_begin, int64_t p) {
  if (m.window <= 0) return k_begin;
  const int64_t lo = p - m.window + 1;
  return lo > k_begin ? lo : k_begin;
}

// One past the last key the query at key index p sees (<= p + 1, so inside
// the segment whenever p is). The range [FirstVisibleKey, EndVisibleKey) is
// empty when End <= First: that row sees no key.
LONGCTX_HD int64_t EndVisibleKey(const AttentionMask& m, int64_t p) { return p + 1 - m.diagonal_offset; }

// The pair predicate: does the query at key index p see key j (both in the
// segment whose keys begin at k_begin)?
LONGCTX_HD bool KeyVisible(const AttentionMask& m, int64_t k_begin, int64_t p, int64_t j) {
  return j >= FirstVisibleKey(m, k_begin, p) && j < EndVisibleKey(m, p);
}

// The first key index of a query that sees key j (may lie before the
// segment's first query: clamp to it).
LONGCTX_HD int64_t FirstQuerySeeing(const AttentionMask& m, int64_t j) { return j + m.diagonal_offset; }

// One past the key index of the last query that sees key j, in a segment
// whose keys (hence queries) end at k_end.
LONGCTX_HD int64_t EndQuerySeeing(const AttentionMask& m, int64_t k_end, int64_t j) {
  if (m.window <= 0) return k_end;
  const int64_t hi = j + m.window;
  return hi < k_end ? hi : k_end;
}

}  // namespace longctx::math

#endif  // LONGCTX_KERNELS_MATH_ATTENTION_VISIBILITY_H_
