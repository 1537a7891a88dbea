// Why: STRING and RoPER are defined by a position matrix, not by how longctx
// implements them (rotations at shifted positions, two attentions merged by
// log-sum-exp, rotated values and outputs). This reference computes attention
// straight from the definition, in double, from UN-rotated q, k, v: for query
// i and key j of a segment at relative position P = position(i, j),
//   score = scale * (R(P) q_i) . k_j          (R = rotate-half RoPE by P)
//   o_i   = sum_j softmax(score)_j * R(-P) v_j (RoPER; plain v_j without it)
// where R(P) acting on q equals rotating q at i and k at j with i - j = P.
// Nothing is tiled, merged or cached, so it shares no logic with the code
// under test. Memory O(segment^2) per head: tests only.
#ifndef LONGCTX_TESTS_SUPPORT_EXPLICIT_POSITION_ATTENTION_H_
#define LONGCTX_TESTS_SUPPORT_EXPLICIT_POSITION_ATTENTION_H_

#include <cstdint>
#include <functional>
#include <vector>

namespace longctx::testing {

struct ExplicitAttentionSpec {
  int64_t heads = 1, kv_heads = 1, head_dim = 2;
  int rope_dim = 0;      // rotated dims of q/k (0 = NoPE: no rotation at all)
  double theta = 10000;
  double scale = 0;      // 0 = 1/sqrt(head_dim)
  // Multiplies the rotated dims of q and of k (scaled RoPE tables): the
  // rotated part of every score is multiplied by its square.
  double table_scale = 1;
  int roper_dim = 0;     // 0 = no RoPER; else values rotated by -P over these dims
};

// P = position(i, j) for segment-local indices i >= j; negative = masked.
using PositionFn = std::function<int64_t(int64_t i, int64_t j)>;

// x rotated by position m over its first rotary_dim dims (pairs p, p + rd/2,
// angle m * theta^(-2p/rd)), in double.
void RotateExplicit(double* x, int rotary_dim, double theta, double m);

// q [n, heads, head_dim]; k, v [n, kv_heads, head_dim]; segments cu [s + 1].
// o [n, heads, head_dim]; rows that see no key get 0.
void ExplicitPositionAttention(const ExplicitAttentionSpec& s, const std::vector<double>& q,
                               const std::vector<double>& k, const std::vector<double>& v,
                               const std::vector<int32_t>& cu, const PositionFn& position, std::vector<double>* o);

}  // namespace longctx::testing

#endif  // LONGCTX_TESTS_SUPPORT_EXPLICIT_POSITION_ATTENTION_H_
