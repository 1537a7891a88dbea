// Why: `c ? a : b` on floats becomes a branch under GCC's default
// -ftrapping-math (the comparison "may trap"), which stops vectorization of the
// loops that call it. Selecting on the bits if-converts cleanly. Host only:
// device code uses the plain ternary.
#ifndef LONGCTX_KERNELS_MATH_SELECT_BITS_H_
#define LONGCTX_KERNELS_MATH_SELECT_BITS_H_

#if !defined(__CUDA_ARCH__)
#include <cstdint>
#include <cstring>

namespace longctx::math::detail {

inline float SelectBits(bool c, float a, float b) {
  uint32_t ia, ib;
  std::memcpy(&ia, &a, 4);
  std::memcpy(&ib, &b, 4);
  const uint32_t m = 0u - static_cast<uint32_t>(c);
  const uint32_t r = (ia & m) | (ib & ~m);
  float f;
  std::memcpy(&f, &r, 4);
  return f;
}

}  // namespace longctx::math::detail
#endif

#endif  // LONGCTX_KERNELS_MATH_SELECT_BITS_H_
