// Why: two files build bf16 k-pairs in registers — the packers of
// attention_tiles_avx512bf16.cc and the fused backward pass of
// attention_tiles_avx512.cc (amx::BackwardPairs) — and must round and
// interleave exactly alike, so the conversion is written once, here.
// Include it after the including file's `#pragma GCC target` that enables
// AVX-512 and AVX512-BF16: the function is compiled for that target in each
// file (internal linkage, so no copy is shared with code built for another).
#ifndef LONGCTX_KERNELS_CPU_BF16_PAIRS_AVX512_H_
#define LONGCTX_KERNELS_CPU_BF16_PAIRS_AVX512_H_

#include <immintrin.h>

namespace longctx::cpu {
namespace {  // NOLINT(build/namespaces): see the comment at the top

// 16 lanes of pairs (lo[x], hi[x]) as bf16 (round to nearest even): lo in the
// low half of each 32-bit lane. One two-source conversion (bf16 lanes 0-15
// from lo, 16-31 from hi) and one word permute that interleaves them.
inline __m512i PairLanes(__m512 lo, __m512 hi) {
  const __m512i interleave = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7,
                                              22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  return _mm512_permutexvar_epi16(interleave, (__m512i)(_mm512_cvtne2ps_pbh(hi, lo)));
}

}  // namespace
}  // namespace longctx::cpu

#endif  // LONGCTX_KERNELS_CPU_BF16_PAIRS_AVX512_H_
