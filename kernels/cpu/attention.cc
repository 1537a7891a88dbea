// Why: long-context training cannot afford an N x N (or segment x segment)
// score matrix, so CPU attention is tiled flash attention: per (segment, head,
// query block) work item, scores are made one kBlockQ x kBlockK tile at a time
// and folded into an online softmax (kernels/math/online_softmax.h), so memory
// is O(N) plus per-thread tile scratch. Sliding windows start at the first key
// block the window reaches, so a window layer costs O(N * w), not O(N^2).
// The backward is FlashAttention-2 recomputation from the saved lse and
// D_i = rowsum(dO_i * O_i), split into two race-free passes: one parallel over
// (segment, kv head, key block) that owns dK and dV of its block (looping over
// the GQA group's query heads and the query blocks that can see it), one
// parallel over (segment, head, query block) that owns dQ. Every output element
// is produced by exactly one work item in a fixed order, so results are
// bitwise identical for any thread count and schedule; there are no atomics.
// The forward also serves inference (ops.h): keys with their own segments
// aligned bottom-right to the queries (KV-cache decode, chunked prefill) and a
// diagonal offset (STRING's shifted part). Both only move where a work item's
// key loop starts and ends and where a key's visible queries begin; the tile
// loops themselves are the training loops (offset 0, same segments).
// Tile products use TileGemm, a register-blocked micro-kernel on generic
// vector types; the softmax loops are plain loops GCC auto-vectorizes. BLAS is
// not called: it must not run inside our OpenMP region.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/dispatch.h"
#include "kernels/math/attention_visibility.h"
#include "kernels/math/online_softmax.h"

namespace longctx::cpu {
namespace {

constexpr int kBlockQ = 64;  // queries per tile
constexpr int kBlockK = 64;  // keys per tile (also the padded width of score tiles)

// TileGemm register blocking: kGemmRows rows of C times a strip of
// kGemmStripVecs vectors of kVecBytes, accumulated in registers (the classic
// 6 x 16 float AVX2 kernel: 12 accumulators + 2 B vectors + 1 broadcast of
// the 16 registers). Measured on AVX2 for a 64^3 tile: ~70 GFLOP/s per core,
// against ~50-60 for 2 x 32 or 3 x 32 and ~85 for OpenBLAS sgemm 1024^3.
// AVX-512 uses the same shape on 64-byte vectors (not tuned: no such machine).
#if defined(__AVX512F__)
constexpr int kVecBytes = 64;
#elif defined(__AVX__)
constexpr int kVecBytes = 32;
#else
constexpr int kVecBytes = 16;
#endif
constexpr int kGemmRows = 6;
constexpr int kGemmStripVecs = 2;

// C[0:R, 0:NV*L] (= or +=) sum_kk A(r, kk) * B[kk, 0:NV*L] with the
// accumulators in registers. Written with GCC/Clang generic vector types (no
// ISA intrinsics): the plain-loop version of this kernel was auto-vectorized
// too, but GCC 12 kept its accumulator array in memory (spills in the kk loop),
// which ran at ~26 GFLOP/s per core against ~70 for this one (AVX2, 64^3 tile).
// Products and sums are in a fixed order (kk ascending), so results do not
// depend on threads; a * b + c may be contracted to an FMA, also fixed.
template <class T, int R, int NV>
inline void GemmStrip(int k, const T* __restrict a, ptrdiff_t a_rs, ptrdiff_t a_cs, const T* __restrict b,
                      ptrdiff_t ldb, T* __restrict c, ptrdiff_t ldc, bool accumulate) {
  typedef T V __attribute__((vector_size(kVecBytes)));
  constexpr int L = kVecBytes / static_cast<int>(sizeof(T));
  V acc[R][NV];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) {
      if (accumulate)
        std::memcpy(&acc[r][v], c + r * ldc + v * L, sizeof(V));
      else
        acc[r][v] = V{};
    }
  for (int kk = 0; kk < k; ++kk) {
    V bv[NV];
#pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) std::memcpy(&bv[v], b + kk * ldb + v * L, sizeof(V));
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const T av = a[r * a_rs + kk * a_cs];
#pragma GCC unroll 16
      for (int v = 0; v < NV; ++v) acc[r][v] += av * bv[v];
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) std::memcpy(c + r * ldc + v * L, &acc[r][v], sizeof(V));
}

// R rows of C: full strips, then single vectors, then a scalar column tail.
template <class T, int R>
inline void GemmRows(int n, int k, const T* __restrict a, ptrdiff_t a_rs, ptrdiff_t a_cs, const T* __restrict b,
                     ptrdiff_t ldb, T* __restrict c, ptrdiff_t ldc, bool accumulate) {
  constexpr int L = kVecBytes / static_cast<int>(sizeof(T));
  constexpr int W = kGemmStripVecs * L;
  int n0 = 0;
  for (; n0 + W <= n; n0 += W) GemmStrip<T, R, kGemmStripVecs>(k, a, a_rs, a_cs, b + n0, ldb, c + n0, ldc, accumulate);
  for (; n0 + L <= n; n0 += L) GemmStrip<T, R, 1>(k, a, a_rs, a_cs, b + n0, ldb, c + n0, ldc, accumulate);
  if (n0 == n) return;
  for (int r = 0; r < R; ++r) {
    T* crow = c + r * ldc;
    if (!accumulate)
      for (int x = n0; x < n; ++x) crow[x] = T(0);
    for (int kk = 0; kk < k; ++kk) {
      const T av = a[r * a_rs + kk * a_cs];
      const T* brow = b + kk * ldb;
      for (int x = n0; x < n; ++x) crow[x] += av * brow[x];
    }
  }
}

// C[i, 0:n] (= or +=) sum_kk A(i, kk) * B[kk, 0:n] for i in [0, m), with
// A(i, kk) = A[i * a_rs + kk * a_cs] (so A or A^T), B rows contiguous with
// leading dimension ldb, C leading dimension ldc. Serial: called from inside
// the OpenMP work items (BLAS must not be).
template <class T>
void TileGemm(int m, int n, int k, const T* __restrict a, ptrdiff_t a_rs, ptrdiff_t a_cs,
              const T* __restrict b, ptrdiff_t ldb, T* __restrict c, ptrdiff_t ldc, bool accumulate) {
  // Row blocking does not change the order of any element's sum (kk
  // ascending); it depends only on m, so a given shape always runs the same code.
  int i = 0;
  for (; i + kGemmRows <= m; i += kGemmRows)
    GemmRows<T, kGemmRows>(n, k, a + i * a_rs, a_rs, a_cs, b, ldb, c + i * ldc, ldc, accumulate);
  if (i + 4 <= m) {
    GemmRows<T, 4>(n, k, a + i * a_rs, a_rs, a_cs, b, ldb, c + i * ldc, ldc, accumulate);
    i += 4;
  }
  for (; i + 2 <= m; i += 2) GemmRows<T, 2>(n, k, a + i * a_rs, a_rs, a_cs, b, ldb, c + i * ldc, ldc, accumulate);
  for (; i < m; ++i) GemmRows<T, 1>(n, k, a + i * a_rs, a_rs, a_cs, b, ldb, c + i * ldc, ldc, accumulate);
}

// Everything a work item needs: the shared unpacked form of the params
// (kernels/attention_args.h: raw pointers, strides in elements, the mask) and,
// in the backward, D. Offset and shift are 0 in the backward (Validate).
template <class T>
struct Ctx : AttentionView<T> {
  const T* drow = nullptr;  // D[h * n + i] = rowsum(dO * O)
};

template <class T>
Ctx<T> MakeCtx(const AttentionParams& p, bool backward) {
  return Ctx<T>{UnpackAttention<T>(p, backward)};
}

// A block of rows [begin, end) inside the segment [seg_begin, seg_end), plus
// the head (query head or kv head, depending on the pass) it is computed for.
// Forward items: rows are queries, the segment bounds are those of the keys,
// and query row i sits at key index i + shift (0 unless the keys have their
// own segments).
struct Item {
  int64_t seg_begin, seg_end, begin, end;
  int64_t head;
  int64_t shift = 0;
};

// Blocks of `block` rows aligned to each segment's start, times `heads`; the
// head varies fastest so consecutive items share the same keys in cache.
std::vector<Item> MakeItems(const int32_t* cu, int64_t segments, int block, int64_t heads) {
  std::vector<Item> items;
  for (int64_t s = 0; s < segments; ++s)
    for (int64_t b = cu[s]; b < cu[s + 1]; b += block)
      for (int64_t h = 0; h < heads; ++h)
        items.push_back({cu[s], cu[s + 1], b, std::min<int64_t>(b + block, cu[s + 1]), h});
  return items;
}

// Forward items: query blocks of each segment, with the key segment's bounds
// and the bottom-right shift (the last query of a segment is its last key).
std::vector<Item> MakeForwardItems(const int32_t* cu, const int32_t* cu_k, int64_t segments, int block,
                                   int64_t heads) {
  std::vector<Item> items;
  for (int64_t s = 0; s < segments; ++s)
    for (int64_t b = cu[s]; b < cu[s + 1]; b += block)
      for (int64_t h = 0; h < heads; ++h)
        items.push_back({cu_k[s], cu_k[s + 1], b, std::min<int64_t>(b + block, cu[s + 1]), h,
                         math::QueryKeyShift(cu[s + 1], cu_k[s + 1])});
  return items;
}

// Per-thread tile scratch; nothing here grows with N.
template <class T>
struct Scratch {
  std::vector<T> qt, dot, kt, vt, qs, s, dp, acc, acc2, m, l, mn, alpha, msafe;
  explicit Scratch(int64_t d)
      : qt(d * kBlockQ), dot(d * kBlockQ), kt(d * kBlockK), vt(d * kBlockK), qs(kBlockQ * d),
        s(kBlockQ * kBlockK), dp(kBlockQ * kBlockK), acc(std::max(kBlockQ, kBlockK) * d), acc2(kBlockK * d),
        m(kBlockQ), l(kBlockQ), mn(kBlockQ), alpha(kBlockQ), msafe(kBlockQ) {}
};

// rows x d (row stride ld) -> dst[r * d + c] = scale * src[r * ld + c].
template <class T>
void LoadScaled(const T* src, int64_t ld, int rows, int64_t d, T scale, T* dst) {
  for (int r = 0; r < rows; ++r)
    for (int64_t c = 0; c < d; ++c) dst[r * d + c] = scale * src[r * ld + c];
}

// rows x d (row stride ld) -> dst[c * width + r] = scale * src[r * ld + c],
// zero-padded to `width` columns (rows <= width).
template <class T>
void LoadTransposed(const T* src, int64_t ld, int rows, int64_t d, T scale, int width, T* dst) {
  for (int64_t c = 0; c < d; ++c) {
    T* out = dst + c * width;
    for (int r = 0; r < rows; ++r) out[r] = scale * src[r * ld + c];
    for (int r = rows; r < width; ++r) out[r] = T(0);
  }
}

// Visible range [a, b) of one line of a score tile: either the queries
// (i0 + [0, nq), i0 their key index) that see key j, or the keys (t0 + [0, nk))
// that query i sees.
struct Range {
  int a, b;
};
template <class T>
Range QueriesSeeing(const Ctx<T>& c, int64_t j, int64_t i0, int nq) {
  const int64_t a = std::max<int64_t>(0, math::FirstQuerySeeing(c.mask, j) - i0);
  const int64_t b = math::EndQuerySeeing(c.mask, i0 + nq, j) - i0;
  return {static_cast<int>(a), static_cast<int>(std::max(a, b))};
}
template <class T>
Range KeysSeenBy(const Ctx<T>& c, int64_t seg_begin, int64_t i, int64_t t0, int nk) {
  const int64_t a = std::max<int64_t>(0, math::FirstVisibleKey(c.mask, seg_begin, i) - t0);
  const int64_t b = std::min<int64_t>(nk, math::EndVisibleKey(c.mask, i) - t0);
  return {static_cast<int>(a), static_cast<int>(std::max(a, b))};
}

// One line of a backward score tile: p[x] = exp(p[x] - lse[x]) and
// ds[x] = p[x] * (ds[x] - drow[x]) on [a, b) (p holds scores and ds holds dP on
// entry), zero on the rest of [0, len). lse(x) and drow(x) give the row's
// log-sum-exp and D: per element along a query line, constant along a key line.
template <class T, class LseAt, class DAt>
void BackwardLine(T* __restrict p, T* __restrict ds, Range r, int len, LseAt lse, DAt drow) {
  for (int x = 0; x < r.a; ++x) p[x] = ds[x] = T(0);
  for (int x = r.a; x < r.b; ++x) {
    const T px = math::SoftmaxProb(p[x], lse(x));
    p[x] = px;
    ds[x] = math::SoftmaxGradScore(px, ds[x], drow(x));
  }
  for (int x = r.b; x < len; ++x) p[x] = ds[x] = T(0);
}

// Forward of one (segment, query head, query block). Scores are kept
// transposed, st[j * kBlockQ + i] (key j, query i): the product K_tile Q^T
// reads K rows in place (Q is transposed once per item, not K once per tile)
// and the online-softmax updates run across queries, i.e. along contiguous
// memory, so they vectorize without any horizontal reduction.
template <class T>
void ForwardItem(const Ctx<T>& c, const Item& it, Scratch<T>& w) {
  const int64_t d = c.d, h = it.head, g = h / c.group, i0 = it.begin;
  const int nq = static_cast<int>(it.end - i0);
  // Key index of the first query; the item's keys are those its first query
  // sees onward, up to one past the last key its last query sees.
  const int64_t p0 = i0 + it.shift, k_end = math::EndVisibleKey(c.mask, it.end - 1 + it.shift);
  T* __restrict st = w.s.data();
  T* __restrict m = w.m.data();
  T* __restrict l = w.l.data();
  T* __restrict mn = w.mn.data();
  T* __restrict alpha = w.alpha.data();
  T* __restrict msafe = w.msafe.data();
  LoadTransposed(c.q + i0 * c.sq + h * d, c.sq, nq, d, c.scale, kBlockQ, w.qt.data());
  std::fill(w.acc.begin(), w.acc.begin() + nq * d, T(0));
  std::fill(m, m + nq, math::NegInf<T>());
  std::fill(l, l + nq, T(0));
  for (int64_t t0 = math::FirstVisibleKey(c.mask, it.seg_begin, p0); t0 < k_end; t0 += kBlockK) {
    const int64_t t1 = std::min<int64_t>(t0 + kBlockK, k_end);
    const int nk = static_cast<int>(t1 - t0);
    const T* kb = c.k + t0 * c.sk + g * d;
    TileGemm<T>(nk, kBlockQ, d, kb, c.sk, 1, w.qt.data(), kBlockQ, st, kBlockQ, false);
    std::copy(m, m + nq, mn);
    for (int j = 0; j < nk; ++j) {
      const Range r = QueriesSeeing(c, t0 + j, p0, nq);
      const T* srow = st + j * kBlockQ;
      for (int i = r.a; i < r.b; ++i) mn[i] = math::SoftmaxMax(mn[i], srow[i]);
    }
    for (int i = 0; i < nq; ++i) {
      alpha[i] = math::SoftmaxRescale(m[i], mn[i]);
      msafe[i] = math::SoftmaxSafeMax(mn[i]);
      l[i] *= alpha[i];
      m[i] = mn[i];
    }
    for (int j = 0; j < nk; ++j) {
      const Range r = QueriesSeeing(c, t0 + j, p0, nq);
      T* srow = st + j * kBlockQ;
      for (int i = 0; i < r.a; ++i) srow[i] = T(0);
      for (int i = r.a; i < r.b; ++i) {
        const T p = math::Exp(srow[i] - msafe[i]);
        srow[i] = p;
        l[i] += p;
      }
      for (int i = r.b; i < nq; ++i) srow[i] = T(0);
    }
    for (int i = 0; i < nq; ++i)
      if (alpha[i] != T(1)) {
        T* arow = w.acc.data() + i * d;
        for (int64_t x = 0; x < d; ++x) arow[x] *= alpha[i];
      }
    // acc += P V with P(i, j) = st[j * kBlockQ + i].
    TileGemm<T>(nq, d, nk, st, 1, kBlockQ, c.v + t0 * c.sv + g * d, c.sv, w.acc.data(), d, true);
  }
  for (int i = 0; i < nq; ++i) {
    const T inv = math::SoftmaxInvSum(l[i]);
    T* orow = c.o + (i0 + i) * c.so + h * d;
    const T* arow = w.acc.data() + i * d;
    for (int64_t x = 0; x < d; ++x) orow[x] = arow[x] * inv;
    c.lse[h * c.slse + i0 + i] = math::SoftmaxLse(m[i], l[i]);
  }
}

// dK, dV of one (segment, kv head, key block): every query head of the GQA
// group and every query block that sees a key of the block. K and V of the
// block are transposed once; scores are row-major s[i * kBlockK + j].
template <class T>
void KeyValueGradItem(const Ctx<T>& c, const Item& it, Scratch<T>& w) {
  const int64_t d = c.d, g = it.head, j0 = it.begin, j1 = it.end;
  const int nk = static_cast<int>(j1 - j0);
  LoadTransposed(c.k + j0 * c.sk + g * d, c.sk, nk, d, T(1), kBlockK, w.kt.data());
  LoadTransposed(c.v + j0 * c.sv + g * d, c.sv, nk, d, T(1), kBlockK, w.vt.data());
  T* dka = w.acc.data();
  T* dva = w.acc2.data();
  std::fill(dka, dka + nk * d, T(0));
  std::fill(dva, dva + nk * d, T(0));
  // Queries [j0, qhi) can see a key of the block (offset 0 in the backward).
  const int64_t qlo = math::FirstQuerySeeing(c.mask, j0), qhi = math::EndQuerySeeing(c.mask, it.seg_end, j1 - 1);
  for (int64_t hh = 0; hh < c.group; ++hh) {
    const int64_t h = g * c.group + hh;
    const T* lse = c.lse + h * c.slse;
    const T* drow = c.drow + h * c.n;
    for (int64_t t0 = qlo; t0 < qhi; t0 += kBlockQ) {
      const int nq = static_cast<int>(std::min<int64_t>(t0 + kBlockQ, qhi) - t0);
      const T* dob = c.d_o + t0 * c.sdo + h * d;
      LoadScaled(c.q + t0 * c.sq + h * d, c.sq, nq, d, c.scale, w.qs.data());
      TileGemm<T>(nq, kBlockK, d, w.qs.data(), d, 1, w.kt.data(), kBlockK, w.s.data(), kBlockK, false);
      TileGemm<T>(nq, kBlockK, d, dob, c.sdo, 1, w.vt.data(), kBlockK, w.dp.data(), kBlockK, false);
      for (int r = 0; r < nq; ++r) {
        const int64_t i = t0 + r;
        const T lse_i = lse[i], d_i = drow[i];
        BackwardLine(w.s.data() + r * kBlockK, w.dp.data() + r * kBlockK, KeysSeenBy(c, it.seg_begin, i, j0, nk),
                     kBlockK, [lse_i](int) { return lse_i; }, [d_i](int) { return d_i; });
      }
      // dV += P^T dO, dK += dS^T (scale Q).
      TileGemm<T>(nk, d, nq, w.s.data(), 1, kBlockK, dob, c.sdo, dva, d, true);
      TileGemm<T>(nk, d, nq, w.dp.data(), 1, kBlockK, w.qs.data(), d, dka, d, true);
    }
  }
  for (int r = 0; r < nk; ++r) {
    std::copy(dka + r * d, dka + (r + 1) * d, c.dk + (j0 + r) * c.sdk + g * d);
    std::copy(dva + r * d, dva + (r + 1) * d, c.dv + (j0 + r) * c.sdv + g * d);
  }
}

// dQ of one (segment, query head, query block); scores transposed as in the
// forward, with Q and dO transposed once per item.
template <class T>
void QueryGradItem(const Ctx<T>& c, const Item& it, Scratch<T>& w) {
  const int64_t d = c.d, h = it.head, g = h / c.group, i0 = it.begin;
  const int nq = static_cast<int>(it.end - i0);
  const T* lse = c.lse + h * c.slse + i0;
  const T* drow = c.drow + h * c.n + i0;
  LoadTransposed(c.q + i0 * c.sq + h * d, c.sq, nq, d, c.scale, kBlockQ, w.qt.data());
  LoadTransposed(c.d_o + i0 * c.sdo + h * d, c.sdo, nq, d, T(1), kBlockQ, w.dot.data());
  T* dqa = w.acc.data();
  std::fill(dqa, dqa + nq * d, T(0));
  const int64_t k_end = math::EndVisibleKey(c.mask, it.end - 1);
  for (int64_t t0 = math::FirstVisibleKey(c.mask, it.seg_begin, i0); t0 < k_end; t0 += kBlockK) {
    const int nk = static_cast<int>(std::min<int64_t>(t0 + kBlockK, k_end) - t0);
    const T* kb = c.k + t0 * c.sk + g * d;
    TileGemm<T>(nk, kBlockQ, d, kb, c.sk, 1, w.qt.data(), kBlockQ, w.s.data(), kBlockQ, false);
    TileGemm<T>(nk, kBlockQ, d, c.v + t0 * c.sv + g * d, c.sv, 1, w.dot.data(), kBlockQ, w.dp.data(), kBlockQ,
                false);
    for (int j = 0; j < nk; ++j)
      BackwardLine(w.s.data() + j * kBlockQ, w.dp.data() + j * kBlockQ, QueriesSeeing(c, t0 + j, i0, nq), nq,
                   [lse](int x) { return lse[x]; }, [drow](int x) { return drow[x]; });
    // dQ += dS K with dS(i, j) = dp[j * kBlockQ + i].
    TileGemm<T>(nq, d, nk, w.dp.data(), 1, kBlockQ, kb, c.sk, dqa, d, true);
  }
  for (int i = 0; i < nq; ++i) {
    T* dqrow = c.dq + (i0 + i) * c.sdq + h * d;
    for (int64_t x = 0; x < d; ++x) dqrow[x] = c.scale * dqa[i * d + x];
  }
}

template <class T, class Fn>
void RunItems(const Ctx<T>& c, const std::vector<Item>& items, Fn fn) {
  const int64_t count = static_cast<int64_t>(items.size());
#pragma omp parallel if (count > 1)
  {
    Scratch<T> w(c.d);
#pragma omp for schedule(dynamic, 1)
    for (int64_t x = 0; x < count; ++x) fn(c, items[x], w);
  }
}

template <class T>
void Forward(const AttentionParams& p) {
  const Ctx<T> c = MakeCtx<T>(p, false);
  RunItems(c, MakeForwardItems(c.cu, c.cu_k, c.segments, kBlockQ, c.heads), ForwardItem<T>);
}

template <class T>
void Backward(const AttentionParams& p) {
  Ctx<T> c = MakeCtx<T>(p, true);
  // D[h, i] = dO[i, h, :] . O[i, h, :], accumulated in double (O(N) memory).
  std::vector<T> drow(c.heads * c.n);
  const int64_t n = c.n, heads = c.heads, d = c.d;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i)
    for (int64_t h = 0; h < heads; ++h) {
      const T* orow = c.o + i * c.so + h * d;
      const T* dorow = c.d_o + i * c.sdo + h * d;
      double s = 0;
      for (int64_t x = 0; x < d; ++x) s += static_cast<double>(orow[x]) * static_cast<double>(dorow[x]);
      drow[h * n + i] = static_cast<T>(s);
    }
  c.drow = drow.data();
  RunItems(c, MakeItems(c.cu, c.segments, kBlockK, c.kv_heads), KeyValueGradItem<T>);
  RunItems(c, MakeItems(c.cu, c.segments, kBlockQ, c.heads), QueryGradItem<T>);
}

}  // namespace

void AttentionForward(const AttentionParams& p) {
  DispatchFloat(p.q.dtype, "AttentionForward", [&](auto tag) { Forward<decltype(tag)>(p); });
}

void AttentionBackward(const AttentionParams& p) {
  DispatchFloat(p.q.dtype, "AttentionBackward", [&](auto tag) { Backward<decltype(tag)>(p); });
}

}  // namespace longctx::cpu
