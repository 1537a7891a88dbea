// Why: the attention tile kernels (attention_tiles.h) on AVX2 + FMA, for the
// x86-64 machines without AVX-512 (the project's AMD CI host among them), and
// selectable on an AVX-512 machine so its tests run this path too. The products
// are the classic 6 x 16 register block (12 ymm accumulators + 2 B vectors + 1
// broadcast of the 16 registers), column tails with masked loads and stores;
// the softmax passes run on 8 lanes with the exp of attention_tiles_scalar.cc
// lane by lane (the integer exponent added to the float's exponent bits, exact
// like ldexp for the arguments that reach it). Only 256-bit intrinsics are
// used; the target pragma comes after every other #include (see the AVX-512
// file).
#include <cstddef>
#include <cstdint>

#include "kernels/cpu/attention_tiles.h"

#if defined(__x86_64__)
// no-avx512f: even in a -march=native build on an AVX-512 machine, this file's
// code must be AVX2 code (VEX encodings, 16 ymm registers, no mask registers),
// so that forcing this path here tests what an AVX2 machine runs. The pragma
// comes before <immintrin.h> so the intrinsics are defined without AVX-512 too.
#pragma GCC push_options
#pragma GCC target("avx2,fma,no-avx512f")
#include <immintrin.h>

#include "kernels/cpu/attention_tiles_strips.h"

namespace longctx::cpu {
namespace {

inline __m256 Exp8(__m256 x) {
  const __m256 tiny = _mm256_cmp_ps(x, _mm256_set1_ps(-87.33654f), _CMP_LT_OQ);
  // min(88, NaN) is the NaN (the second operand), which then flows through
  // every step below to the result (the scalar exp returns it too); lanes
  // below the domain compute garbage that the mask at the end zeroes.
  const __m256 xs = _mm256_min_ps(_mm256_set1_ps(88.f), x);
  const __m256 fx = _mm256_round_ps(_mm256_mul_ps(xs, _mm256_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(0.693359375f), xs);
  r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(-2.12194440e-4f), r);
  const __m256 z = _mm256_mul_ps(r, r);
  __m256 y = _mm256_set1_ps(1.9875691500e-4f);
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.3981999507e-3f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(8.3334519073e-3f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(4.1665795894e-2f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.6666665459e-1f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(5.0000001201e-1f));
  y = _mm256_fmadd_ps(y, z, r);
  y = _mm256_add_ps(y, _mm256_set1_ps(1.f));
  // y in [0.7, 1.5] and fx in [-126, 127] (the domain above), so 2^fx is a
  // normal float and y * 2^fx is ldexp's value: exact, or (below 2^-126) the
  // one rounding ldexp makes too.
  const __m256i e = _mm256_add_epi32(_mm256_cvtps_epi32(fx), _mm256_set1_epi32(127));
  const __m256 result = _mm256_mul_ps(y, _mm256_castsi256_ps(_mm256_slli_epi32(e, 23)));
  return _mm256_andnot_ps(tiny, result);
}

// Lanes x0 + [0, 8) that lie in [lo, hi), as an all-ones/zero integer mask.
inline __m256i RangeMask(int lo, int hi, int x0) {
  const __m256i idx = _mm256_add_epi32(_mm256_set1_epi32(x0), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  const __m256i ge = _mm256_cmpgt_epi32(idx, _mm256_set1_epi32(lo - 1));
  const __m256i lt = _mm256_cmpgt_epi32(_mm256_set1_epi32(hi), idx);
  return _mm256_and_si256(ge, lt);
}

inline __m256 Load(const float* p, __m256i m, bool full) {
  return full ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, m);
}
inline void Store(float* p, __m256i m, bool full, __m256 v) {
  if (full)
    _mm256_storeu_ps(p, v);
  else
    _mm256_maskstore_ps(p, m, v);
}

// The products' traits for attention_tiles_strips.h: 8-lane ymm vectors,
// 6 x 16 strips; the last vector of a strip goes through vmaskmovps unless its
// 8 lanes are all in (`full`), every other vector through plain loads and
// stores.
struct Avx2Strips {
  struct Tail {
    __m256i mask;
    bool full;
  };
  using Elem = float;
  using Acc = __m256;
  using Operand = __m256;
  static constexpr int kLanes = 8;
  static constexpr int kVectors = 2;  // 8-float vectors per strip (16 columns)
  static Tail AllLanes() { return {_mm256_set1_epi32(-1), true}; }
  static Tail FirstLanes(int count) { return {RangeMask(0, count, 0), count == 8}; }
  static __m256 Zero() { return _mm256_setzero_ps(); }
  static __m256 LoadC(const float* p, Tail t, bool last) { return Load(p, t.mask, t.full || !last); }
  static void StoreC(float* p, Tail t, bool last, __m256 v) { Store(p, t.mask, t.full || !last, v); }
  static __m256 LoadB(const float* p, Tail t, bool last) { return Load(p, t.mask, t.full || !last); }
  static __m256 BroadcastA(const float* p) { return _mm256_broadcast_ss(p); }
  static __m256 MulAdd(__m256 acc, __m256 a, __m256 b) { return _mm256_fmadd_ps(a, b, acc); }
};

void Gemm(int m, int n, int k, const float* a, ptrdiff_t a_rs, ptrdiff_t a_cs, const float* b, ptrdiff_t ldb,
          float* c, ptrdiff_t ldc, bool accumulate) {
  StripGemm<Avx2Strips>(m, n, k, a, a_rs, a_cs, b, ldb, c, ldc, accumulate);
}

// The softmax passes as the AVX-512 file runs them: one 8-lane vector at a
// time down the tile's rows, the running max and the sums in registers
// (each lane still sees its rows in ascending order: the same bits as a
// row-outer loop), and vectors a row sees whole on plain loads and stores.
// vmaskmovps is kept to the edges: its store form is microcoded on AMD cores
// (one per ~10+ cycles against a plain store's one or two per cycle), and
// the row-outer passes that stored every vector through it (and loaded and
// stored the max and the sums per row) cost several times the AVX-512
// passes' share of the attention's time (docs/history/benchmarks-2026.md, "Attention at GEMM speed").
inline bool Whole(int ra, int rb, int x) { return ra <= x && rb >= x + 8; }

void TileMax(const float* s, int rows, int ld, const int* ra, const int* rb, float* mn) {
  int lo = 1 << 30, hi = 0;  // union of the visible ranges
  for (int j = 0; j < rows; ++j)
    if (rb[j] > ra[j]) lo = ra[j] < lo ? ra[j] : lo, hi = rb[j] > hi ? rb[j] : hi;
  for (int x = lo & ~7; x < hi; x += 8) {
    const __m256i any = RangeMask(lo, hi, x);
    const bool all = Whole(lo, hi, x);
    __m256 cur = Load(mn + x, any, all);
    for (int j = 0; j < rows; ++j) {
      const float* row = s + j * ld;
      if (Whole(ra[j], rb[j], x)) {
        cur = _mm256_max_ps(_mm256_loadu_ps(row + x), cur);
        continue;
      }
      const __m256i m = RangeMask(ra[j], rb[j], x);
      cur = _mm256_blendv_ps(cur, _mm256_max_ps(_mm256_maskload_ps(row + x, m), cur), _mm256_castsi256_ps(m));
    }
    Store(mn + x, any, all, cur);
  }
}

void TileExpSum(float* s, int rows, int ld, int len, const int* ra, const int* rb, const float* msafe, float* l) {
  for (int x = 0; x < len; x += 8) {
    const __m256i in = RangeMask(0, len, x);
    const bool full = x + 8 <= len;
    const __m256 mv = Load(msafe + x, in, full);
    __m256 lv = Load(l + x, in, full);
    for (int j = 0; j < rows; ++j) {
      float* row = s + j * ld;
      if (Whole(ra[j], rb[j], x)) {  // then x + 8 <= rb[j] <= len
        const __m256 p = Exp8(_mm256_sub_ps(_mm256_loadu_ps(row + x), mv));
        lv = _mm256_add_ps(lv, p);
        _mm256_storeu_ps(row + x, p);
        continue;
      }
      const __m256i vis = RangeMask(ra[j], rb[j], x);
      const __m256 visf = _mm256_castsi256_ps(vis);
      const __m256 p = _mm256_and_ps(visf, Exp8(_mm256_sub_ps(_mm256_maskload_ps(row + x, vis), mv)));
      lv = _mm256_blendv_ps(lv, _mm256_add_ps(lv, p), visf);
      Store(row + x, in, full, p);
    }
    Store(l + x, in, full, lv);
  }
}

void TileBackward(float* p, float* ds, int rows, int ld, int len, const int* ra, const int* rb, const float* lse,
                  const float* drow) {
  for (int i = 0; i < rows; ++i) {
    float* prow = p + i * ld;
    float* dsrow = ds + i * ld;
    const __m256 lv = _mm256_set1_ps(lse[i]), dv = _mm256_set1_ps(drow[i]);
    for (int x = 0; x < len; x += 8) {
      if (Whole(ra[i], rb[i], x)) {
        const __m256 px = Exp8(_mm256_sub_ps(_mm256_loadu_ps(prow + x), lv));
        _mm256_storeu_ps(dsrow + x, _mm256_mul_ps(px, _mm256_sub_ps(_mm256_loadu_ps(dsrow + x), dv)));
        _mm256_storeu_ps(prow + x, px);
        continue;
      }
      const __m256i in = RangeMask(0, len, x);
      const bool full = x + 8 <= len;
      const __m256i vis = RangeMask(ra[i], rb[i], x);
      const __m256 visf = _mm256_castsi256_ps(vis);
      const __m256 px = _mm256_and_ps(visf, Exp8(_mm256_sub_ps(_mm256_maskload_ps(prow + x, vis), lv)));
      const __m256 dsx = _mm256_and_ps(visf, _mm256_mul_ps(px, _mm256_sub_ps(_mm256_maskload_ps(dsrow + x, vis), dv)));
      Store(prow + x, in, full, px);
      Store(dsrow + x, in, full, dsx);
    }
  }
}

// In-register transpose of the 8 x 8 block r[0..7] (row i becomes column i).
inline void Transpose8x8(__m256 r[8]) {
  __m256 t[8], u[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    u[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
    r[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
  }
}

// load_transposed through 8 x 8 register transposes (the drivers' scalar
// loop's bits: one fp32 product per element, +0 in the padding rows); the
// scalar loop, whose column-strided stores the compiler cannot vectorize,
// held ~3 % of the AVX2 attention's time.
void LoadTransposed(const float* src, int64_t ld, int rows, int64_t d, float scale, int width, float* dst) {
  const __m256 sv = _mm256_set1_ps(scale);
  __m256 blk[8];
  for (int r0 = 0; r0 < width; r0 += 8) {
    const __m256i in_width = RangeMask(0, width - r0, 0);
    const __m256 live = _mm256_castsi256_ps(RangeMask(0, rows - r0, 0));
    const bool whole = r0 + 8 <= width;
    for (int64_t c0 = 0; c0 < d; c0 += 8) {
      const bool cols_whole = c0 + 8 <= d;
      const __m256i cols = RangeMask(0, static_cast<int>(d - c0), 0);
      for (int r = 0; r < 8; ++r)
        blk[r] = r0 + r < rows ? Load(src + (r0 + r) * ld + c0, cols, cols_whole) : _mm256_setzero_ps();
      Transpose8x8(blk);
      for (int c = 0; c < 8 && c0 + c < d; ++c)
        Store(dst + (c0 + c) * width + r0, in_width, whole, _mm256_and_ps(live, _mm256_mul_ps(blk[c], sv)));
    }
  }
}

const AttentionTileKernels<float> kTiles = {"avx2", Gemm, TileMax, TileExpSum, TileBackward, LoadTransposed};

}  // namespace

const AttentionTileKernels<float>* AttentionTilesAvx2() { return &kTiles; }

}  // namespace longctx::cpu

#pragma GCC pop_options

#else  // not x86-64

namespace longctx::cpu {
const AttentionTileKernels<float>* AttentionTilesAvx2() { return nullptr; }
}  // namespace longctx::cpu

#endif
