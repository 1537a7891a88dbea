// Why: the RMSNorm math written once for every backend. A backend only decides
// how to reduce a row (threads on the CPU, a warp/block on a GPU); the scalar
// formulas below are the contract, so a CPU and a CUDA result differ only by the
// order of the row sums.
//
// Forward, per row x of length D:  rstd = 1/sqrt(sum(x^2)/D + eps),  y = x*rstd*w.
// Backward, with g = dy*w:          dx = rstd*g - x * rstd^3/D * sum(g*x),
//                                   dw += dy*x*rstd (summed over rows).
#ifndef LONGCTX_KERNELS_MATH_RMSNORM_H_
#define LONGCTX_KERNELS_MATH_RMSNORM_H_

#include <math.h>

#include <cstdint>
#include <type_traits>

#include "kernels/math/hd.h"

namespace longctx::math {

// rstd of a row from its sum of squares (Acc is the accumulation type, double
// on the CPU); returned in Acc so callers cast once.
template <class Acc>
LONGCTX_HD Acc RmsNormRstd(Acc sum_squares, int64_t d, double eps) {
  if constexpr (std::is_same_v<Acc, float>) {
    return 1.0f / sqrtf(sum_squares / static_cast<float>(d) + static_cast<float>(eps));
  } else {
    return 1.0 / sqrt(sum_squares / static_cast<double>(d) + eps);
  }
}

template <class T>
LONGCTX_HD T RmsNormY(T x, T rstd, T w) {
  return x * rstd * w;
}

// The per-row backward coefficient rstd^3/D * sum(dy*w*x).
template <class Acc>
LONGCTX_HD Acc RmsNormBackwardCoef(Acc sum_gx, Acc rstd, int64_t d) {
  return rstd * rstd * rstd * sum_gx / static_cast<Acc>(d);
}

// dx for one element, given g = dy*w.
template <class T>
LONGCTX_HD T RmsNormDx(T g, T x, T rstd, T coef) {
  return rstd * g - x * coef;
}

// One row's contribution to dweight.
template <class T>
LONGCTX_HD T RmsNormDw(T dy, T x, T rstd) {
  return dy * x * rstd;
}

}  // namespace longctx::math

#endif  // LONGCTX_KERNELS_MATH_RMSNORM_H_
