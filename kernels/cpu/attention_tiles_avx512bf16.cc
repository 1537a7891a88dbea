// Why: where the CPU has bf16 dot products (AVX512-BF16), attention at
// precision bf16 multiplies bf16 tiles — Q, K, V, dO and the probabilities P
// and dS rounded to bf16 (round to nearest even) — with fp32 accumulation:
// vdpbf16ps does two multiply-adds per fp32 lane per instruction, twice the
// fp32 FMA rate. The softmax statistics (max, sum, lse, D) and every
// accumulator across tiles (O, dQ, dK, dV) stay fp32: only the tile products'
// operands are bf16. This table is the AVX-512 one with the product replaced
// and the softmax passes' exp at bf16 accuracy (AttentionTilesAvx512Bf16Exp).
// The product packs its operands first (vdpbf16ps wants each 32-bit lane to
// hold two consecutive-k bf16 values): B as [k/2][n] pairs, A as pairs along k
// in whichever orientation it is stored; the micro-kernel is the fp32 one's
// 6 x 64 block. Packing is per product here (the generic attention driver
// hands fp32 tiles), which costs about a fifth of a 64^3 product per operand;
// the packed driver (attention_packed_bf16.h) calls the packers and the tile
// products below directly (amx_bf16.h: amx::Product on AMX, amx::DotProduct,
// this micro-kernel, on vdpbf16ps) and converts each operand once. On AMX an A
// stored transposed (Pᵀ dO, dSᵀ Q, the forward's P V) is packed through a
// 16 x 16 register transpose (it was a scalar loop), and the packed buffers
// are zeroed only where the operand leaves tile padding.
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cpu/amx_bf16.h"
#include "kernels/cpu/attention_tiles.h"
#include "base/log.h"

#if defined(__x86_64__)
// GCC 12's false "may be used uninitialized" in the intrinsics (see the AVX-512 file).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,avx512bf16,fma,avx2,amx-tile,amx-bf16")
#include "kernels/cpu/attention_tiles_strips.h"
#include "kernels/cpu/bf16_pairs_avx512.h"
#include "kernels/cpu/transpose16_avx512.h"

namespace longctx::cpu {
namespace {

constexpr int kRows = kStripRows;
constexpr int kMaxDim = 512;  // largest m, n, k the packing buffers take (tiles are <= 64 x 128)

inline __mmask16 FirstLanes(int count) {
  return count >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << count) - 1u);
}

}  // namespace

namespace amx {

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

// Both layouts of scale * src ([m][k], row stride ld) in one pass over it: A
// rows (a_out[i * a_ld + p], pairs p < ceil(k / 2)) and pairs of rows
// (b_out[p * b_ld + x], p < ceil(m / 2), x < k; an odd last row pairs with
// zero); either output may be null. The fp32 product then the rounding, as
// scaling into a copy and PackPairsAlongRows / PackPairsOfRows of it would do.
void PackScaledRowsAndPairs(const float* src, ptrdiff_t ld, int m, int k, float scale, uint32_t* a_out, int a_ld,
                            uint32_t* b_out, int b_ld) {
  const __m512 sv = _mm512_set1_ps(scale);
  for (int i = 0; i < m; i += 2) {
    const float* r0 = src + i * ld;
    const float* r1 = r0 + ld;
    const bool has1 = i + 1 < m;
    for (int x = 0; x < k; x += 32) {
      const __mmask16 m0 = FirstLanes(k - x), m1 = FirstLanes(k - x - 16 > 0 ? k - x - 16 : 0);
      const __m512 a0 = _mm512_mul_ps(_mm512_maskz_loadu_ps(m0, r0 + x), sv);
      const __m512 a1 = _mm512_mul_ps(_mm512_maskz_loadu_ps(m1, r0 + x + 16), sv);
      const __m512 b0 = has1 ? _mm512_mul_ps(_mm512_maskz_loadu_ps(m0, r1 + x), sv) : _mm512_setzero_ps();
      const __m512 b1 = has1 ? _mm512_mul_ps(_mm512_maskz_loadu_ps(m1, r1 + x + 16), sv) : _mm512_setzero_ps();
      if (a_out != nullptr) {
        const __mmask16 np = FirstLanes(std::min(16, (k - x + 1) / 2));
        _mm512_mask_storeu_epi32(a_out + i * a_ld + x / 2, np, (__m512i)(_mm512_cvtne2ps_pbh(a1, a0)));
        if (has1)
          _mm512_mask_storeu_epi32(a_out + (i + 1) * a_ld + x / 2, np, (__m512i)(_mm512_cvtne2ps_pbh(b1, b0)));
      }
      if (b_out != nullptr) {
        uint32_t* out = b_out + (i / 2) * b_ld + x;
        _mm512_mask_storeu_epi32(out, m0, PairLanes(a0, b0));
        if (m1 != 0) _mm512_mask_storeu_epi32(out + 16, m1, PairLanes(a1, b1));
      }
    }
  }
}

// A at any strides (A(i, kk) = src[i * rs + kk * cs]) -> rows of k-pairs
// out[i][p], one element at a time (no attention product uses this).
void PackPairsStrided(const float* src, ptrdiff_t rs, ptrdiff_t cs, int m, int k, uint32_t* out, int out_ld) {
  const int kp = (k + 1) / 2;
  for (int i = 0; i < m; ++i)
    for (int p = 0; p < kp; ++p) {
      const float lo = src[i * rs + (2 * p) * cs];
      const float hi = 2 * p + 1 < k ? src[i * rs + (2 * p + 1) * cs] : 0.f;
      const __m512i v = PairLanes(_mm512_set1_ps(lo), _mm512_set1_ps(hi));
      out[i * out_ld + p] = static_cast<uint32_t>(_mm_cvtsi128_si32(_mm512_castsi512_si128(v)));
    }
}

void ScaleColumns(float* c, int rows, int ldc, int n, const float* alpha) {
  for (int x = 0; x < n; x += 16) {
    const __mmask16 m = FirstLanes(n - x);
    const __m512 a = _mm512_maskz_loadu_ps(m, alpha + x);
    if (_mm512_mask_cmp_ps_mask(m, a, _mm512_set1_ps(1.f), _CMP_NEQ_UQ) == 0) continue;
    for (int r = 0; r < rows; ++r) {
      float* row = c + r * ldc + x;
      _mm512_mask_storeu_ps(row, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, row), a));
    }
  }
}

// The 16 x 16 blocks of src ([m][n], row stride src_ld) transposed in
// registers; emit(j, i0, lanes, v) gets destination row j's 16 lanes from
// column i0 (lanes: those below m). j0 outer: each destination row is
// written whole before the next.
template <class Emit>
inline void ForTransposedRows(const float* src, int src_ld, int m, int n, Emit emit) {
  __m512i blk[16];
  for (int j0 = 0; j0 < n; j0 += 16) {
    const __mmask16 nj = FirstLanes(n - j0);
    for (int i0 = 0; i0 < m; i0 += 16) {
      const int mi = std::min(16, m - i0);
      for (int r = 0; r < 16; ++r)
        blk[r] = r < mi ? _mm512_maskz_loadu_epi32(nj, src + (i0 + r) * src_ld + j0) : _mm512_setzero_si512();
      Transpose16x16(blk);
      const __mmask16 row_lanes = FirstLanes(mi);
      for (int r = 0; r < 16 && j0 + r < n; ++r) emit(j0 + r, i0, row_lanes, _mm512_castsi512_ps(blk[r]));
    }
  }
}

void StoreTransposed(const float* src, int src_ld, int m, int n, float* dst, ptrdiff_t dst_ld,
                     const float* row_scale) {
  ForTransposedRows(src, src_ld, m, n, [&](int j, int i0, __mmask16 lanes, __m512 v) {
    float* out = dst + j * dst_ld + i0;
    if (row_scale == nullptr)
      _mm512_mask_storeu_ps(out, lanes, v);
    else
      _mm512_mask_storeu_ps(out, lanes, _mm512_mul_ps(v, _mm512_set1_ps(row_scale[j])));
  });
}

void AddTransposed(const float* src, int src_ld, int m, int n, float* dst, ptrdiff_t dst_ld) {
  ForTransposedRows(src, src_ld, m, n, [&](int j, int i0, __mmask16 lanes, __m512 v) {
    float* out = dst + j * dst_ld + i0;
    _mm512_mask_storeu_ps(out, lanes, _mm512_add_ps(_mm512_maskz_loadu_ps(lanes, out), v));
  });
}

void StreamScaledRows(const float* src, ptrdiff_t src_ld, int64_t rows, int d, float scale, float* dst,
                      ptrdiff_t dst_ld) {
  const __m512 sv = _mm512_set1_ps(scale);
  for (int64_t i = 0; i < rows; ++i) {
    const float* in = src + i * src_ld;
    float* out = dst + i * dst_ld;
    for (int x = 0; x < d; x += 16) {
      const __mmask16 lanes = FirstLanes(d - x);
      const __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(lanes, in + x), sv);
      if (lanes == 0xFFFF && (reinterpret_cast<uintptr_t>(out + x) & 63) == 0)
        _mm512_stream_ps(out + x, v);
      else
        _mm512_mask_storeu_ps(out + x, lanes, v);
    }
  }
  _mm_sfence();
}

// A stored transposed ([k][m], m contiguous, row stride ld), times scale when
// kScale -> rows of k-pairs out[i][p] (the AMX A-tile layout), 16 x 16 pair
// blocks through the register transpose. Writes whole blocks: rows up to m
// rounded up to 16 and pairs up to kp rounded up to 16, zero beyond m and k
// (out must have room).
template <bool kScale>
void PackPairsOfColumnsImpl(const float* src, ptrdiff_t ld, int k, int m, float scale, uint32_t* out, int out_ld) {
  const int kp = (k + 1) / 2;
  const __m512 sv = _mm512_set1_ps(scale);
  __m512i blk[16];
  // p0 outer: the source rows of a block of pairs are read whole (all of
  // their m columns) before the next rows; with rows far apart (q, dO at
  // their strides) an i0-outer order revisited each row m / 16 times.
  for (int p0 = 0; p0 < kp; p0 += 16) {
    for (int i0 = 0; i0 < m; i0 += 16) {
      const __mmask16 mi = FirstLanes(m - i0);
      for (int q = 0; q < 16; ++q) {
        const int p = p0 + q;
        if (p >= kp) {
          blk[q] = _mm512_setzero_si512();
          continue;
        }
        const float* r0 = src + (2 * p) * ld + i0;
        __m512 lo = _mm512_maskz_loadu_ps(mi, r0);
        __m512 hi = 2 * p + 1 < k ? _mm512_maskz_loadu_ps(mi, r0 + ld) : _mm512_setzero_ps();
        if constexpr (kScale) {
          lo = _mm512_mul_ps(lo, sv);
          hi = _mm512_mul_ps(hi, sv);
        }
        blk[q] = PairLanes(lo, hi);
      }
      Transpose16x16(blk);
      for (int r = 0; r < 16; ++r) _mm512_storeu_si512(out + (i0 + r) * out_ld + p0, blk[r]);
    }
  }
}

void PackPairsOfColumns(const float* src, ptrdiff_t ld, int k, int m, uint32_t* out, int out_ld) {
  PackPairsOfColumnsImpl<false>(src, ld, k, m, 1.f, out, out_ld);
}

void PackScaledPairsOfColumns(const float* src, ptrdiff_t ld, int k, int m, float scale, uint32_t* out, int out_ld) {
  PackPairsOfColumnsImpl<true>(src, ld, k, m, scale, out, out_ld);
}

// Rows of [m][k] times scale -> the B layout of the transpose: out[p * out_ld
// + i] = (scale A(i, 2p), scale A(i, 2p + 1)); whole 16 x 16 blocks, zero for
// rows i >= m and pairs past k. Pairs along each row (vcvtne2ps2bf16), then
// the 16 x 16 register transpose: no fp32 transposed copy.
void PackRowPairsTransposed(const float* src, ptrdiff_t ld, int m, int k, float scale, uint32_t* out, int out_ld) {
  const int kp = (k + 1) / 2;
  const __m512 sv = _mm512_set1_ps(scale);
  __m512i blk[16];
  for (int i0 = 0; i0 < m; i0 += 16) {
    for (int p0 = 0; p0 < kp; p0 += 16) {
      const int x = 2 * p0;
      const __mmask16 lo_m = FirstLanes(k - x > 0 ? k - x : 0);
      const __mmask16 hi_m = FirstLanes(k - x - 16 > 0 ? k - x - 16 : 0);
      for (int r = 0; r < 16; ++r) {
        if (i0 + r >= m) {
          blk[r] = _mm512_setzero_si512();
          continue;
        }
        const float* row = src + (i0 + r) * ld + x;
        const __m512 lo = _mm512_mul_ps(_mm512_maskz_loadu_ps(lo_m, row), sv);
        const __m512 hi = _mm512_mul_ps(_mm512_maskz_loadu_ps(hi_m, row + 16), sv);
        blk[r] = (__m512i)(_mm512_cvtne2ps_pbh(hi, lo));
      }
      Transpose16x16(blk);
      for (int q = 0; q < 16; ++q) _mm512_storeu_si512(out + (p0 + q) * out_ld + i0, blk[q]);
    }
  }
}

}  // namespace amx

namespace {

using amx::PackPairsAlongRows;
using amx::PackPairsOfColumns;
using amx::PackPairsOfRows;
using amx::PackPairsStrided;

// The products' traits for attention_tiles_strips.h: the fp32 file's 6 x 64
// strips with A and B as bf16 pairs (one 32-bit lane: two consecutive k) and
// vdpbf16ps, two multiply-adds per fp32 lane, as the multiply-add; k counts
// pairs.
struct PairStrips {
  using Elem = uint32_t;
  using Acc = __m512;
  using Operand = __m512bh;
  using Tail = __mmask16;
  static constexpr int kLanes = 16;
  static constexpr int kVectors = 4;
  static __mmask16 AllLanes() { return 0xFFFF; }
  static __mmask16 FirstLanes(int count) { return ::longctx::cpu::FirstLanes(count); }
  static __m512 Zero() { return _mm512_setzero_ps(); }
  static __m512 LoadC(const float* p, __mmask16 t, bool last) { return _mm512_maskz_loadu_ps(last ? t : 0xFFFF, p); }
  static void StoreC(float* p, __mmask16 t, bool last, __m512 v) { _mm512_mask_storeu_ps(p, last ? t : 0xFFFF, v); }
  static __m512bh LoadB(const uint32_t* p, __mmask16 t, bool last) {
    return (__m512bh)(_mm512_maskz_loadu_epi32(last ? t : 0xFFFF, p));
  }
  static __m512bh BroadcastA(const uint32_t* p) { return (__m512bh)(_mm512_set1_epi32(static_cast<int>(*p))); }
  static __m512 MulAdd(__m512 acc, __m512bh a, __m512bh b) { return _mm512_dpbf16_ps(acc, a, b); }
};

template <int R>
inline void Rows(int n, int kp, const uint32_t* a, ptrdiff_t a_rs, ptrdiff_t a_cs, const uint32_t* b, ptrdiff_t ldb,
                 float* c, ptrdiff_t ldc, bool accumulate) {
  StripRows<PairStrips, R>(n, kp, a, a_rs, a_cs, b, ldb, c, ldc, accumulate);
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
    PackPairsStrided(a, a_rs, a_cs, m, k, buf.a.data(), kp);
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

// --- AMX: the same product on the tile unit (16 x 16 fp32 C tiles, A tiles
// 16 rows x 32 bf16, B tiles 16 k-pairs x 16 columns), 8 tile registers as
// 2 x 2 C tiles + 2 A + 2 B. Operands are packed (and zero-padded to whole
// tiles) as for vdpbf16ps, A always as rows of k-pairs; C goes through a
// padded fp32 buffer when m or n is not a multiple of 16. ---

struct alignas(64) TileConfig {
  uint8_t palette_id = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// Linux gives a process AMX tile state only on request (arch_prctl
// ARCH_REQ_XCOMP_PERM for XTILEDATA); oneDNN asks the same way.
bool AmxPermitted() {
  static const bool ok = [] {
    constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
  }();
  return ok;
}

// Tiles 0-7 as 16 rows x 64 bytes. The config is a static object: GCC 12's
// _tile_loadconfig tells the compiler it reads only 8 bytes of its operand, so
// the stores filling a local config were dropped as dead (ldtilecfg then read
// stack garbage and faulted).
void LoadEightTiles() {
  static const TileConfig cfg = [] {
    TileConfig c;
    for (int t = 0; t < 8; ++t) {
      c.rows[t] = 16;
      c.colsb[t] = 64;
    }
    return c;
  }();
  _tile_loadconfig(&cfg);
}

inline int RoundUp(int x, int to) { return (x + to - 1) / to * to; }

struct AmxBuffers {
  std::vector<uint32_t> a, b;
  std::vector<float> c;
};

void GemmAmx(int m, int n, int k, const float* a, ptrdiff_t a_rs, ptrdiff_t a_cs, const float* b, ptrdiff_t ldb,
             float* c, ptrdiff_t ldc, bool accumulate) {
  if (k == 0 || m > kMaxDim || n > kMaxDim || k > kMaxDim) {  // empty or not a tile: the vdpbf16ps product
    Gemm(m, n, k, a, a_rs, a_cs, b, ldb, c, ldc, accumulate);
    return;
  }
  thread_local AmxBuffers buf;
  const int mp = RoundUp(m, 16), np = RoundUp(n, 16), kp2 = RoundUp(k, 32) / 2;  // kp2: k-pairs, padded
  const int kp = (k + 1) / 2;
  // Zero the packed operands only where packing leaves padding unwritten.
  buf.a.resize(static_cast<size_t>(mp) * kp2);
  buf.b.resize(static_cast<size_t>(kp2) * np);
  if (np != n || kp != kp2) std::fill(buf.b.begin(), buf.b.end(), 0u);
  PackPairsOfRows(b, ldb, k, n, buf.b.data(), np);
  if (a_cs == 1) {
    if (mp != m || kp != kp2) std::fill(buf.a.begin(), buf.a.end(), 0u);
    PackPairsAlongRows(a, a_rs, m, k, buf.a.data(), kp2);
  } else if (a_rs == 1) {  // A^T stored ([k][m]): transposed in registers, whole blocks
    PackPairsOfColumns(a, a_cs, k, m, buf.a.data(), kp2);
  } else {  // general strides (not used by the attention loops): element by element
    std::fill(buf.a.begin(), buf.a.end(), 0u);
    PackPairsStrided(a, a_rs, a_cs, m, k, buf.a.data(), kp2);
  }
  // C: in place when whole tiles cover it, else through a padded buffer.
  const bool direct = mp == m && np == n;
  float* cc = c;
  ptrdiff_t ldcc = ldc;
  if (!direct) {
    buf.c.assign(static_cast<size_t>(mp) * np, 0.f);
    if (accumulate)
      for (int i = 0; i < m; ++i) std::memcpy(buf.c.data() + i * np, c + i * ldc, sizeof(float) * n);
    cc = buf.c.data();
    ldcc = np;
  }
  LoadEightTiles();  // per call: oneDNN may have loaded its own in this thread
  // The padded buffer holds C (or zeros), so it is always accumulated into.
  amx::Product(mp, np, kp2, buf.a.data(), kp2, buf.b.data(), np, cc, static_cast<int>(ldcc), accumulate || !direct);
  if (!direct)
    for (int i = 0; i < m; ++i) std::memcpy(c + i * ldc, buf.c.data() + i * np, sizeof(float) * n);
}

}  // namespace

namespace amx {

bool Usable() {
  return AttentionTilesAvx512() != nullptr && __builtin_cpu_supports("amx-bf16") &&
         __builtin_cpu_supports("amx-tile") && AmxPermitted();
}

void LoadTileConfig() { LoadEightTiles(); }

// The tile loop of GemmAmx (which packs and pads first) and of the packed
// driver: 2 x 2 C tiles (0-3), A tiles 4-5, B tiles 6-7; k-pairs in steps of
// 16, ascending.
void Product(int mt, int nt, int kp, const uint32_t* a, int a_ld, const uint32_t* b, int b_ld, float* c, int ldc,
             bool accumulate) {
  const int a_stride = a_ld * 4, b_stride = b_ld * 4, c_stride = ldc * 4;
  for (int i0 = 0; i0 < mt; i0 += 32) {
    const bool two_rows = i0 + 16 < mt;
    for (int j0 = 0; j0 < nt; j0 += 32) {
      const bool two_cols = j0 + 16 < nt;
      float* c00 = c + i0 * ldc + j0;
      float* c01 = c00 + 16;
      float* c10 = c00 + 16 * ldc;
      float* c11 = c10 + 16;
      if (accumulate) {
        _tile_loadd(0, c00, c_stride);
        if (two_cols) _tile_loadd(1, c01, c_stride);
        if (two_rows) _tile_loadd(2, c10, c_stride);
        if (two_rows && two_cols) _tile_loadd(3, c11, c_stride);
      } else {
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
      }
      for (int p0 = 0; p0 < kp; p0 += 16) {
        const uint32_t* a0 = a + i0 * a_ld + p0;
        const uint32_t* b0 = b + p0 * b_ld + j0;
        _tile_loadd(4, a0, a_stride);
        _tile_loadd(6, b0, b_stride);
        _tile_dpbf16ps(0, 4, 6);
        if (two_cols) {
          _tile_loadd(7, b0 + 16, b_stride);
          _tile_dpbf16ps(1, 4, 7);
        }
        if (two_rows) {
          _tile_loadd(5, a0 + 16 * a_ld, a_stride);
          _tile_dpbf16ps(2, 5, 6);
          if (two_cols) _tile_dpbf16ps(3, 5, 7);
        }
      }
      _tile_stored(0, c00, c_stride);
      if (two_cols) _tile_stored(1, c01, c_stride);
      if (two_rows) _tile_stored(2, c10, c_stride);
      if (two_rows && two_cols) _tile_stored(3, c11, c_stride);
    }
  }
}

bool PairsUsable() { return AttentionTilesAvx512Bf16Exp() != nullptr; }

// Rows<R> of the per-product Gemm above on operands already packed: strips
// of 6 rows (the micro-kernel's 6 x 64 block), then the 4 (mt is a multiple
// of 16) or 2 left. Per C element the k-pairs run in ascending order through
// one fp32 lane, as in Gemm: the same bits as the generic avx512-bf16 tiles.
void DotProduct(int mt, int nt, int kp, const uint32_t* a, int a_ld, const uint32_t* b, int b_ld, float* c, int ldc,
                bool accumulate) {
  int i = 0;
  for (; i + kRows <= mt; i += kRows)
    Rows<kRows>(nt, kp, a + static_cast<ptrdiff_t>(i) * a_ld, a_ld, 1, b, b_ld, c + static_cast<ptrdiff_t>(i) * ldc,
                ldc, accumulate);
  const uint32_t* ai = a + static_cast<ptrdiff_t>(i) * a_ld;
  float* ci = c + static_cast<ptrdiff_t>(i) * ldc;
  switch (mt - i) {
    case 2: Rows<2>(nt, kp, ai, a_ld, 1, b, b_ld, ci, ldc, accumulate); break;
    case 4: Rows<4>(nt, kp, ai, a_ld, 1, b, b_ld, ci, ldc, accumulate); break;
    default: CHECK(mt == i) << "amx::DotProduct: " << mt << " rows, not a multiple of 16"; break;
  }
}

}  // namespace amx

const AttentionTileKernels<float>* AttentionTilesAmxBf16() {
  const AttentionTileKernels<float>* f32 = AttentionTilesAvx512Bf16Exp();
  if (f32 == nullptr || !__builtin_cpu_supports("amx-bf16") || !__builtin_cpu_supports("amx-tile") ||
      !AmxPermitted())
    return nullptr;
  static const AttentionTileKernels<float> tiles = {"amx-bf16", GemmAmx, f32->tile_max, f32->tile_exp_sum,
                                                    f32->tile_backward, f32->load_transposed};
  return &tiles;
}

const AttentionTileKernels<float>* AttentionTilesAvx512Bf16() {
  const AttentionTileKernels<float>* f32 = AttentionTilesAvx512Bf16Exp();
  if (f32 == nullptr) return nullptr;
  static const AttentionTileKernels<float> tiles = {"avx512-bf16", Gemm, f32->tile_max, f32->tile_exp_sum,
                                                    f32->tile_backward, f32->load_transposed};
  return &tiles;
}

}  // namespace longctx::cpu

#pragma GCC pop_options

#else  // not x86-64

namespace longctx::cpu {
const AttentionTileKernels<float>* AttentionTilesAvx512Bf16() { return nullptr; }
const AttentionTileKernels<float>* AttentionTilesAmxBf16() { return nullptr; }
namespace amx {
bool Usable() { return false; }
bool PairsUsable() { return false; }
void DotProduct(int, int, int, const uint32_t*, int, const uint32_t*, int, float*, int, bool) {
  LOG(FATAL) << "amx::DotProduct: no AVX512-BF16 on this host";
}
}  // namespace amx
}  // namespace longctx::cpu

#endif
