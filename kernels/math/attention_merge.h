// Why: two attentions of the same queries over disjoint key sets (STRING's
// sliding and shifted parts, or a split-KV decode) combine exactly through
// their log-sum-exps: lse = logaddexp(lse1, lse2) and
// o = exp(lse1 - lse) o1 + exp(lse2 - lse) o2. This functor is that merge for
// one (query, head) row, written once for the CPU and CUDA kernels. An empty
// part (no visible key: lse = -inf, o = 0) gets weight exactly 0, and a row
// where both parts are empty stays empty (lse = -inf, both weights 0), with
// no NaN from exp(-inf - -inf).
#ifndef LONGCTX_KERNELS_MATH_ATTENTION_MERGE_H_
#define LONGCTX_KERNELS_MATH_ATTENTION_MERGE_H_

#include "kernels/math/hd.h"
#include "kernels/math/online_softmax.h"

namespace longctx::math {

template <class T>
struct AttentionMergeWeights {
  T w1, w2;  // o = w1 * o1 + w2 * o2
  T lse;     // logaddexp(lse1, lse2)
};

struct AttentionMerge {
  // Weights relative to the larger lse, so one exponent is exactly exp(0) = 1
  // and the other is <= 1: no overflow for any finite inputs.
  template <class T>
  LONGCTX_HD AttentionMergeWeights<T> operator()(T lse1, T lse2) const {
    const T m = SoftmaxMax(lse1, lse2);
    if (m == NegInf<T>()) return {T(0), T(0), NegInf<T>()};
    const T e1 = Exp(lse1 - m), e2 = Exp(lse2 - m);
    const T sum = e1 + e2;
    return {e1 / sum, e2 / sum, m + Log(sum)};
  }
};

}  // namespace longctx::math

#endif  // LONGCTX_KERNELS_MATH_ATTENTION_MERGE_H_
