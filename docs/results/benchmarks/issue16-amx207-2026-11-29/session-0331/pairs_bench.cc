// Why: the backward pass's stores of two query rows x 32 keys: P and dS as pairs of rows
// (B operands), dS as rows of key pairs (A operand). Current: 6 vcvtne2ps2bf16 + 4
// vpermw; candidate: dS rows converted once (2 cvt) and both pair layouts by
// vpermt2w from the rows (P: 2 cvt + 2 vpermt2w; dS pairs: 2 vpermt2w): 4 cvt + 4 perm.
#include <immintrin.h>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include "rr.h"  // the round-robin harness below, copied from amx_tile_costs.cc's RoundRobin
static inline __m512i PairLanes(__m512 lo, __m512 hi) {
  const __m512i il = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7,
                                      22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  return _mm512_permutexvar_epi16(il, (__m512i)(_mm512_cvtne2ps_pbh(hi, lo)));
}
// words (a[0], b[0], a[1], b[1], ... a[15], b[15]) and (a[16], b[16], ... a[31], b[31])
static inline __m512i InterleaveLo(__m512i a, __m512i b) {
  const __m512i il = _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40, 8, 39, 7,
                                      38, 6, 37, 5, 36, 4, 35, 3, 34, 2, 33, 1, 32, 0);
  return _mm512_permutex2var_epi16(a, il, b);
}
static inline __m512i InterleaveHi(__m512i a, __m512i b) {
  const __m512i il = _mm512_set_epi16(63, 31, 62, 30, 61, 29, 60, 28, 59, 27, 58, 26, 57, 25, 56, 24, 55, 23,
                                      54, 22, 53, 21, 52, 20, 51, 19, 50, 18, 49, 17, 48, 16);
  return _mm512_permutex2var_epi16(a, il, b);
}
alignas(64) float P[64 * 128], D[64 * 128];
alignas(64) uint32_t pp[32 * 128], dpp[32 * 128], rows[64 * 64], pp2[32 * 128], dpp2[32 * 128], rows2[64 * 64];
template <bool kNew>
void Pass(uint32_t* ppo, uint32_t* dppo, uint32_t* rowso) {
  for (int i = 0; i < 64; i += 2) {
    const float* p0 = P + i * 128; const float* p1 = p0 + 128;
    const float* d0 = D + i * 128; const float* d1 = d0 + 128;
    uint32_t* o_pp = ppo + (i / 2) * 128; uint32_t* o_dpp = dppo + (i / 2) * 128;
    uint32_t* r0 = rowso + i * 64; uint32_t* r1 = r0 + 64;
    for (int x = 0; x < 128; x += 32) {
      const __m512 p0a = _mm512_load_ps(p0 + x), p0b = _mm512_load_ps(p0 + x + 16);
      const __m512 p1a = _mm512_load_ps(p1 + x), p1b = _mm512_load_ps(p1 + x + 16);
      const __m512 d0a = _mm512_load_ps(d0 + x), d0b = _mm512_load_ps(d0 + x + 16);
      const __m512 d1a = _mm512_load_ps(d1 + x), d1b = _mm512_load_ps(d1 + x + 16);
      if constexpr (!kNew) {
        _mm512_storeu_si512(o_pp + x, PairLanes(p0a, p1a));
        _mm512_storeu_si512(o_pp + x + 16, PairLanes(p0b, p1b));
        _mm512_storeu_si512(o_dpp + x, PairLanes(d0a, d1a));
        _mm512_storeu_si512(o_dpp + x + 16, PairLanes(d0b, d1b));
        _mm512_storeu_si512(r0 + x / 2, (__m512i)(_mm512_cvtne2ps_pbh(d0b, d0a)));
        _mm512_storeu_si512(r1 + x / 2, (__m512i)(_mm512_cvtne2ps_pbh(d1b, d1a)));
      } else {
        const __m512i pr0 = (__m512i)_mm512_cvtne2ps_pbh(p0b, p0a), pr1 = (__m512i)_mm512_cvtne2ps_pbh(p1b, p1a);
        const __m512i dr0 = (__m512i)_mm512_cvtne2ps_pbh(d0b, d0a), dr1 = (__m512i)_mm512_cvtne2ps_pbh(d1b, d1a);
        _mm512_storeu_si512(o_pp + x, InterleaveLo(pr0, pr1));
        _mm512_storeu_si512(o_pp + x + 16, InterleaveHi(pr0, pr1));
        _mm512_storeu_si512(o_dpp + x, InterleaveLo(dr0, dr1));
        _mm512_storeu_si512(o_dpp + x + 16, InterleaveHi(dr0, dr1));
        _mm512_storeu_si512(r0 + x / 2, dr0);
        _mm512_storeu_si512(r1 + x / 2, dr1);
      }
    }
  }
}
int main() {
  std::mt19937 rng(1); std::normal_distribution<float> n(0.f, 1.f);
  for (auto& v : P) v = n(rng); for (auto& v : D) v = n(rng);
  Pass<false>(pp, dpp, rows); Pass<true>(pp2, dpp2, rows2);
  printf("same bits: %d %d %d\n", !memcmp(pp, pp2, sizeof pp), !memcmp(dpp, dpp2, sizeof dpp), !memcmp(rows, rows2, sizeof rows));
  RR rr;
  rr.add("current: 6 cvt + 4 vpermw (per 64x128 tile)", []{ Pass<false>(pp, dpp, rows); }, 1);
  rr.add("candidate: 4 cvt + 4 vpermt2w", []{ Pass<true>(pp2, dpp2, rows2); }, 1);
  rr.run(8);
}
