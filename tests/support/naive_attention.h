// Why: the tiled CPU/CUDA attention kernels are checked against the most
// literal implementation possible: per segment an explicit mask matrix, a
// full (non-online) softmax, everything in double, and a backward written from
// the explicit P, dP and dS matrices. Memory is O(segment^2), so this is for
// tests only. Tensors are dense row-major doubles:
// q, o, d_o, dq: [n, heads, head_dim]; k, v, dk, dv: [n, kv_heads, head_dim];
// lse: [heads, n].
#ifndef LONGCTX_TESTS_SUPPORT_NAIVE_ATTENTION_H_
#define LONGCTX_TESTS_SUPPORT_NAIVE_ATTENTION_H_

#include <cstdint>
#include <vector>

namespace longctx::testing {

struct NaiveAttentionShape {
  int64_t n = 0;
  int64_t heads = 1;
  int64_t kv_heads = 1;
  int64_t head_dim = 1;
  std::vector<int32_t> cu_seqlens;  // [segments + 1], cu[0] = 0, cu[last] = n
  int window = 0;                   // 0 = full causal
  double scale = 0.0;               // 0 = 1/sqrt(head_dim)
};

// mask[r * len + c] for the segment of length len: may query r see key c?
std::vector<bool> NaiveAttentionMask(int64_t len, int window);

void NaiveAttentionForward(const NaiveAttentionShape& s, const double* q, const double* k, const double* v,
                           double* o, double* lse);

// Gradients of sum(o * d_o); dq, dk, dv are overwritten.
void NaiveAttentionBackward(const NaiveAttentionShape& s, const double* q, const double* k, const double* v,
                            const double* d_o, double* dq, double* dk, double* dv);

// The forward-only inference generalisation of AttentionParams (ops.h): keys
// with their own segments, aligned bottom-right to the queries, and a diagonal
// offset. Query r of segment s (Lq queries, Lk keys) is at key index
// i = Lk - Lq + r and sees keys j with max(0, i - window + 1 if window) <= j <= i - offset
// of its segment. Written per query with an explicit visibility test. Rows
// that see no key get o = 0 and lse = -inf.
// q, o: [nq, heads, head_dim]; k, v: [nk, kv_heads, head_dim]; lse: [heads, nq].
struct NaiveInferenceShape {
  int64_t nq = 0, nk = 0;
  int64_t heads = 1, kv_heads = 1, head_dim = 1;
  std::vector<int32_t> cu_q, cu_k;  // [segments + 1] each
  int window = 0;
  int offset = 0;
  double scale = 0.0;
};
void NaiveAttentionForwardInference(const NaiveInferenceShape& s, const double* q, const double* k,
                                    const double* v, double* o, double* lse);

}  // namespace longctx::testing

#endif  // LONGCTX_TESTS_SUPPORT_NAIVE_ATTENTION_H_
