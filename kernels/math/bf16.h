// Why: the bf16 matmul precision (MatmulPrecision::kBF16) is defined by one
// rounding: float -> bfloat16 round-to-nearest-even, NaN kept a quiet NaN with
// its sign, infinities kept, overflow past the largest bf16 rounding to inf as
// IEEE says. Every bf16 GEMM path (operands rounded in float for sgemm, packed
// bf16 for oneDNN) and the tests' naive reference use these functions, so "bf16
// operands" means bit-for-bit the same numbers everywhere. Branch-free on the
// bits so GCC vectorizes the conversion loops.
#ifndef LONGCTX_KERNELS_MATH_BF16_H_
#define LONGCTX_KERNELS_MATH_BF16_H_

#include <cstdint>
#include <cstring>

#include "kernels/math/hd.h"

namespace longctx::math {

// The 16 high bits of the bf16 nearest to f (ties to even).
LONGCTX_HD uint16_t F32ToBf16Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const uint32_t quiet_nan = (u >> 16) | 0x0040u;
  const bool nan = (u & 0x7fffffffu) > 0x7f800000u;
  return static_cast<uint16_t>(nan ? quiet_nan : rounded);
}

LONGCTX_HD float Bf16BitsToF32(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// f rounded to the nearest bf16, as a float (exactly representable in bf16).
LONGCTX_HD float RoundToBf16(float f) { return Bf16BitsToF32(F32ToBf16Bits(f)); }

}  // namespace longctx::math

#endif  // LONGCTX_KERNELS_MATH_BF16_H_
