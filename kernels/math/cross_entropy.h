// Why: the cross-entropy math of the LM head written once for every backend.
// A backend decides how to reduce a row of logits (max, then sum of exp); the
// per-element and per-row formulas below are the contract:
//
//   lse     = m + log(sum_v exp(l_v - m)),  m = max_v l_v   (stable log-sum-exp)
//   loss    = lse - l[target]                               (target >= 0)
//   dlogit  = (softmax_v - [v == target]) * grad_scale,  softmax_v = exp(l_v - lse)
//   ignored rows (target < 0): loss 0, dlogit 0.
#ifndef LONGCTX_KERNELS_MATH_CROSS_ENTROPY_H_
#define LONGCTX_KERNELS_MATH_CROSS_ENTROPY_H_

#include <math.h>

#include <cstdint>
#include <type_traits>

#include "kernels/math/hd.h"

namespace longctx::math {

template <class T>
LONGCTX_HD T CeExp(T x) {
  if constexpr (std::is_same_v<T, float>) {
    return expf(x);
  } else {
    return exp(x);
  }
}

// exp(l - m): one term of the shifted sum, <= 1 when m is the row max.
template <class T>
LONGCTX_HD T ShiftedExp(T logit, T row_max) {
  return CeExp(logit - row_max);
}

// log-sum-exp from the row max and the shifted sum (accumulated in Acc).
template <class Acc>
LONGCTX_HD Acc LogSumExpFromShifted(Acc row_max, Acc shifted_sum) {
  if constexpr (std::is_same_v<Acc, float>) {
    return row_max + logf(shifted_sum);
  } else {
    return row_max + log(shifted_sum);
  }
}

template <class Acc>
LONGCTX_HD Acc CrossEntropyLoss(Acc lse, Acc target_logit) {
  return lse - target_logit;
}

// dL/dlogit for one element, from its softmax probability.
template <class T>
LONGCTX_HD T CrossEntropyGrad(T prob, bool is_target, T grad_scale) {
  return (prob - (is_target ? T(1) : T(0))) * grad_scale;
}

LONGCTX_HD bool CrossEntropyIgnored(int32_t target) { return target < 0; }

}  // namespace longctx::math

#endif  // LONGCTX_KERNELS_MATH_CROSS_ENTROPY_H_
