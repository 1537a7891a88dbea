// Why: the SwiGLU math written once for every backend: silu, its derivative,
// and the fused forward/backward of h = silu(gate) * up.
//
// silu(g)  = g * sigmoid(g)
// silu'(g) = sigmoid(g) * (1 + g * (1 - sigmoid(g)))
// h = silu(g) * u;  dg = dh * u * silu'(g);  du = dh * silu(g).
//
// Exp: libm's expf is an opaque call that GCC cannot vectorize without
// -ffast-math, and the sigmoid is the whole cost of this op, so on the host the
// float path uses a Cody-Waite reduction + degree-6 polynomial (max relative
// error ~1e-7, about one ulp) written as branch-free code GCC vectorizes. On a
// GPU (and for double, which only tests use) it is the library exp.
#ifndef LONGCTX_KERNELS_MATH_SWIGLU_H_
#define LONGCTX_KERNELS_MATH_SWIGLU_H_

#include <math.h>

#include <cstdint>
#include <cstring>

#include "kernels/math/hd.h"
#include "kernels/math/select_bits.h"

namespace longctx::math {


LONGCTX_HD double SwiGluExp(double x) { return exp(x); }

LONGCTX_HD float SwiGluExp(float x) {
#if defined(__CUDA_ARCH__)
  return expf(x);
#else
  // Clamp so 2^k stays a normal float; NaN passes through (both tests false).
  x = detail::SelectBits(x < -87.0f, -87.0f, x);
  x = detail::SelectBits(x > 88.0f, 88.0f, x);
  // k = round(x / ln2) by the 1.5*2^23 trick (valid for |k| < 2^22).
  const float k = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  float r = x - k * 0.693359375f;  // ln2 split in two for an exact reduction
  r = r - k * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int32_t e = (static_cast<int32_t>(k) + 127) << 23;
  float scale;
  std::memcpy(&scale, &e, 4);
  return p * scale;
#endif
}

template <class T>
LONGCTX_HD T Sigmoid(T x) {
  return T(1) / (T(1) + SwiGluExp(-x));
}

template <class T>
LONGCTX_HD T Silu(T g) {
  return g * Sigmoid(g);
}

// silu'(g) from g and sigmoid(g).
template <class T>
LONGCTX_HD T SiluGradFromSigmoid(T g, T sig) {
  return sig * (T(1) + g * (T(1) - sig));
}

template <class T>
LONGCTX_HD T SiluGrad(T g) {
  return SiluGradFromSigmoid(g, Sigmoid(g));
}

template <class T>
LONGCTX_HD T SwiGluForward(T g, T u) {
  return g * Sigmoid(g) * u;
}

// Writes dg = dh * u * silu'(g) and du = dh * silu(g) (one exp per element).
template <class T>
LONGCTX_HD void SwiGluBackward(T g, T u, T dh, T& dg, T& du) {
  const T sig = Sigmoid(g);
  dg = dh * u * SiluGradFromSigmoid(g, sig);
  du = dh * g * sig;
}

}  // namespace longctx::math

#endif  // LONGCTX_KERNELS_MATH_SWIGLU_H_
