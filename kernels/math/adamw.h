// Why: the AdamW update written once for every backend (see AdamWParams in
// ops.h). The per-step scalars (bias corrections) are computed once on the host
// in double; the per-element update is the LONGCTX_HD function below.
//
// g = grad * grad_scale; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
// p -= lr * (m / (1 - b1^t) / (sqrt(v / (1 - b2^t)) + eps) + weight_decay * p).
#ifndef LONGCTX_KERNELS_MATH_ADAMW_H_
#define LONGCTX_KERNELS_MATH_ADAMW_H_

#include <math.h>

#include <cstdint>
#include <cstring>

#include "kernels/math/hd.h"
#include "kernels/math/select_bits.h"

namespace longctx::math {

template <class T>
struct AdamWScalars {
  T lr, beta1, one_minus_beta1, beta2, one_minus_beta2, eps, weight_decay, grad_scale;
  T inv_bias1;  // 1 / (1 - beta1^step)
  T inv_bias2;  // 1 / (1 - beta2^step)
};

// Host-side: the per-step scalars, computed in double then cast once.
template <class T>
inline AdamWScalars<T> MakeAdamWScalars(double lr, double beta1, double beta2, double eps,
                                        double weight_decay, double grad_scale, int64_t step) {
  const double bias1 = 1.0 - pow(beta1, static_cast<double>(step));
  const double bias2 = 1.0 - pow(beta2, static_cast<double>(step));
  AdamWScalars<T> s;
  s.lr = static_cast<T>(lr);
  s.beta1 = static_cast<T>(beta1);
  s.one_minus_beta1 = static_cast<T>(1.0 - beta1);
  s.beta2 = static_cast<T>(beta2);
  s.one_minus_beta2 = static_cast<T>(1.0 - beta2);
  s.eps = static_cast<T>(eps);
  s.weight_decay = static_cast<T>(weight_decay);
  s.grad_scale = static_cast<T>(grad_scale);
  s.inv_bias1 = static_cast<T>(1.0 / bias1);
  s.inv_bias2 = static_cast<T>(1.0 / bias2);
  return s;
}

// sqrt of the bias-corrected second moment (x >= 0, or NaN/inf after a bad
// step). Double (tests) and GPUs use the library sqrt. The host float path is
// the one training runs: GCC keeps libm's sqrtf a possible errno-setting call
// unless -fno-math-errno, which blocks vectorization, and scalar sqrt+divide
// share one unpipelined unit on some CPUs (5x slower than memory here). So it is
// an inverse-sqrt bit-trick seed + 3 Newton steps (relative error < 1e-6,
// ~2 ulps in practice), all plain arithmetic GCC vectorizes.

LONGCTX_HD double AdamWSqrt(double x) { return sqrt(x); }

LONGCTX_HD float AdamWSqrt(float x) {
#if defined(__CUDA_ARCH__)
  return sqrtf(x);
#else
  // Tiny (incl. denormal) inputs are scaled by 2^100 so the seed is accurate.
  const bool tiny = x < 1e-30f;
  const float xs = detail::SelectBits(tiny, x * 0x1p100f, x);
  uint32_t bits;
  std::memcpy(&bits, &xs, 4);
  bits = 0x5f375a86u - (bits >> 1);
  float y;
  std::memcpy(&y, &bits, 4);
  const float half = 0.5f * xs;
  y = y * (1.5f - half * y * y);
  y = y * (1.5f - half * y * y);
  y = y * (1.5f - half * y * y);
  const float r = xs * y;  // 0 for x = 0: y stays finite
  const float scaled = detail::SelectBits(tiny, r * 0x1p-50f, r);
  // +inf and NaN are their own sqrt (the iteration would give -inf for +inf);
  // one comparison true for both (a || would become a branch).
  return detail::SelectBits(!(x <= 3.4028234e38f), x, scaled);
#endif
}

// One element: updates p, m, v in place.
template <class T>
LONGCTX_HD void AdamWUpdate(T& p, T grad, T& m, T& v, const AdamWScalars<T>& s) {
  const T g = grad * s.grad_scale;
  const T mn = s.beta1 * m + s.one_minus_beta1 * g;
  const T vn = s.beta2 * v + s.one_minus_beta2 * g * g;
  m = mn;
  v = vn;
  const T update = (mn * s.inv_bias1) / (AdamWSqrt(vn * s.inv_bias2) + s.eps);
  p = p - s.lr * (update + s.weight_decay * p);
}

}  // namespace longctx::math

#endif  // LONGCTX_KERNELS_MATH_ADAMW_H_
