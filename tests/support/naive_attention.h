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

}  // namespace longctx::testing

#endif  // LONGCTX_TESTS_SUPPORT_NAIVE_ATTENTION_H_
