// Why: the rotary-embedding math written once for every backend: the
// frequency of each rotated pair, the angle of a position, and the 2x2
// rotation itself (rotate-half pairing: dim j with dim j + rotary_dim/2).
// Frequencies and angles are computed in double because positions of a long
// context (10^5..10^6) times a frequency near 1 lose every digit of the
// fractional part in float; only the final cos/sin are cast to the tensor type.
#ifndef LONGCTX_KERNELS_MATH_ROPE_H_
#define LONGCTX_KERNELS_MATH_ROPE_H_

#include <math.h>

#include <cstdint>

#include "kernels/math/hd.h"

namespace longctx::math {

// theta^(-2j/rotary_dim), for pair j in [0, rotary_dim/2).
LONGCTX_HD double RopeInvFreq(int j, int rotary_dim, double theta) {
  return pow(theta, -2.0 * static_cast<double>(j) / static_cast<double>(rotary_dim));
}

// angle(t, j) = direction * position_scale * pos * inv_freq(j).
LONGCTX_HD double RopeAngle(int64_t pos, double inv_freq, double position_scale, int direction) {
  return static_cast<double>(direction) * position_scale * static_cast<double>(pos) * inv_freq;
}

// (x1, x2) <- (x1 cos - x2 sin, x2 cos + x1 sin): the pair (x[j], x[j + half])
// rotated by the angle whose cos/sin are given. Rotation by -angle undoes it,
// which is why the backward is the same op with direction = -1.
template <class T>
LONGCTX_HD void RopeRotate(T& x1, T& x2, T c, T s) {
  const T a = x1, b = x2;
  x1 = a * c - b * s;
  x2 = b * c + a * s;
}

// cos/sin of (angle + step) from those of angle and step (angle addition), so a
// run of consecutive positions needs one exact sincos per pair, not per token.
LONGCTX_HD void RopeAdvance(double& c, double& s, double step_c, double step_s) {
  const double nc = c * step_c - s * step_s;
  const double ns = s * step_c + c * step_s;
  c = nc;
  s = ns;
}

}  // namespace longctx::math

#endif  // LONGCTX_KERNELS_MATH_ROPE_H_
