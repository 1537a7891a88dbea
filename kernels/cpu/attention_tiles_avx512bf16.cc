// Why: where the CPU has bf16 dot products (AVX512-BF16), attention at
// precision bf16 multiplies bf16 tiles — Q, K, V, dO and the probabilities P
// and dS rounded to bf16 (round to nearest even) — with fp32 accumulation:
// vdpbf16ps does two multiply-adds per fp32 lane per instruction, twice the
// fp32 FMA rate. The softmax statistics (max, sum, lse, D) and every
// accumulator across tiles (O, dQ, dK, dV) stay fp32: only the tile products'
// operands are bf16. This table is the AVX-512 one with the product replaced.
// The product packs its operands first (vdpbf16ps wants each 32-bit lane to
// hold two consecutive-k bf16 values): B as [k/2][n] pairs, A as pairs along k
// in whichever orientation it is stored; the micro-kernel is the fp32 one's
// 6 x 64 block. Packing is per product (the attention driver hands fp32
// tiles), which costs about a fifth of a 64^3 product per operand.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/cpu/attention_tiles.h"

#if defined(__x86_64__)
// GCC 12's false "may be used uninitialized" in the intrinsics (see the AVX-512 file).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,avx512bf16,fma,avx2")

namespace longctx::cpu {
namespace {

constexpr int kRows = 6;
constexpr int kVectors = 4;
constexpr int kMaxDim = 512;  // largest m, n, k the packing buffers take (tiles are <= 64 x 128)

inline __mmask16 FirstLanes(int count) {
  return count >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << count) - 1u);
}

// 16 lanes of pairs (lo[x], hi[x]) as bf16: lo in the low half of each 32-bit lane.
inline __m512i PairLanes(__m512 lo, __m512 hi) {
  const __m512i l = _mm512_cvtepu16_epi32((__m256i)(_mm512_cvtneps_pbh(lo)));
  const __m512i h = _mm512_cvtepu16_epi32((__m256i)(_mm512_cvtneps_pbh(hi)));
  return _mm512_or_si512(l, _mm512_slli_epi32(h, 16));
}

// rows 2p and 2p+1 of a row-major [k][n] operand (row stride ld) -> out[p][x],
// x < n (the second row zero when 2p+1 = k).
void PackPairsOfRows(const float* src, ptrdiff_t ld, int k, int n, uint32_t* out, int out_ld) {
  const int kp = (k + 1) / 2;
  for (int p = 0; p < kp; ++p) {
    const float* r0 = src + (2 * p) * ld;
    const float* r1 = r0 + ld;
    const bool has1 = 2 * p + 1 < k;
    for (int x = 0; x < n; x += 16) {
      const __mmask16 m = FirstLanes(n - x);
      const __m512 lo = _mm512_maskz_loadu_ps(m, r0 + x);
      const __m512 hi = has1 ? _mm512_maskz_loadu_ps(m, r1 + x) : _mm512_setzero_ps();
      _mm512_mask_storeu_epi32(out + p * out_ld + x, m, PairLanes(lo, hi));
    }
  }
}

// Row-major A [m][k] (k contiguous, row stride ld) -> out[i][p].
void PackPairsAlongRows(const float* src, ptrdiff_t ld, int m, int k, uint32_t* out, int out_ld) {
  for (int i = 0; i < m; ++i) {
    const float* row = src + i * ld;
    for (int x = 0; x < k; x += 32) {
      const __m512 lo = _mm512_maskz_loadu_ps(FirstLanes(k - x), row + x);
      const __m512 hi = _mm512_maskz_loadu_ps(FirstLanes(k - x - 16 > 0 ? k - x - 16 : 0), row + x + 16);
      // cvtne2ps_pbh(hi, lo): bf16 lanes 0..15 from lo, 16..31 from hi, i.e.
      // consecutive k in consecutive 16-bit halves: 16 pairs.
      const __m512i pairs = (__m512i)(_mm512_cvtne2ps_pbh(hi, lo));
      const int np = std::min(16, (k - x + 1) / 2);
      _mm512_mask_storeu_epi32(out + i * out_ld + x / 2, FirstLanes(np), pairs);
    }
  }
}

template <int R, int NV>
inline void Strip(int kp, const uint32_t* __restrict a, ptrdiff_t a_rs, ptrdiff_t a_cs, const uint32_t* __restrict b,
                  ptrdiff_t ldb, float* __restrict c, ptrdiff_t ldc, bool accumulate, __mmask16 tail) {
  __m512 acc[R][NV];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v)
      acc[r][v] = accumulate ? _mm512_maskz_loadu_ps(v == NV - 1 ? tail : 0xFFFF, c + r * ldc + 16 * v)
                             : _mm512_setzero_ps();
  for (int p = 0; p < kp; ++p) {
    __m512bh bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v)
      bv[v] = (__m512bh)(_mm512_maskz_loadu_epi32(v == NV - 1 ? tail : 0xFFFF, b + p * ldb + 16 * v));
    const uint32_t* ap = a + p * a_cs;
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512bh av = (__m512bh)(_mm512_set1_epi32(static_cast<int>(ap[r * a_rs])));
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], av, bv[v]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v)
      _mm512_mask_storeu_ps(c + r * ldc + 16 * v, v == NV - 1 ? tail : 0xFFFF, acc[r][v]);
}

template <int R>
inline void Rows(int n, int kp, const uint32_t* a, ptrdiff_t a_rs, ptrdiff_t a_cs, const uint32_t* b, ptrdiff_t ldb,
                 float* c, ptrdiff_t ldc, bool accumulate) {
  int n0 = 0;
  for (; n0 + 16 * kVectors <= n; n0 += 16 * kVectors)
    Strip<R, kVectors>(kp, a, a_rs, a_cs, b + n0, ldb, c + n0, ldc, accumulate, 0xFFFF);
  const int rest = n - n0;
  if (rest == 0) return;
  const __mmask16 tail = FirstLanes(rest - 16 * ((rest - 1) / 16));
  switch ((rest + 15) / 16) {
    case 1: Strip<R, 1>(kp, a, a_rs, a_cs, b + n0, ldb, c + n0, ldc, accumulate, tail); break;
    case 2: Strip<R, 2>(kp, a, a_rs, a_cs, b + n0, ldb, c + n0, ldc, accumulate, tail); break;
    case 3: Strip<R, 3>(kp, a, a_rs, a_cs, b + n0, ldb, c + n0, ldc, accumulate, tail); break;
    default: Strip<R, 4>(kp, a, a_rs, a_cs, b + n0, ldb, c + n0, ldc, accumulate, tail); break;
  }
}

struct PackBuffers {
  std::vector<uint32_t> a, b;
  PackBuffers() : a(kMaxDim * kMaxDim / 2 + 64), b(kMaxDim * kMaxDim / 2 + 64) {}
};

void Gemm(int m, int n, int k, const float* a, ptrdiff_t a_rs, ptrdiff_t a_cs, const float* b, ptrdiff_t ldb,
          float* c, ptrdiff_t ldc, bool accumulate) {
  if (k == 0) {
    if (!accumulate)
      for (int i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, 0.f);
    return;
  }
  thread_local PackBuffers buf;
  const int kp = (k + 1) / 2;
  if (m > kMaxDim || n > kMaxDim || k > kMaxDim) {  // not a tile: pack and multiply in slabs of k
    for (int k0 = 0; k0 < k; k0 += kMaxDim) {
      const int kk = std::min(kMaxDim, k - k0);
      for (int m0 = 0; m0 < m; m0 += kMaxDim)
        for (int n0 = 0; n0 < n; n0 += kMaxDim)
          Gemm(std::min(kMaxDim, m - m0), std::min(kMaxDim, n - n0), kk, a + m0 * a_rs + k0 * a_cs, a_rs, a_cs,
               b + k0 * ldb + n0, ldb, c + m0 * ldc + n0, ldc, accumulate || k0 > 0);
    }
    return;
  }
  PackPairsOfRows(b, ldb, k, n, buf.b.data(), n);
  ptrdiff_t ap_rs, ap_cs;
  if (a_cs == 1) {  // rows of A are contiguous along k: pairs [i][p]
    PackPairsAlongRows(a, a_rs, m, k, buf.a.data(), kp);
    ap_rs = kp;
    ap_cs = 1;
  } else if (a_rs == 1) {  // A stored transposed ([k][m], m contiguous): pairs [p][i]
    PackPairsOfRows(a, a_cs, k, m, buf.a.data(), m);
    ap_rs = 1;
    ap_cs = m;
  } else {  // general strides (not used by the attention loops): element by element
    for (int i = 0; i < m; ++i)
      for (int p = 0; p < kp; ++p) {
        const float lo = a[i * a_rs + (2 * p) * a_cs];
        const float hi = 2 * p + 1 < k ? a[i * a_rs + (2 * p + 1) * a_cs] : 0.f;
        const __m512i v = PairLanes(_mm512_set1_ps(lo), _mm512_set1_ps(hi));
        buf.a[i * kp + p] = static_cast<uint32_t>(_mm_cvtsi128_si32(_mm512_castsi512_si128(v)));
      }
    ap_rs = kp;
    ap_cs = 1;
  }
  const uint32_t* ap = buf.a.data();
  int i = 0;
  for (; i + kRows <= m; i += kRows) Rows<kRows>(n, kp, ap + i * ap_rs, ap_rs, ap_cs, buf.b.data(), n, c + i * ldc, ldc, accumulate);
  const uint32_t* ai = ap + i * ap_rs;
  float* ci = c + i * ldc;
  switch (m - i) {
    case 1: Rows<1>(n, kp, ai, ap_rs, ap_cs, buf.b.data(), n, ci, ldc, accumulate); break;
    case 2: Rows<2>(n, kp, ai, ap_rs, ap_cs, buf.b.data(), n, ci, ldc, accumulate); break;
    case 3: Rows<3>(n, kp, ai, ap_rs, ap_cs, buf.b.data(), n, ci, ldc, accumulate); break;
    case 4: Rows<4>(n, kp, ai, ap_rs, ap_cs, buf.b.data(), n, ci, ldc, accumulate); break;
    case 5: Rows<5>(n, kp, ai, ap_rs, ap_cs, buf.b.data(), n, ci, ldc, accumulate); break;
    default: break;
  }
}

}  // namespace

const AttentionTileKernels<float>* AttentionTilesAvx512Bf16() {
  const AttentionTileKernels<float>* f32 = AttentionTilesAvx512();
  if (f32 == nullptr) return nullptr;
  static const AttentionTileKernels<float> tiles = {"avx512-bf16", Gemm, f32->tile_max, f32->tile_exp_sum,
                                                    f32->tile_backward};
  return &tiles;
}

}  // namespace longctx::cpu

#pragma GCC pop_options

#else  // not x86-64

namespace longctx::cpu {
const AttentionTileKernels<float>* AttentionTilesAvx512Bf16() { return nullptr; }
}  // namespace longctx::cpu

#endif
