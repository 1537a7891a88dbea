// Why: the attention tile kernels (attention_tiles.h) on AVX-512, the path of
// this project's Xeon hosts. The products are a register-blocked micro-kernel:
// 6 rows of C x 4 vectors of 16 floats (24 of the 32 zmm accumulators; per kk
// 4 loads of B and 6 broadcasts of A feed 24 FMAs, so the two FMA ports, not
// the loads, are the limit), column tails with masked loads and stores, row
// tails with fewer rows. The softmax passes run on 16 lanes with masks for the
// visible range of each row. The exp is attention_tiles_scalar.cc's, lane by
// lane (vscalefps applies the integer exponent, exact like ldexp); a second
// table, for the bf16 products, runs the same passes with a cheaper exp of
// bf16 accuracy (Exp2Bf16).
// Compiled for AVX-512 with a target pragma (after every #include, so no
// inline function of a header is compiled for AVX-512 here and shared with
// code that runs on an AVX2 machine); called only after a run-time CPU check.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "kernels/cpu/amx_bf16.h"
#include "kernels/cpu/attention_tiles.h"

#if defined(__x86_64__)
// GCC 12 warns that the "undefined" source vector inside _mm512_min_ps and
// friends may be used uninitialized (it is a don't-care operand): silenced.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,fma,avx2")
#include "kernels/cpu/attention_tiles_strips.h"
#include "kernels/cpu/transpose16_avx512.h"

namespace longctx::cpu {
namespace {

inline __m512 Exp16(__m512 x) {
  const __mmask16 tiny = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.33654f), _CMP_LT_OQ);
  x = _mm512_min_ps(_mm512_set1_ps(88.f), x);  // min(88, NaN) = NaN (second operand)
  const __m512 fx = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(fx, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(fx, _mm512_set1_ps(-2.12194440e-4f), r);
  const __m512 z = _mm512_mul_ps(r, r);
  __m512 y = _mm512_set1_ps(1.9875691500e-4f);
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.3981999507e-3f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(8.3334519073e-3f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(4.1665795894e-2f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.6666665459e-1f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(5.0000001201e-1f));
  y = _mm512_fmadd_ps(y, z, r);
  y = _mm512_add_ps(y, _mm512_set1_ps(1.f));
  return _mm512_maskz_mov_ps(static_cast<__mmask16>(~tiny), _mm512_scalef_ps(y, fx));
}

// exp for the softmax passes of attention with bf16 tile products, where P
// and dS are rounded to bf16 (relative step 2^-8) before they meet V, dO, K or
// Q, given its argument in base 2 and biased by one half, u = x log2 e + 1/2
// (ShiftedExp forms it in one FMA): 2^(u - 1/2) as 2^floor(u) * p(f), f = u -
// floor(u) in [0, 1) (vreduceps, exact), p a degree-4 fit of 2^(f - 1/2)
// (relative error 2.9e-6 on the interval: the earlier fit of 2^g on [-1/2,
// 1/2] re-centred, so the same accuracy; with the rounding of u at most ~7e-6
// over x in [-87, 10], ~600 times below the bf16 step), and vscalefps, which
// applies 2^floor(u) itself: no integer part to subtract. Below the normal
// range (u < -125.5, x < -87.34) the result is an fp32 subnormal or 0, as
// vscalefps underflows, with no compare and mask to force 0 there: P is
// rounded to bf16 by vcvtne2ps2bf16, which flushes subnormal inputs to 0
// (checked in online_softmax_test), so P's bf16 operand is 0 there as with a
// forced 0, and a row's sum l, which reaches ~1 within each fold (its maximum
// contributes exp(0)), is not moved by such terms at fp32 precision; dS = P
// (dP - D) is the fp32 product of that subnormal (where it was 0: below 1e-37
// unless |dP - D| is huge, far below every other term's rounding). The
// softmax passes are bound by their vector instructions
// (docs/history/benchmarks-2026.md, "Attention at GEMM speed"): six here (vreduceps, four FMAs, vscalefps; seven for exp(s - m)
// with ShiftedExp's FMA) against the earlier form's eight (also a vsubps for
// the integer part and a vcmpps for the underflow) and Exp16's fifteen.
// Exactly 1 at u = 1/2 (p(1/2) rounds to 1 exactly); 0 for -inf; +inf for
// +inf and above ~88.7; NaN stays NaN. Only the bf16 tables use it: fp32
// attention keeps Exp16 (3e-7).
inline __m512 Exp2Bf16(__m512 u) {
  const __m512 f = _mm512_reduce_ps(u, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);  // 0 for +-inf
  __m512 y = _mm512_set1_ps(9.5828557387e-03f);
  y = _mm512_fmadd_ps(y, f, _mm512_set1_ps(3.6740753800e-02f));
  y = _mm512_fmadd_ps(y, f, _mm512_set1_ps(1.7075558007e-01f));
  y = _mm512_fmadd_ps(y, f, _mm512_set1_ps(4.9002155662e-01f));
  y = _mm512_fmadd_ps(y, f, _mm512_set1_ps(7.0710879564e-01f));
  return _mm512_scalef_ps(y, u);
}

// The per-row (or per-lane) term of ShiftedExp's exponent: 1/2 - m log2(e)
// for the bf16 tables (one FMA, one rounding), unused by the fp32 tables.
template <bool kBf16Exp>
inline __m512 ExpBias(__m512 m) {
  if constexpr (kBf16Exp) return _mm512_fmadd_ps(m, _mm512_set1_ps(-1.44269504088896341f), _mm512_set1_ps(0.5f));
  return m;
}

// exp(s - m) for the softmax passes, bias = ExpBias(m) per lane (the callers'
// bmv, blv). The bf16
// tables form the biased exponent as s log2(e) + (1/2 - m log2(e)) in one FMA
// (one instruction less than the subtraction and the product; the rounding
// of the bias moves P by < 1e-6 relative, far below the bf16 step); the fp32
// tables keep exp(s - m) exactly as before.
template <bool kBf16Exp>
inline __m512 ShiftedExp(__m512 s, __m512 m, __m512 bias) {
  if constexpr (kBf16Exp) return Exp2Bf16(_mm512_fmadd_ps(s, _mm512_set1_ps(1.44269504088896341f), bias));
  return Exp16(_mm512_sub_ps(s, m));
}

// Lanes x0 + [0, 16) that lie in [lo, hi).
inline __mmask16 RangeMask(int lo, int hi, int x0) {
  const int a = lo - x0 < 0 ? 0 : (lo - x0 > 16 ? 16 : lo - x0);
  const int b = hi - x0 < 0 ? 0 : (hi - x0 > 16 ? 16 : hi - x0);
  if (b <= a) return 0;
  return static_cast<__mmask16>(((1u << b) - 1u) & ~((1u << a) - 1u));
}

// The products' traits for attention_tiles_strips.h: 16-lane zmm vectors,
// 6 x 64 strips (24 of the 32 zmm accumulators), the last vector of a strip
// through the tail's mask.
struct Avx512Strips {
  using Elem = float;
  using Acc = __m512;
  using Operand = __m512;
  using Tail = __mmask16;
  static constexpr int kLanes = 16;
  static constexpr int kVectors = 4;  // 16-float vectors per strip (64 columns)
  static __mmask16 AllLanes() { return 0xFFFF; }
  static __mmask16 FirstLanes(int count) { return RangeMask(0, count, 0); }
  static __m512 Zero() { return _mm512_setzero_ps(); }
  static __m512 LoadC(const float* p, __mmask16 t, bool last) { return _mm512_maskz_loadu_ps(last ? t : 0xFFFF, p); }
  static void StoreC(float* p, __mmask16 t, bool last, __m512 v) { _mm512_mask_storeu_ps(p, last ? t : 0xFFFF, v); }
  static __m512 LoadB(const float* p, __mmask16 t, bool last) { return _mm512_maskz_loadu_ps(last ? t : 0xFFFF, p); }
  static __m512 BroadcastA(const float* p) { return _mm512_set1_ps(*p); }
  static __m512 MulAdd(__m512 acc, __m512 a, __m512 b) { return _mm512_fmadd_ps(a, b, acc); }
};

void Gemm(int m, int n, int k, const float* a, ptrdiff_t a_rs, ptrdiff_t a_cs, const float* b, ptrdiff_t ldb,
          float* c, ptrdiff_t ldc, bool accumulate) {
  StripGemm<Avx512Strips>(m, n, k, a, a_rs, a_cs, b, ldb, c, ldc, accumulate);
}

// The softmax passes walk one 16-query vector at a time down the tile's rows,
// so the running max, msafe and the sums stay in registers (a row-outer loop
// loaded and stored them for every row); each lane still sees its rows in
// ascending order, so the sums are those of the row-outer loop. Vectors a
// row sees whole take unmasked loads and arithmetic (written out separately:
// folding that case into RangeMask and the masked path is slower: the masked
// forms cost their extra mask moves).
//
// TileMax reads the tile once, row by row: up to four 16-lane vectors of a
// row (its 64 queries) fold into four running maxima, two sets of them over
// the even and the odd rows (two vmaxps chains per vector, hiding their
// 4-cycle latency), combined at the end. The tile (64 KiB at the AMX
// forward's 256 keys) has just been written by the tile unit and mostly sits
// in L2: the earlier order, one 16-lane vector at a time down all the rows,
// walked it four times a 64-byte line per 256-byte row, and its FoldMax cost
// markedly more cycles per window-1024 bf16 forward
// (docs/history/benchmarks-2026.md, "Attention at GEMM speed"). A NaN score never enters (vmaxps returns
// its second operand, the running max, when the first is NaN), so the
// maximum is the same value; only a zero's sign could differ.
template <int NX>
void TileMaxLanes(const float* s, int rows, int ld, const int* ra, const int* rb, float* mn, int x0, int lo,
                  int hi) {
  const __m512 none = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  const int x1 = x0 + 16 * NX;  // the lanes [x0, x1) this call folds
  __mmask16 any[NX];
  __m512 even[NX], odd[NX];
  for (int v = 0; v < NX; ++v) {
    any[v] = RangeMask(lo, hi, x0 + 16 * v);
    even[v] = _mm512_maskz_loadu_ps(any[v], mn + x0 + 16 * v);
    odd[v] = none;
  }
  auto fold = [&](int j, __m512* acc) {
    const float* row = s + j * ld + x0;
    if (ra[j] <= x0 && rb[j] >= x1) {
#pragma GCC unroll 4
      for (int v = 0; v < NX; ++v) acc[v] = _mm512_max_ps(_mm512_loadu_ps(row + 16 * v), acc[v]);
      return;
    }
#pragma GCC unroll 4
    for (int v = 0; v < NX; ++v) {
      const __mmask16 m = RangeMask(ra[j], rb[j], x0 + 16 * v);
      acc[v] = _mm512_mask_max_ps(acc[v], m, _mm512_maskz_loadu_ps(m, row + 16 * v), acc[v]);
    }
  };
  int j = 0;
  for (; j + 1 < rows; j += 2) {
    fold(j, even);
    fold(j + 1, odd);
  }
  if (j < rows) fold(j, even);
  // (The masked max: its pass-through is even itself, where the unmasked
  // form's undefined one drew a false -Wuninitialized from GCC 12 here.)
  for (int v = 0; v < NX; ++v)
    _mm512_mask_storeu_ps(mn + x0 + 16 * v, any[v], _mm512_mask_max_ps(even[v], any[v], odd[v], even[v]));
}

void TileMax(const float* s, int rows, int ld, const int* ra, const int* rb, float* mn) {
  int lo = 1 << 30, hi = 0;  // union of the visible ranges
  for (int j = 0; j < rows; ++j)
    if (rb[j] > ra[j]) lo = ra[j] < lo ? ra[j] : lo, hi = rb[j] > hi ? rb[j] : hi;
  for (int x0 = lo & ~15; x0 < hi; x0 += 64) {  // 64 lanes (the forward's kBlockQ queries) per pass over the rows
    switch ((std::min(hi, x0 + 64) - x0 + 15) / 16) {
      case 1: TileMaxLanes<1>(s, rows, ld, ra, rb, mn, x0, lo, hi); break;
      case 2: TileMaxLanes<2>(s, rows, ld, ra, rb, mn, x0, lo, hi); break;
      case 3: TileMaxLanes<3>(s, rows, ld, ra, rb, mn, x0, lo, hi); break;
      default: TileMaxLanes<4>(s, rows, ld, ra, rb, mn, x0, lo, hi); break;
    }
  }
}

// One row's P on lanes x + [0, 16) of a transposed score tile (exp(s - m),
// zero where the row does not see the lane), added to the sums lv: the
// per-row step of the forward's exp pass, shared by TileExpSum and the packed
// AMX driver's amx::ExpSumPairs so both give the same bits.
template <bool kBf16Exp>
inline __m512 ExpSumLanes(const float* row, int x, int ra, int rb, __m512 mv, __m512 bmv, __m512& lv) {
  if (ra <= x && rb >= x + 16) {
    const __m512 p = ShiftedExp<kBf16Exp>(_mm512_loadu_ps(row + x), mv, bmv);
    lv = _mm512_add_ps(lv, p);
    return p;
  }
  const __mmask16 vis = RangeMask(ra, rb, x);
  if (vis == 0) return _mm512_setzero_ps();
  const __m512 p = _mm512_maskz_mov_ps(vis, ShiftedExp<kBf16Exp>(_mm512_maskz_loadu_ps(vis, row + x), mv, bmv));
  lv = _mm512_mask_add_ps(lv, vis, lv, p);
  return p;
}

template <bool kBf16Exp>
void TileExpSum(float* s, int rows, int ld, int len, const int* ra, const int* rb, const float* msafe, float* l) {
  for (int x = 0; x < len; x += 16) {
    const __mmask16 in = RangeMask(0, len, x);
    const __m512 mv = _mm512_maskz_loadu_ps(in, msafe + x);
    const __m512 bmv = ExpBias<kBf16Exp>(mv);
    __m512 lv = _mm512_maskz_loadu_ps(in, l + x);
    for (int j = 0; j < rows; ++j) {
      float* row = s + j * ld;
      _mm512_mask_storeu_ps(row + x, in, ExpSumLanes<kBf16Exp>(row, x, ra[j], rb[j], mv, bmv, lv));
    }
    _mm512_mask_storeu_ps(l + x, in, lv);
  }
}

// One query row's P = exp(s - lse) and dS = P (dP - D) on lanes x + [0, 16)
// of row-major tiles (zero where the row does not see the key): the per-row
// step of the backward's pass, shared by TileBackward and the packed AMX
// driver's amx::BackwardPairs so both give the same bits. Returns whether
// all 16 lanes are visible.
// VisibleLanes is that step on 16 lanes the row sees whole, from scores s and
// dP in registers: every path of the pass (the checked one here, BackwardPairs'
// whole-row steps, BackwardRegisters) calls it, so they share the operations.
template <bool kBf16Exp>
inline void VisibleLanes(__m512 s, __m512 dp, __m512 lv, __m512 blv, __m512 dv, __m512& px, __m512& dsx) {
  px = ShiftedExp<kBf16Exp>(s, lv, blv);
  dsx = _mm512_mul_ps(px, _mm512_sub_ps(dp, dv));
}

template <bool kBf16Exp>
inline bool BackwardLanes(const float* prow, const float* dsrow, int x, int ra, int rb, __m512 lv, __m512 blv,
                          __m512 dv, __m512& px, __m512& dsx) {
  if (ra <= x && rb >= x + 16) {
    VisibleLanes<kBf16Exp>(_mm512_loadu_ps(prow + x), _mm512_loadu_ps(dsrow + x), lv, blv, dv, px, dsx);
    return true;
  }
  const __mmask16 vis = RangeMask(ra, rb, x);
  px = _mm512_maskz_mov_ps(vis, ShiftedExp<kBf16Exp>(_mm512_maskz_loadu_ps(vis, prow + x), lv, blv));
  dsx = _mm512_maskz_mov_ps(vis, _mm512_mul_ps(px, _mm512_sub_ps(_mm512_maskz_loadu_ps(vis, dsrow + x), dv)));
  return false;
}

template <bool kBf16Exp>
void TileBackward(float* p, float* ds, int rows, int ld, int len, const int* ra, const int* rb, const float* lse,
                  const float* drow) {
  for (int i = 0; i < rows; ++i) {
    float* prow = p + i * ld;
    float* dsrow = ds + i * ld;
    const __m512 lv = _mm512_set1_ps(lse[i]), dv = _mm512_set1_ps(drow[i]);
    const __m512 blv = ExpBias<kBf16Exp>(lv);
    for (int x = 0; x < len; x += 16) {
      __m512 px, dsx;
      if (BackwardLanes<kBf16Exp>(prow, dsrow, x, ra[i], rb[i], lv, blv, dv, px, dsx)) {
        _mm512_storeu_ps(dsrow + x, dsx);
        _mm512_storeu_ps(prow + x, px);
        continue;
      }
      const __mmask16 in = RangeMask(0, len, x);
      _mm512_mask_storeu_ps(prow + x, in, px);
      _mm512_mask_storeu_ps(dsrow + x, in, dsx);
    }
  }
}

// load_transposed through 16 x 16 register transposes (the scalar loop's
// bits: one fp32 product per element, +0 in the padding rows).
void LoadTransposed(const float* src, int64_t ld, int rows, int64_t d, float scale, int width, float* dst) {
  const __m512 sv = _mm512_set1_ps(scale);
  __m512i blk[16];
  for (int r0 = 0; r0 < width; r0 += 16) {
    const __mmask16 in_width = RangeMask(0, width - r0, 0), live = RangeMask(0, rows - r0, 0) & in_width;
    for (int64_t c0 = 0; c0 < d; c0 += 16) {
      const __mmask16 cols = RangeMask(0, static_cast<int>(d - c0), 0);
      for (int r = 0; r < 16; ++r)
        blk[r] = r0 + r < rows ? _mm512_maskz_loadu_epi32(cols, src + (r0 + r) * ld + c0) : _mm512_setzero_si512();
      Transpose16x16(blk);
      for (int c = 0; c < 16 && c0 + c < d; ++c)
        _mm512_mask_storeu_ps(dst + (c0 + c) * width + r0, in_width,
                              _mm512_maskz_mul_ps(live, _mm512_castsi512_ps(blk[c]), sv));
    }
  }
}

const AttentionTileKernels<float> kTiles = {"avx512", Gemm, TileMax, TileExpSum<false>, TileBackward<false>,
                                            LoadTransposed};
const AttentionTileKernels<float> kTilesBf16Exp = {"avx512-bf16-exp", Gemm, TileMax, TileExpSum<true>,
                                                   TileBackward<true>, LoadTransposed};

}  // namespace

const AttentionTileKernels<float>* AttentionTilesAvx512() { return &kTiles; }
const AttentionTileKernels<float>* AttentionTilesAvx512Bf16Exp() { return &kTilesBf16Exp; }

}  // namespace longctx::cpu

#pragma GCC pop_options

// The packed AMX backward's fused pass (amx_bf16.h): it needs AVX512-BF16 for
// the conversions, which the tables above must not (they run on AVX-512 CPUs
// without it).
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,fma,avx2,avx512bf16")
#include "kernels/cpu/bf16_pairs_avx512.h"

namespace longctx::cpu::amx {

// TileExpSum<true>'s loop over ExpSumLanes (the same P and the same sums),
// rows taken two at a time and each pair stored as 16 bf16 pairs instead of
// two fp32 rows.
void ExpSumPairs(const float* s, int rows, int ld, int len, const int* ra, const int* rb, const float* msafe,
                 float* l, uint32_t* pairs, int pairs_ld) {
  for (int x = 0; x < len; x += 16) {
    const __mmask16 in = RangeMask(0, len, x);
    const __m512 mv = _mm512_maskz_loadu_ps(in, msafe + x);
    const __m512 bmv = ExpBias<true>(mv);
    __m512 lv = _mm512_maskz_loadu_ps(in, l + x);
    auto prob = [&](int j) { return ExpSumLanes<true>(s + j * ld, x, ra[j], rb[j], mv, bmv, lv); };
    int j = 0;
    for (; j + 1 < rows; j += 2) {
      const __m512 lo = prob(j);
      const __m512 hi = prob(j + 1);
      _mm512_storeu_si512(pairs + (j / 2) * pairs_ld + x, PairLanes(lo, hi));
    }
    if (j < rows) _mm512_storeu_si512(pairs + (j / 2) * pairs_ld + x, PairLanes(prob(j), _mm512_setzero_ps()));
    _mm512_mask_storeu_ps(l + x, in, lv);
  }
}

// Where the backward pass writes query rows i, i + 1 (two: whether row i + 1
// exists): P and dS as pairs of the two rows (pp, dpp), dS as key pairs of
// each row (r0, r1).
struct PairRowsOut {
  uint32_t *pp, *dpp, *r0, *r1;
  bool two;
};
inline PairRowsOut PairRowsAt(int i, int rows, uint32_t* p_pairs, uint32_t* ds_pairs, int pairs_ld,
                              uint32_t* ds_rows, int rows_ld) {
  uint32_t* r0 = ds_rows + i * rows_ld;
  return {p_pairs + (i / 2) * pairs_ld, ds_pairs + (i / 2) * pairs_ld, r0, r0 + rows_ld, i + 1 < rows};
}

// The pass's stores of its two rows at keys x + [0, 32).
inline void StorePairsStep(const PairRowsOut& o, int x, __m512 p0a, __m512 p0b, __m512 p1a, __m512 p1b, __m512 d0a,
                           __m512 d0b, __m512 d1a, __m512 d1b) {
  _mm512_storeu_si512(o.pp + x, PairLanes(p0a, p1a));
  _mm512_storeu_si512(o.pp + x + 16, PairLanes(p0b, p1b));
  _mm512_storeu_si512(o.dpp + x, PairLanes(d0a, d1a));
  _mm512_storeu_si512(o.dpp + x + 16, PairLanes(d0b, d1b));
  _mm512_storeu_si512(o.r0 + x / 2, (__m512i)(_mm512_cvtne2ps_pbh(d0b, d0a)));
  if (o.two) _mm512_storeu_si512(o.r1 + x / 2, (__m512i)(_mm512_cvtne2ps_pbh(d1b, d1a)));
}

// TileBackward<true>'s BackwardLanes on two rows at a time and 32 keys per
// step, converted in registers instead of stored as fp32. A pair of rows that
// both see all of [0, len) (every row of a tile inside a window or below a
// causal diagonal) takes its whole 32-key steps without range checks, masks
// or zero lanes; the rest, and the steps past them, go through the checked
// BackwardLanes. Each row's lse, drow and exponent bias are made once per
// row pair, not once per 16 lanes (the compiler had kept ExpBias's FMA in
// the loop). Every lane takes the same operations either way: the same bits.
// The pass takes markedly less time than storing fp32 rows, at 2K-32K
// window-1024 and 8K full bf16 backward (docs/history/benchmarks-2026.md, "Attention at GEMM speed").
void BackwardPairs(const float* s, const float* dp, int rows, int ld, int len, int width, const int* ra,
                   const int* rb, const float* lse, const float* drow, uint32_t* p_pairs, uint32_t* ds_pairs,
                   int pairs_ld, uint32_t* ds_rows, int rows_ld) {
  const __m512 zero = _mm512_setzero_ps();
  const int whole = len / 32 * 32;  // keys of the whole 32-key steps inside [0, len)
  for (int i = 0; i < rows; i += 2) {
    const PairRowsOut out = PairRowsAt(i, rows, p_pairs, ds_pairs, pairs_ld, ds_rows, rows_ld);
    const bool two = out.two;
    const int i1 = two ? i + 1 : i;  // an odd last row's partner: itself, never computed or stored
    const __m512 lv0 = _mm512_set1_ps(lse[i]), dv0 = _mm512_set1_ps(drow[i]), blv0 = ExpBias<true>(lv0);
    const __m512 lv1 = _mm512_set1_ps(lse[i1]), dv1 = _mm512_set1_ps(drow[i1]), blv1 = ExpBias<true>(lv1);
    const float *s0 = s + i * ld, *s1 = s + i1 * ld, *dp0 = dp + i * ld, *dp1 = dp + i1 * ld;
    int x = 0;
    if (two && ra[i] <= 0 && rb[i] >= len && ra[i1] <= 0 && rb[i1] >= len) {
      for (; x < whole; x += 32) {
        __m512 p0a, p0b, p1a, p1b, d0a, d0b, d1a, d1b;
        VisibleLanes<true>(_mm512_loadu_ps(s0 + x), _mm512_loadu_ps(dp0 + x), lv0, blv0, dv0, p0a, d0a);
        VisibleLanes<true>(_mm512_loadu_ps(s0 + x + 16), _mm512_loadu_ps(dp0 + x + 16), lv0, blv0, dv0, p0b, d0b);
        VisibleLanes<true>(_mm512_loadu_ps(s1 + x), _mm512_loadu_ps(dp1 + x), lv1, blv1, dv1, p1a, d1a);
        VisibleLanes<true>(_mm512_loadu_ps(s1 + x + 16), _mm512_loadu_ps(dp1 + x + 16), lv1, blv1, dv1, p1b, d1b);
        StorePairsStep(out, x, p0a, p0b, p1a, p1b, d0a, d0b, d1a, d1b);
      }
    }
    // P and dS zero where a row does not see a lane or past len.
    for (; x < width; x += 32) {
      __m512 p0a = zero, p0b = zero, d0a = zero, d0b = zero, p1a = zero, p1b = zero, d1a = zero, d1b = zero;
      if (x < len) {
        BackwardLanes<true>(s0, dp0, x, ra[i], rb[i], lv0, blv0, dv0, p0a, d0a);
        if (two) BackwardLanes<true>(s1, dp1, x, ra[i1], rb[i1], lv1, blv1, dv1, p1a, d1a);
      }
      if (x + 16 < len) {
        BackwardLanes<true>(s0, dp0, x + 16, ra[i], rb[i], lv0, blv0, dv0, p0b, d0b);
        if (two) BackwardLanes<true>(s1, dp1, x + 16, ra[i1], rb[i1], lv1, blv1, dv1, p1b, d1b);
      }
      StorePairsStep(out, x, p0a, p0b, p1a, p1b, d0a, d0b, d1a, d1b);
    }
  }
}

// BackwardLanes on P, dP already in registers (the same operations on the
// same values: the same bits).
inline void BackwardRegisters(__m512 sv, __m512 dpv, int x, int ra, int rb, __m512 lv, __m512 blv, __m512 dv,
                              __m512& px, __m512& dsx) {
  if (ra <= x && rb >= x + 16) {
    VisibleLanes<true>(sv, dpv, lv, blv, dv, px, dsx);
    return;
  }
  const __mmask16 vis = RangeMask(ra, rb, x);
  px = _mm512_maskz_mov_ps(vis, ShiftedExp<true>(_mm512_maskz_mov_ps(vis, sv), lv, blv));
  dsx = _mm512_maskz_mov_ps(vis, _mm512_mul_ps(px, _mm512_sub_ps(_mm512_maskz_mov_ps(vis, dpv), dv)));
}

// Query rows i, i + 1 against NV 16-key vectors from key x0: S and dP in
// registers (DotProduct's accumulation: zero, then every k-pair in ascending
// order through vdpbf16ps, A broadcast, B loaded), then BackwardPairs' pass
// on them and its stores, 32 keys at a time.
template <int NV>
inline void ScoresBackwardStrip(int x0, int kp, const uint32_t* __restrict q, const uint32_t* __restrict o, int a_ld,
                                const uint32_t* __restrict kt, const uint32_t* __restrict vt, int b_ld, int i,
                                int len, const int* ra, const int* rb, const float* lse, const float* drow,
                                const PairRowsOut& out) {
  const bool two = out.two;
  __m512 sa[2][NV], da[2][NV];
#pragma GCC unroll 4
  for (int v = 0; v < NV; ++v) sa[0][v] = sa[1][v] = da[0][v] = da[1][v] = _mm512_setzero_ps();
  const uint32_t* q0 = q + static_cast<ptrdiff_t>(i) * a_ld;
  const uint32_t* o0 = o + static_cast<ptrdiff_t>(i) * a_ld;
  for (int p = 0; p < kp; ++p) {
    __m512bh kv[NV], vv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      kv[v] = (__m512bh)_mm512_loadu_si512(kt + static_cast<ptrdiff_t>(p) * b_ld + x0 + 16 * v);
      vv[v] = (__m512bh)_mm512_loadu_si512(vt + static_cast<ptrdiff_t>(p) * b_ld + x0 + 16 * v);
    }
    const __m512bh bq0 = (__m512bh)_mm512_set1_epi32(static_cast<int>(q0[p]));
    const __m512bh bq1 = (__m512bh)_mm512_set1_epi32(static_cast<int>(q0[a_ld + p]));
    const __m512bh bo0 = (__m512bh)_mm512_set1_epi32(static_cast<int>(o0[p]));
    const __m512bh bo1 = (__m512bh)_mm512_set1_epi32(static_cast<int>(o0[a_ld + p]));
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      sa[0][v] = _mm512_dpbf16_ps(sa[0][v], bq0, kv[v]);
      sa[1][v] = _mm512_dpbf16_ps(sa[1][v], bq1, kv[v]);
      da[0][v] = _mm512_dpbf16_ps(da[0][v], bo0, vv[v]);
      da[1][v] = _mm512_dpbf16_ps(da[1][v], bo1, vv[v]);
    }
  }
  const __m512 zero = _mm512_setzero_ps();
  const __m512 lv0 = _mm512_set1_ps(lse[i]), dv0 = _mm512_set1_ps(drow[i]);
  const __m512 blv0 = ExpBias<true>(lv0);
  const float lse1 = two ? lse[i + 1] : 0.f, drow1 = two ? drow[i + 1] : 0.f;
  const __m512 lv1 = _mm512_set1_ps(lse1), dv1 = _mm512_set1_ps(drow1);
  const __m512 blv1 = ExpBias<true>(lv1);
#pragma GCC unroll 2
  for (int h = 0; h < (NV + 1) / 2; ++h) {
    const int x = x0 + 32 * h;
    __m512 p0a = zero, p0b = zero, d0a = zero, d0b = zero, p1a = zero, p1b = zero, d1a = zero, d1b = zero;
    if (x < len) {
      BackwardRegisters(sa[0][2 * h], da[0][2 * h], x, ra[i], rb[i], lv0, blv0, dv0, p0a, d0a);
      if (two) BackwardRegisters(sa[1][2 * h], da[1][2 * h], x, ra[i + 1], rb[i + 1], lv1, blv1, dv1, p1a, d1a);
    }
    if (2 * h + 1 < NV && x + 16 < len) {
      BackwardRegisters(sa[0][2 * h + 1], da[0][2 * h + 1], x + 16, ra[i], rb[i], lv0, blv0, dv0, p0b, d0b);
      if (two)
        BackwardRegisters(sa[1][2 * h + 1], da[1][2 * h + 1], x + 16, ra[i + 1], rb[i + 1], lv1, blv1, dv1, p1b,
                          d1b);
    }
    StorePairsStep(out, x, p0a, p0b, p1a, p1b, d0a, d0b, d1a, d1b);
  }
}

void DotBackwardPairs(const uint32_t* q, const uint32_t* o, int a_ld, int kp, const uint32_t* kt, const uint32_t* vt,
                      int b_ld, int rows, int len, int width, const int* ra, const int* rb, const float* lse,
                      const float* drow, uint32_t* p_pairs, uint32_t* ds_pairs, int pairs_ld, uint32_t* ds_rows,
                      int rows_ld) {
  const __m512 zero = _mm512_setzero_ps();
  for (int i = 0; i < rows; i += 2) {
    const PairRowsOut out = PairRowsAt(i, rows, p_pairs, ds_pairs, pairs_ld, ds_rows, rows_ld);
    int x0 = 0;
    for (; x0 + 64 <= len; x0 += 64)
      ScoresBackwardStrip<4>(x0, kp, q, o, a_ld, kt, vt, b_ld, i, len, ra, rb, lse, drow, out);
    switch ((len - x0) / 16) {
      case 1: ScoresBackwardStrip<1>(x0, kp, q, o, a_ld, kt, vt, b_ld, i, len, ra, rb, lse, drow, out); break;
      case 2: ScoresBackwardStrip<2>(x0, kp, q, o, a_ld, kt, vt, b_ld, i, len, ra, rb, lse, drow, out); break;
      case 3: ScoresBackwardStrip<3>(x0, kp, q, o, a_ld, kt, vt, b_ld, i, len, ra, rb, lse, drow, out); break;
      default: break;
    }
    // Columns [len, width) (whole 32-key steps past the products): zero, as
    // BackwardPairs writes them; a strip ending at an odd 16 wrote its step.
    for (int x = (len + 31) / 32 * 32; x < width; x += 32)
      StorePairsStep(out, x, zero, zero, zero, zero, zero, zero, zero, zero);
  }
}

}  // namespace longctx::cpu::amx

#pragma GCC pop_options

#else  // not x86-64

namespace longctx::cpu {
const AttentionTileKernels<float>* AttentionTilesAvx512() { return nullptr; }
const AttentionTileKernels<float>* AttentionTilesAvx512Bf16Exp() { return nullptr; }
}  // namespace longctx::cpu

#endif
