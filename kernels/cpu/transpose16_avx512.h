// Why: the AVX-512 files transpose 16 x 16 blocks of 32-bit elements in
// registers — the AMX packers and stores of attention_tiles_avx512bf16.cc and
// the fp32 tables' transposed operand loads of attention_tiles_avx512.cc — so
// the transpose is written once, here. Include it after the including file's
// `#pragma GCC target` that enables AVX-512: the function is compiled for that
// target in each file (internal linkage, so no copy is shared with code built
// for another).
#ifndef LONGCTX_KERNELS_CPU_TRANSPOSE16_AVX512_H_
#define LONGCTX_KERNELS_CPU_TRANSPOSE16_AVX512_H_

#include <immintrin.h>

namespace longctx::cpu {
namespace {  // NOLINT(build/namespaces): see the comment at the top

// In-register transpose of a 16 x 16 matrix of 32-bit elements (r[i] = row
// i on entry, column i on exit): 32-bit, 64-bit and two 128-bit-lane stages.
inline void Transpose16x16(__m512i r[16]) {
  __m512i t[16], u[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
  // u[4g + c], 128-bit lane L: rows 4g..4g+3 at column 4L + c.
  for (int g = 0; g < 4; ++g) {
    u[4 * g + 0] = _mm512_unpacklo_epi64(t[4 * g], t[4 * g + 2]);
    u[4 * g + 1] = _mm512_unpackhi_epi64(t[4 * g], t[4 * g + 2]);
    u[4 * g + 2] = _mm512_unpacklo_epi64(t[4 * g + 1], t[4 * g + 3]);
    u[4 * g + 3] = _mm512_unpackhi_epi64(t[4 * g + 1], t[4 * g + 3]);
  }
  // Column 4L + c = lane L of u[c], u[4 + c], u[8 + c], u[12 + c].
  for (int c = 0; c < 4; ++c) {
    const __m512i v0 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0x88), w0 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0xDD);
    const __m512i v1 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0x88);
    const __m512i w1 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0xDD);
    r[c] = _mm512_shuffle_i32x4(v0, v1, 0x88);
    r[8 + c] = _mm512_shuffle_i32x4(v0, v1, 0xDD);
    r[4 + c] = _mm512_shuffle_i32x4(w0, w1, 0x88);
    r[12 + c] = _mm512_shuffle_i32x4(w0, w1, 0xDD);
  }
}

}  // namespace
}  // namespace longctx::cpu

#endif  // LONGCTX_KERNELS_CPU_TRANSPOSE16_AVX512_H_
