// Throwaway: the bf16 backward softmax pass's per-element work (BackwardLanes'
// full-visible branch + the pair conversions and stores of amx::BackwardPairs)
// on a 64 x 128 tile in L1, with the old exp (round, subtract) and the new
// (floor inside vscalefps), alternating; min over many repeats.
#include <immintrin.h>
#include <chrono>
#include <cstdio>
#include <cstdint>
#include <vector>
#include <algorithm>
static inline __m512i PairLanes(__m512 lo, __m512 hi) {
  const __m512i il = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7,
                                      22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  return _mm512_permutexvar_epi16(il, (__m512i)(_mm512_cvtne2ps_pbh(hi, lo)));
}
static inline __m512 ExpOld(__m512 t) {
  const __mmask16 tiny = _mm512_cmp_ps_mask(t, _mm512_set1_ps(-126.f), _CMP_LT_OQ);
  const __m512 f = _mm512_reduce_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 n = _mm512_sub_ps(t, f);
  __m512 y = _mm512_set1_ps(9.582855739e-03f);
  y = _mm512_fmadd_ps(y, f, _mm512_set1_ps(5.590646714e-02f));
  y = _mm512_fmadd_ps(y, f, _mm512_set1_ps(2.402409911e-01f));
  y = _mm512_fmadd_ps(y, f, _mm512_set1_ps(6.931241751e-01f));
  y = _mm512_fmadd_ps(y, f, _mm512_set1_ps(1.f));
  return _mm512_maskz_scalef_ps(static_cast<__mmask16>(~tiny), y, n);
}
static inline __m512 ExpNew(__m512 u) {
  const __mmask16 tiny = _mm512_cmp_ps_mask(u, _mm512_set1_ps(-125.5f), _CMP_LT_OQ);
  const __m512 f = _mm512_reduce_ps(u, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  __m512 y = _mm512_set1_ps(9.5828557387e-03f);
  y = _mm512_fmadd_ps(y, f, _mm512_set1_ps(3.6740753800e-02f));
  y = _mm512_fmadd_ps(y, f, _mm512_set1_ps(1.7075558007e-01f));
  y = _mm512_fmadd_ps(y, f, _mm512_set1_ps(4.9002155662e-01f));
  y = _mm512_fmadd_ps(y, f, _mm512_set1_ps(7.0710879564e-01f));
  return _mm512_maskz_scalef_ps(static_cast<__mmask16>(~tiny), y, u);
}
static inline __m512 ExpNew2(__m512 u) {
  const __m512 f = _mm512_reduce_ps(u, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  __m512 y = _mm512_set1_ps(9.5828557387e-03f);
  y = _mm512_fmadd_ps(y, f, _mm512_set1_ps(3.6740753800e-02f));
  y = _mm512_fmadd_ps(y, f, _mm512_set1_ps(1.7075558007e-01f));
  y = _mm512_fmadd_ps(y, f, _mm512_set1_ps(4.9002155662e-01f));
  y = _mm512_fmadd_ps(y, f, _mm512_set1_ps(7.0710879564e-01f));
  return _mm512_scalef_ps(y, u);
}
template <int kNew>
__attribute__((noinline)) void Pass(const float* s, const float* dp, const float* lse, const float* drow,
                                    uint32_t* pp, uint32_t* dpp, uint32_t* rows) {
  constexpr int R = 64, C = 128;
  for (int i = 0; i < R; i += 2) {
    __m512 bias[2], dv[2];
    for (int h = 0; h < 2; ++h) {
      const __m512 l = _mm512_set1_ps(lse[i + h]);
      bias[h] = kNew ? _mm512_fmadd_ps(l, _mm512_set1_ps(-1.44269504088896341f), _mm512_set1_ps(0.5f))
                     : _mm512_set1_ps(-1.44269504088896341f * lse[i + h]);
      dv[h] = _mm512_set1_ps(drow[i + h]);
    }
    for (int x = 0; x < C; x += 32) {
      __m512 p[2][2], d[2][2];
      for (int h = 0; h < 2; ++h)
        for (int v = 0; v < 2; ++v) {
          const float* sr = s + (i + h) * C + x + 16 * v;
          const float* dr = dp + (i + h) * C + x + 16 * v;
          const __m512 t = _mm512_fmadd_ps(_mm512_loadu_ps(sr), _mm512_set1_ps(1.44269504088896341f), bias[h]);
          p[h][v] = kNew == 2 ? ExpNew2(t) : kNew ? ExpNew(t) : ExpOld(t);
          d[h][v] = _mm512_mul_ps(p[h][v], _mm512_sub_ps(_mm512_loadu_ps(dr), dv[h]));
        }
      uint32_t* o = pp + (i / 2) * C + x;
      uint32_t* od = dpp + (i / 2) * C + x;
      _mm512_storeu_si512(o, PairLanes(p[0][0], p[1][0]));
      _mm512_storeu_si512(o + 16, PairLanes(p[0][1], p[1][1]));
      _mm512_storeu_si512(od, PairLanes(d[0][0], d[1][0]));
      _mm512_storeu_si512(od + 16, PairLanes(d[0][1], d[1][1]));
      _mm512_storeu_si512(rows + i * 64 + x / 2, (__m512i)_mm512_cvtne2ps_pbh(d[0][1], d[0][0]));
      _mm512_storeu_si512(rows + (i + 1) * 64 + x / 2, (__m512i)_mm512_cvtne2ps_pbh(d[1][1], d[1][0]));
    }
  }
}
int main() {
  std::vector<float> s(64 * 128), dp(64 * 128), lse(64), drow(64);
  uint32_t x = 1;
  auto rnd = [&] { x = x * 1664525u + 1013904223u; return (x >> 8) * (1.f / 16777216.f); };
  for (auto& v : s) v = 4 * rnd() - 2;
  for (auto& v : dp) v = rnd() - 0.5f;
  for (auto& v : lse) v = 3 + rnd();
  for (auto& v : drow) v = 0.1f * rnd();
  alignas(64) static uint32_t pp[32 * 128], dpp[32 * 128], rows[64 * 64];
  double best[3] = {1e30, 1e30, 1e30};
  constexpr int kIters = 2000;
  for (int round = 0; round < 400; ++round)
    for (int which = 0; which < 3; ++which) {
      const auto t0 = std::chrono::steady_clock::now();
      for (int it = 0; it < kIters; ++it) {
        if (which == 2) Pass<2>(s.data(), dp.data(), lse.data(), drow.data(), pp, dpp, rows);
        else if (which == 1) Pass<1>(s.data(), dp.data(), lse.data(), drow.data(), pp, dpp, rows);
        else Pass<0>(s.data(), dp.data(), lse.data(), drow.data(), pp, dpp, rows);
        asm volatile("" ::: "memory");
      }
      const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / kIters;
      best[which] = std::min(best[which], ns);
    }
  std::printf("64x128 backward pass, ns per tile (min of 400 x %d): exp 8 instr %.1f, 7 (floor in vscalefps) %.1f, 6 (no underflow mask) %.1f; ratios %.3f %.3f\n", kIters,
              best[0], best[1], best[2], best[0] / best[1], best[0] / best[2]);
}
