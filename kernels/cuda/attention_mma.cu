// Why: the scalar CUDA attention (attention.cu) runs at under 1 % of an
// H200's bf16 tensor-core peak, so a 16K-token step is attention-bound. At
// precision bf16 these kernels run FlashAttention-2 on the tensor cores
// instead: warp-level mma.sync.m16n8k16 (bf16 operands, fp32 accumulation),
// which every GPU from sm_80 on runs, Hopper included.
//
// Structure (FlashAttention-2, Dao 2023); each warp owns 16 rows, the
// warps per block and inner tiles per head_dim are DefaultConfig's:
//  * first, bf16 copies of scale * Q, K, V (and dO) in the workspace, rows
//    padded with zeros to a multiple of 128, so every tile is a run of
//    16-byte asynchronous copies (cp.async) into shared memory, double
//    buffered: the next tile lands while this one computes. Operand fragments
//    come from shared memory by ldmatrix (transposed for the B operands that
//    are stored key- or query-major: V in P V, dO and Q in dV and dK, K in dQ).
//  * forward: one block per (rows, head). Each key tile of 64 keys: S = Q K^T
//    in registers; the online softmax (row max by quad shuffles, fp32 sums,
//    exp as ex2 of one FFMA) on those registers; P, rounded to bf16, is the A
//    operand of O += P V straight from S's accumulator layout (no trip through
//    shared memory). Only key tiles some row of the block can see are loaded
//    (causal, window, document: the visibility rule of
//    kernels/math/attention_visibility.h); a warp skips tiles none of its rows
//    sees and masks only the tiles its rows see in part.
//  * backward, as attention.cu's: per-query lse, D = rowsum(dO * O) (double)
//    and visible key ranges first, then two kernels without atomics (bitwise
//    repeatable): one block per (keys, kv head) owns dK, dV of its keys over
//    the GQA group's query heads (S^T = K Q^T, dP^T = V dO^T, dV += P^T dO,
//    dK += dS^T Q), one block per (queries, head) owns dQ (S, dP, dQ += dS K).
//    That recomputes S and dP once more than FlashAttention-2's single kernel
//    with atomic dQ updates: 7 tile products where it has 5.
// What is rounded to bf16: scale * Q, K, V, P, dO, dS (the operands of the
// products); max, sums, lse, D and every accumulator stay fp32. The CPU's
// bf16 attention rounds the same operands (attention_packed_bf16.h), so the
// two agree to bf16 accuracy, not bit for bit (exp and summation orders
// differ). tests/kernels/backend_consistency_test.cc checks both against the
// fp32 op. A NaN or Inf in a key or value row that a query cannot see but
// that shares its 64-key tile reaches that query as NaN (0 * Inf), where the
// fp32 kernels skip the pair; finite inputs give identical visibility.
//
// Not done here: Hopper's wgmma and TMA (FlashAttention-3), a single-kernel
// backward. Its speed: docs/BENCHMARKS.md, "Tensor-core attention on the
// H200".
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "kernels/cuda/attention_mma.cuh"
#include "kernels/cuda/attention_rows.cuh"
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/mma_sync.cuh"
#include "kernels/math/online_softmax.h"

namespace longctx::cuda {
namespace {

constexpr int kWarpRows = 16;  // rows of one m16n8k16 A operand: each warp owns 16 rows
constexpr int kKeyTile = 64;   // keys per forward tile
// The bf16 copies are padded to a multiple of this many rows, the most rows
// any kernel's tile or block reads (8 warps x 16).
constexpr int kCopyRows = 128;
// bf16 elements of padding per shared-memory row (16 bytes): with it the 8
// rows of 16 bytes that one ldmatrix phase reads, and the 16-byte cp.async
// stores, fall in distinct banks (row strides of 80, 144, 272 bytes).
constexpr int kPad = 8;

// acc (16 x D, C layout) += a (16 x 16) B, B's 16 rows being rows k0.. of a
// row-major shared array of D columns (V in O += P V, K in dQ += dS K).
template <int D>
__device__ __forceinline__ void MmaRowsB(float (&acc)[D / 8][4], const uint32_t (&a)[4], const Bf16* s, int k0,
                                         int lane) {
#pragma unroll
  for (int dn = 0; dn < D / 16; ++dn) {
    uint32_t bb[4];
    LoadB2Trans(bb, s, D + kPad, k0, dn * 16, lane);
    Mma(acc[2 * dn], a, bb[0], bb[1]);
    Mma(acc[2 * dn + 1], a, bb[2], bb[3]);
  }
}

// The two products both backward kernels recompute, from zero: s = A1 B1^T
// and dp = A2 B2^T for the warp's 16 rows r0.. of the row-major A arrays and
// the 8 N rows of the B arrays (dK/dV kernel: S^T = K Q^T and dP^T = V dO^T;
// dQ kernel: S = Q K^T and dP = dO V^T). Shared arrays of D + kPad columns.
template <int D, int N>
__device__ __forceinline__ void RecomputeProducts(float (&s)[N][4], float (&dp)[N][4], const Bf16* a1, const Bf16* a2,
                                                  int r0, const Bf16* b1, const Bf16* b2, int lane) {
  constexpr int kLd = D + kPad;
#pragma unroll
  for (int nt = 0; nt < N; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) s[nt][e] = dp[nt][e] = 0.f;
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    uint32_t x1[4], x2[4];
    LoadA(x1, a1, kLd, r0, kk * 16, lane);
    LoadA(x2, a2, kLd, r0, kk * 16, lane);
#pragma unroll
    for (int np = 0; np < N / 2; ++np) {
      uint32_t bb[4];
      LoadB2(bb, b1, kLd, np * 16, kk * 16, lane);
      Mma(s[2 * np], x1, bb[0], bb[1]);
      Mma(s[2 * np + 1], x1, bb[2], bb[3]);
      LoadB2(bb, b2, kLd, np * 16, kk * 16, lane);
      Mma(dp[2 * np], x2, bb[0], bb[1]);
      Mma(dp[2 * np + 1], x2, bb[2], bb[3]);
    }
  }
}

// This thread's part of one row of a 16 x D accumulator block (half 0: row
// g, registers 0 and 1; half 1: row g + 8, registers 2 and 3) times scale, to
// dst (the row's first column 2 (lane % 4) of a token-major F32 tensor).
template <int D>
__device__ __forceinline__ void StoreAccRow(float* dst, const float (&acc)[D / 8][4], int half, float scale) {
#pragma unroll
  for (int dt = 0; dt < D / 8; ++dt) dst[dt * 8] = acc[dt][2 * half] * scale, dst[dt * 8 + 1] = acc[dt][2 * half + 1] * scale;
}

// The bf16 copies the kernels stage from (MakeBf16Copies below): dense
// [rows][heads * D], rows padded with zeros to a multiple of kCopyRows, so
// every tile the kernels copy (aligned to its height) lies inside.
struct Bf16Copies {
  const Bf16 *q = nullptr, *k = nullptr, *v = nullptr, *d_o = nullptr;  // q: scale * Q
  // Backward: per-query rows padded likewise (zeros past N), so a query tile
  // is copied asynchronously like its operands: lse log2(e) (the exponent
  // base the kernels use) and D = rowsum(dO * O) as [heads][rows], each
  // query's visible keys [lo, hi) as [rows].
  const float *lse = nullptr, *delta = nullptr;
  const int *lo = nullptr, *hi = nullptr;
  int64_t rows = 0;
};

// ROWS x D of a copy (ld elements per token row) from token row0, column col
// into shared rows of D + kPad, as 16-byte asynchronous copies (the caller
// commits and waits).
template <int D, int ROWS>
__device__ __forceinline__ void CopyTile(Bf16* s, const Bf16* g, int64_t ld, int64_t row0, int64_t col) {
  constexpr int kChunks = ROWS * D / 8, kRowChunks = D / 8;
  for (int c = threadIdx.x; c < kChunks; c += blockDim.x) {
    const int r = c / kRowChunks, x = (c - r * kRowChunks) * 8;
    CpAsync16(s + r * (D + kPad) + x, g + (row0 + r) * ld + col + x);
  }
}

// The visible-key ranges a warp's rows [r0, r0 + rows) need: the union
// [lo, hi) (tiles outside it are skipped) and the intersection
// [lo_all, hi_all) (tiles inside it need no mask). Both ends of a row's range
// are nondecreasing in the row (attention_visibility.h), so the first and last
// rows give them. rows <= 0: empty.
struct WarpKeys {
  int lo = 0, hi = 0, lo_all = 0, hi_all = 0;
  __device__ bool Skips(int t0, int width) const { return t0 >= hi || t0 + width <= lo; }
  __device__ bool Inside(int t0, int width) const { return t0 >= lo_all && t0 + width <= hi_all; }
};

__device__ __forceinline__ WarpKeys WarpKeyRange(const AttentionView<float>& p, int r0, int rows) {
  WarpKeys w;
  if (rows <= 0) return w;
  QueryKeyRange(p, r0, w.lo, w.hi_all);
  QueryKeyRange(p, r0 + rows - 1, w.lo_all, w.hi);
  return w;
}

// What a block of query rows (forward, dQ) knows of itself: its rows
// [q0, q0 + nq) of head h (kv head kvh), the keys any of them sees
// [block_lo, block_hi), the warp's rows from w0 and their key ranges, and this
// thread's two rows (C layout: ra = q0 + w0 + lane / 4, rb = ra + 8; rows at
// or past n see nothing) with their visible keys.
struct QueryBlock {
  int n, lane, t2, h, kvh, q0, nq, w0, block_lo, block_hi, ra, rb;
  int lo_a = 0, hi_a = 0, lo_b = 0, hi_b = 0;
  int64_t ldq, ldk;  // elements per token row of the Q (dO) and K (V) copies
  WarpKeys wk;
};

template <int D, int ROWS>
__device__ __forceinline__ QueryBlock MakeQueryBlock(const AttentionView<float>& p) {
  QueryBlock qb;
  qb.n = static_cast<int>(p.n), qb.lane = threadIdx.x & 31;
  qb.t2 = (qb.lane & 3) * 2;
  qb.h = blockIdx.y, qb.kvh = qb.h / static_cast<int>(p.group);
  qb.ldq = p.heads * D, qb.ldk = p.kv_heads * D;
  qb.q0 = blockIdx.x * ROWS, qb.nq = min(ROWS, qb.n - qb.q0);
  qb.w0 = (threadIdx.x >> 5) * kWarpRows;
  qb.wk = WarpKeyRange(p, qb.q0 + qb.w0, min(kWarpRows, qb.nq - qb.w0));
  int unused;
  QueryKeyRange(p, qb.q0, qb.block_lo, unused);
  QueryKeyRange(p, qb.q0 + qb.nq - 1, unused, qb.block_hi);
  qb.ra = qb.q0 + qb.w0 + (qb.lane >> 2), qb.rb = qb.ra + 8;
  if (qb.ra < qb.n) QueryKeyRange(p, qb.ra, qb.lo_a, qb.hi_a);
  if (qb.rb < qb.n) QueryKeyRange(p, qb.rb, qb.lo_b, qb.hi_b);
  return qb;
}

// ---------------------------------------------------------------- forward

template <int D, int WARPS>
struct FwdSmem {
  static constexpr int kLd = D + kPad, kRows = WARPS * kWarpRows;
  alignas(16) Bf16 q[kRows * kLd];        // scaled Q of the block's queries
  alignas(16) Bf16 k[2][kKeyTile * kLd];  // key tiles, double-buffered
  alignas(16) Bf16 v[2][kKeyTile * kLd];
};

template <int D, int WARPS>
__global__ void __launch_bounds__(32 * WARPS) MmaForwardKernel(AttentionView<float> p, Bf16Copies b) {
  extern __shared__ __align__(16) unsigned char mma_smem[];
  using S = FwdSmem<D, WARPS>;
  S& sm = *reinterpret_cast<S*>(mma_smem);
  constexpr int kLd = S::kLd, kBlockRows = S::kRows, kTileN = kKeyTile / 8;  // n8 products per key tile
  const QueryBlock qb = MakeQueryBlock<D, kBlockRows>(p);
  const int n = qb.n, lane = qb.lane, t2 = qb.t2, h = qb.h, kvh = qb.kvh, q0 = qb.q0, w0 = qb.w0;
  const int block_lo = qb.block_lo, block_hi = qb.block_hi, ra = qb.ra, rb = qb.rb;
  const int lo_a = qb.lo_a, hi_a = qb.hi_a, lo_b = qb.lo_b, hi_b = qb.hi_b;
  const int64_t ldq = qb.ldq, ldk = qb.ldk;
  const WarpKeys& wk = qb.wk;

  // Key tiles start on multiples of 64 (16-byte aligned copies); keys of a
  // tile before block_lo are masked like any other invisible key.
  const int first = block_lo / kKeyTile * kKeyTile;
  auto stage = [&](int buf, int t0) {
    CopyTile<D, kKeyTile>(sm.k[buf], b.k, ldk, t0, int64_t(kvh) * D);
    CopyTile<D, kKeyTile>(sm.v[buf], b.v, ldk, t0, int64_t(kvh) * D);
  };
  CopyTile<D, kBlockRows>(sm.q, b.q, ldq, q0, int64_t(h) * D);
  CpAsyncCommit();
  if (first < block_hi) stage(0, first);
  CpAsyncCommit();
  CpAsyncWait<1>();  // Q has landed
  __syncthreads();
  uint32_t qf[D / 16][4];
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) LoadA(qf[kk], sm.q, kLd, w0, kk * 16, lane);

  float o[D / 8][4];
#pragma unroll
  for (int dt = 0; dt < D / 8; ++dt) o[dt][0] = o[dt][1] = o[dt][2] = o[dt][3] = 0.f;
  float m_a = math::NegInf<float>(), m_b = m_a, l_a = 0.f, l_b = 0.f;  // l: this thread's columns only

  int buf = 0;
  for (int t0 = first; t0 < block_hi; t0 += kKeyTile, buf ^= 1) {
    if (t0 + kKeyTile < block_hi) stage(buf ^ 1, t0 + kKeyTile);  // the next tile, while this one computes
    CpAsyncCommit();
    CpAsyncWait<1>();  // this tile has landed
    __syncthreads();
    if (!wk.Skips(t0, kKeyTile)) {
      const Bf16 *ks = sm.k[buf], *vs = sm.v[buf];
      float s[kTileN][4];
#pragma unroll
      for (int nt = 0; nt < kTileN; ++nt) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.f;
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk)
#pragma unroll
        for (int np = 0; np < kTileN / 2; ++np) {
          uint32_t bb[4];
          LoadB2(bb, ks, kLd, np * 16, kk * 16, lane);
          Mma(s[2 * np], qf[kk], bb[0], bb[1]);
          Mma(s[2 * np + 1], qf[kk], bb[2], bb[3]);
        }
      if (!wk.Inside(t0, kKeyTile)) {
#pragma unroll
        for (int nt = 0; nt < kTileN; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int j = t0 + nt * 8 + t2 + (e & 1);
            const bool seen = e < 2 ? (j >= lo_a && j < hi_a) : (j >= lo_b && j < hi_b);
            if (!seen) s[nt][e] = math::NegInf<float>();
          }
      }
      // Online softmax on the registers: the quad (lanes 4g..4g+3) holds a row.
      float mx_a = math::NegInf<float>(), mx_b = mx_a;
#pragma unroll
      for (int nt = 0; nt < kTileN; ++nt) {
        mx_a = fmaxf(mx_a, fmaxf(s[nt][0], s[nt][1]));
        mx_b = fmaxf(mx_b, fmaxf(s[nt][2], s[nt][3]));
      }
#pragma unroll
      for (int x = 1; x <= 2; x <<= 1) {
        mx_a = fmaxf(mx_a, __shfl_xor_sync(0xffffffffu, mx_a, x));
        mx_b = fmaxf(mx_b, __shfl_xor_sync(0xffffffffu, mx_b, x));
      }
      const float new_a = fmaxf(m_a, mx_a), new_b = fmaxf(m_b, mx_b);
      const float alpha_a = math::SoftmaxRescale(m_a, new_a), alpha_b = math::SoftmaxRescale(m_b, new_b);
      m_a = new_a, m_b = new_b;
      const float shift_a = math::SoftmaxSafeMax(m_a) * kLog2e, shift_b = math::SoftmaxSafeMax(m_b) * kLog2e;
      float sum_a = 0.f, sum_b = 0.f;
#pragma unroll
      for (int nt = 0; nt < kTileN; ++nt) {
        s[nt][0] = Exp2(fmaf(s[nt][0], kLog2e, -shift_a));
        s[nt][1] = Exp2(fmaf(s[nt][1], kLog2e, -shift_a));
        s[nt][2] = Exp2(fmaf(s[nt][2], kLog2e, -shift_b));
        s[nt][3] = Exp2(fmaf(s[nt][3], kLog2e, -shift_b));
        sum_a += s[nt][0] + s[nt][1];
        sum_b += s[nt][2] + s[nt][3];
      }
      l_a = l_a * alpha_a + sum_a;
      l_b = l_b * alpha_b + sum_b;
#pragma unroll
      for (int dt = 0; dt < D / 8; ++dt) {
        o[dt][0] *= alpha_a, o[dt][1] *= alpha_a;
        o[dt][2] *= alpha_b, o[dt][3] *= alpha_b;
      }
      // O += P V, P straight from S's registers.
#pragma unroll
      for (int kc = 0; kc < kKeyTile / 16; ++kc) {
        uint32_t pa[4];
        AccToA(pa, s[2 * kc], s[2 * kc + 1]);
        MmaRowsB<D>(o, pa, vs, kc * 16, lane);
      }
    }
    __syncthreads();  // every warp is done with this buffer before it is refilled
  }
  CpAsyncWait<0>();

  // The quad's partial sums, added in the same order on every lane.
#pragma unroll
  for (int x = 1; x <= 2; x <<= 1) {
    l_a += __shfl_xor_sync(0xffffffffu, l_a, x);
    l_b += __shfl_xor_sync(0xffffffffu, l_b, x);
  }
  const float inv_a = math::SoftmaxInvSum(l_a), inv_b = math::SoftmaxInvSum(l_b);
  if (ra < n) {
    StoreAccRow<D>(p.o + int64_t(ra) * p.so + int64_t(h) * D + t2, o, 0, inv_a);
    if (t2 == 0) p.lse[int64_t(h) * p.slse + ra] = math::SoftmaxLse(m_a, l_a);
  }
  if (rb < n) {
    StoreAccRow<D>(p.o + int64_t(rb) * p.so + int64_t(h) * D + t2, o, 1, inv_b);
    if (t2 == 0) p.lse[int64_t(h) * p.slse + rb] = math::SoftmaxLse(m_b, l_b);
  }
}

// ---------------------------------------------------------------- backward: dK, dV

template <int D, int BQ, int WARPS>
struct KvSmem {
  static constexpr int kLd = D + kPad, kRows = WARPS * kWarpRows;
  alignas(16) Bf16 k[kRows * kLd];  // the block's keys (A operands)
  alignas(16) Bf16 v[kRows * kLd];
  alignas(16) Bf16 q[2][BQ * kLd];       // query tiles (scaled Q, dO), double-buffered
  alignas(16) Bf16 d_o[2][BQ * kLd];
  alignas(16) float lse[2][BQ];          // per query: lse log2(e), D
  alignas(16) float delta[2][BQ];
  alignas(16) int lo[2][BQ];             // each query's visible keys
  alignas(16) int hi[2][BQ];
};

template <int D, int BQ, int WARPS, int MIN_BLOCKS>
__global__ void __launch_bounds__(32 * WARPS, MIN_BLOCKS) MmaBackwardKvKernel(AttentionView<float> p, Bf16Copies b) {
  extern __shared__ __align__(16) unsigned char mma_smem[];
  using S = KvSmem<D, BQ, WARPS>;
  S& sm = *reinterpret_cast<S*>(mma_smem);
  constexpr int kLd = S::kLd, kBlockRows = S::kRows, kTileN = BQ / 8;
  const int n = static_cast<int>(p.n), lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int t2 = (lane & 3) * 2;
  const int kvh = blockIdx.y, group = static_cast<int>(p.group);
  const int64_t ldq = p.heads * D, ldk = p.kv_heads * D;
  const int j0 = blockIdx.x * kBlockRows, nk = min(kBlockRows, n - j0);
  const int w0 = warp * kWarpRows, wkeys = min(kWarpRows, nk - w0);
  // Queries that see a key of the block, and of the warp's keys.
  const int q_begin = static_cast<int>(math::FirstQuerySeeing(p.mask, j0)), q_end = QueryHi(p, j0 + nk - 1);
  int wq_begin = 0, wq_end = 0;
  if (wkeys > 0) {
    wq_begin = static_cast<int>(math::FirstQuerySeeing(p.mask, j0 + w0));
    wq_end = QueryHi(p, j0 + w0 + wkeys - 1);
  }
  const int ja = j0 + w0 + (lane >> 2), jb = ja + 8;  // this thread's key rows

  // Steps: (query head of the group, query tile), tiles on multiples of BQ.
  const int first = q_begin / BQ * BQ;
  const int tiles = first < q_end ? (q_end - first + BQ - 1) / BQ : 0, steps = group * tiles;
  auto stage = [&](int step, int buf) {
    const int hh = step / tiles, t0 = first + (step - hh * tiles) * BQ, h = kvh * group + hh;
    CopyTile<D, BQ>(sm.q[buf], b.q, ldq, t0, int64_t(h) * D);
    CopyTile<D, BQ>(sm.d_o[buf], b.d_o, ldq, t0, int64_t(h) * D);
    for (int r = threadIdx.x; r < BQ; r += blockDim.x) {  // queries past the end: lo = hi = 0
      const int64_t i = t0 + r, hi_row = int64_t(h) * b.rows + i;
      CpAsync4(&sm.lo[buf][r], b.lo + i);
      CpAsync4(&sm.hi[buf][r], b.hi + i);
      CpAsync4(&sm.lse[buf][r], b.lse + hi_row);
      CpAsync4(&sm.delta[buf][r], b.delta + hi_row);
    }
  };
  CopyTile<D, kBlockRows>(sm.k, b.k, ldk, j0, int64_t(kvh) * D);
  CopyTile<D, kBlockRows>(sm.v, b.v, ldk, j0, int64_t(kvh) * D);
  if (steps > 0) stage(0, 0);
  CpAsyncCommit();

  float dk[D / 8][4], dv[D / 8][4];
#pragma unroll
  for (int dt = 0; dt < D / 8; ++dt)
#pragma unroll
    for (int e = 0; e < 4; ++e) dk[dt][e] = dv[dt][e] = 0.f;

  int buf = 0;
  for (int step = 0; step < steps; ++step, buf ^= 1) {
    if (step + 1 < steps) stage(step + 1, buf ^ 1);
    CpAsyncCommit();
    CpAsyncWait<1>();
    __syncthreads();
    const int t0 = first + (step % tiles) * BQ;
    if (wkeys > 0 && t0 < wq_end && t0 + BQ > wq_begin) {
      const Bf16 *qs = sm.q[buf], *dos = sm.d_o[buf];
      const int *lo = sm.lo[buf], *hi = sm.hi[buf];
      const float *lse = sm.lse[buf], *dd = sm.delta[buf];
      // S^T = K (scale Q)^T and dP^T = V dO^T: the warp's 16 keys x BQ queries.
      float s[kTileN][4], dp[kTileN][4];
      RecomputeProducts<D>(s, dp, sm.k, sm.v, w0, qs, dos, lane);
      // P^T = exp(S^T - lse) where visible, dS^T = P^T (dP^T - D). Every
      // query of the tile sees all 16 keys of the warp when the last query's
      // first key and the first query's end bound them (ranges are monotone).
      const bool inside = wkeys == kWarpRows && t0 + BQ <= n && lo[BQ - 1] <= j0 + w0 &&
                          hi[0] >= j0 + w0 + kWarpRows;
#pragma unroll
      for (int nt = 0; nt < kTileN; ++nt) {
        const int c = nt * 8 + t2;
        const float2 l2 = *reinterpret_cast<const float2*>(lse + c);
        const float2 d2 = *reinterpret_cast<const float2*>(dd + c);
        int2 lo2 = make_int2(0, 0), hi2 = make_int2(0, 0);
        if (!inside) lo2 = *reinterpret_cast<const int2*>(lo + c), hi2 = *reinterpret_cast<const int2*>(hi + c);
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int j = e < 2 ? ja : jb;
          const bool odd = e & 1;
          const bool seen = inside || (j >= (odd ? lo2.y : lo2.x) && j < (odd ? hi2.y : hi2.x));
          const float pr = seen ? Exp2(fmaf(s[nt][e], kLog2e, -(odd ? l2.y : l2.x))) : 0.f;
          dp[nt][e] = math::SoftmaxGradScore(pr, dp[nt][e], odd ? d2.y : d2.x);
          s[nt][e] = pr;
        }
      }
      // dV += P^T dO, dK += dS^T (scale Q): B from the query rows, transposed.
#pragma unroll
      for (int kc = 0; kc < BQ / 16; ++kc) {
        uint32_t pa[4], da[4];
        AccToA(pa, s[2 * kc], s[2 * kc + 1]);
        AccToA(da, dp[2 * kc], dp[2 * kc + 1]);
#pragma unroll
        for (int dn = 0; dn < D / 16; ++dn) {
          uint32_t bb[4];
          LoadB2Trans(bb, dos, kLd, kc * 16, dn * 16, lane);
          Mma(dv[2 * dn], pa, bb[0], bb[1]);
          Mma(dv[2 * dn + 1], pa, bb[2], bb[3]);
          LoadB2Trans(bb, qs, kLd, kc * 16, dn * 16, lane);
          Mma(dk[2 * dn], da, bb[0], bb[1]);
          Mma(dk[2 * dn + 1], da, bb[2], bb[3]);
        }
      }
    }
    __syncthreads();  // every warp is done with this buffer before it is refilled
  }
  CpAsyncWait<0>();

  if (ja < j0 + nk) {
    StoreAccRow<D>(p.dk + int64_t(ja) * p.sdk + int64_t(kvh) * D + t2, dk, 0, 1.f);
    StoreAccRow<D>(p.dv + int64_t(ja) * p.sdv + int64_t(kvh) * D + t2, dv, 0, 1.f);
  }
  if (jb < j0 + nk) {
    StoreAccRow<D>(p.dk + int64_t(jb) * p.sdk + int64_t(kvh) * D + t2, dk, 1, 1.f);
    StoreAccRow<D>(p.dv + int64_t(jb) * p.sdv + int64_t(kvh) * D + t2, dv, 1, 1.f);
  }
}

// ---------------------------------------------------------------- backward: dQ

template <int D, int BK, int WARPS>
struct QSmem {
  static constexpr int kLd = D + kPad, kRows = WARPS * kWarpRows;
  alignas(16) Bf16 q[kRows * kLd];  // the block's queries: scaled Q and dO (A operands)
  alignas(16) Bf16 d_o[kRows * kLd];
  alignas(16) Bf16 k[2][BK * kLd];       // key tiles, double-buffered
  alignas(16) Bf16 v[2][BK * kLd];
};

template <int D, int BK, int WARPS>
__global__ void __launch_bounds__(32 * WARPS) MmaBackwardQKernel(AttentionView<float> p, Bf16Copies b) {
  extern __shared__ __align__(16) unsigned char mma_smem[];
  using S = QSmem<D, BK, WARPS>;
  S& sm = *reinterpret_cast<S*>(mma_smem);
  constexpr int kBlockRows = S::kRows, kTileN = BK / 8;
  const QueryBlock qb = MakeQueryBlock<D, kBlockRows>(p);
  const int n = qb.n, lane = qb.lane, t2 = qb.t2, h = qb.h, kvh = qb.kvh, q0 = qb.q0, w0 = qb.w0;
  const int block_lo = qb.block_lo, block_hi = qb.block_hi, ra = qb.ra, rb = qb.rb;
  const int lo_a = qb.lo_a, hi_a = qb.hi_a, lo_b = qb.lo_b, hi_b = qb.hi_b;
  const int64_t ldq = qb.ldq, ldk = qb.ldk;
  const WarpKeys& wk = qb.wk;
  float lse_a = 0.f, lse_b = 0.f, d_a = 0.f, d_b = 0.f;
  if (ra < n) lse_a = b.lse[int64_t(h) * b.rows + ra], d_a = b.delta[int64_t(h) * b.rows + ra];
  if (rb < n) lse_b = b.lse[int64_t(h) * b.rows + rb], d_b = b.delta[int64_t(h) * b.rows + rb];

  const int first = block_lo / BK * BK;
  auto stage = [&](int buf, int t0) {
    CopyTile<D, BK>(sm.k[buf], b.k, ldk, t0, int64_t(kvh) * D);
    CopyTile<D, BK>(sm.v[buf], b.v, ldk, t0, int64_t(kvh) * D);
  };
  CopyTile<D, kBlockRows>(sm.q, b.q, ldq, q0, int64_t(h) * D);
  CopyTile<D, kBlockRows>(sm.d_o, b.d_o, ldq, q0, int64_t(h) * D);
  if (first < block_hi) stage(0, first);
  CpAsyncCommit();

  float dq[D / 8][4];
#pragma unroll
  for (int dt = 0; dt < D / 8; ++dt) dq[dt][0] = dq[dt][1] = dq[dt][2] = dq[dt][3] = 0.f;

  int buf = 0;
  for (int t0 = first; t0 < block_hi; t0 += BK, buf ^= 1) {
    if (t0 + BK < block_hi) stage(buf ^ 1, t0 + BK);
    CpAsyncCommit();
    CpAsyncWait<1>();
    __syncthreads();
    if (!wk.Skips(t0, BK)) {
      const Bf16 *ks = sm.k[buf], *vs = sm.v[buf];
      float s[kTileN][4], dp[kTileN][4];
      RecomputeProducts<D>(s, dp, sm.q, sm.d_o, w0, ks, vs, lane);
      // dS = P (dP - D), P = exp(S - lse) where visible; kept in s.
      const bool inside = wk.Inside(t0, BK);
#pragma unroll
      for (int nt = 0; nt < kTileN; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int j = t0 + nt * 8 + t2 + (e & 1);
          const bool seen = inside || (e < 2 ? (j >= lo_a && j < hi_a) : (j >= lo_b && j < hi_b));
          const float pr = seen ? Exp2(fmaf(s[nt][e], kLog2e, -(e < 2 ? lse_a : lse_b))) : 0.f;
          s[nt][e] = math::SoftmaxGradScore(pr, dp[nt][e], e < 2 ? d_a : d_b);
        }
      // dQ += dS K: B from the key rows, transposed.
#pragma unroll
      for (int kc = 0; kc < BK / 16; ++kc) {
        uint32_t da[4];
        AccToA(da, s[2 * kc], s[2 * kc + 1]);
        MmaRowsB<D>(dq, da, ks, kc * 16, lane);
      }
    }
    __syncthreads();  // every warp is done with this buffer before it is refilled
  }
  CpAsyncWait<0>();

  if (ra < n) StoreAccRow<D>(p.dq + int64_t(ra) * p.sdq + int64_t(h) * D + t2, dq, 0, p.scale);
  if (rb < n) StoreAccRow<D>(p.dq + int64_t(rb) * p.sdq + int64_t(h) * D + t2, dq, 1, p.scale);
}

// ---------------------------------------------------------------- bf16 copies

// dst[r][c] = bf16(scale * src[r * ld + c]) for r < rows, zeros for
// rows <= r < padded_rows; c < cols.
__global__ void ToBf16Kernel(const float* src, int64_t ld, int64_t rows, int64_t padded_rows, int64_t cols,
                             float scale, Bf16* dst) {
  const int64_t total = padded_rows * cols;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / cols, c = i - r * cols;
    dst[i] = __float2bfloat16_rn(r < rows ? scale * src[r * ld + c] : 0.f);
  }
}

// The backward's per-query rows (Bf16Copies): for h < heads, i < rows
// (zeros from n on): lse log2(e), D = dO . O (accumulated in double, as attention.cu's
// D), and for h = 0 the query's visible keys.
__global__ void RowStatsKernel(AttentionView<float> p, int64_t rows, float* lse, float* delta, int* lo, int* hi) {
  const int64_t total = p.heads * rows;
  for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < total;
       idx += int64_t(gridDim.x) * blockDim.x) {
    const int64_t h = idx / rows, i = idx - h * rows;
    float l = 0.f, dd = 0.f;
    int a = 0, e = 0;
    if (i < p.n) {
      const float* orow = p.o + i * p.so + h * p.d;
      const float* dorow = p.d_o + i * p.sdo + h * p.d;
      double sum = 0;
      for (int64_t x = 0; x < p.d; ++x) sum += static_cast<double>(orow[x]) * static_cast<double>(dorow[x]);
      dd = static_cast<float>(sum);
      l = p.lse[h * p.slse + i] * kLog2e;
      if (h == 0) QueryKeyRange(p, static_cast<int>(i), a, e);
    }
    lse[idx] = l, delta[idx] = dd;
    if (h == 0) lo[i] = a, hi[i] = e;
  }
}

// ---------------------------------------------------------------- launch

// One configuration of the three kernels: warps per block (16 rows each) and
// the inner tile (queries of the dK/dV kernel, keys of the dQ kernel).
template <int D, int FWD_WARPS, int KV_BQ, int KV_WARPS, int Q_BK, int Q_WARPS, int KV_MIN_BLOCKS = 1>
struct MmaConfig {
  using Fwd = FwdSmem<D, FWD_WARPS>;
  using Kv = KvSmem<D, KV_BQ, KV_WARPS>;
  using Q = QSmem<D, Q_BK, Q_WARPS>;
  static size_t MostSmem() { return std::max({sizeof(Fwd), sizeof(Kv), sizeof(Q)}); }
};

// The configuration per head_dim, the fastest of those tried
// (docs/BENCHMARKS.md, "Tensor-core attention on the H200"): at head_dim 64,
// 8-warp forward blocks, and dK/dV blocks held to 168 registers so that three
// fit an SM (12 bytes spilled): more resident blocks hide more latency than
// the spill costs. At 128, 32-query tiles keep dK, dV (128 fp32 registers per
// thread) and the tile's S^T, dP^T in registers, and 32-key dQ tiles fit
// three blocks per SM instead of two.
template <int D>
struct DefaultConfig : MmaConfig<D, 8, 64, 4, 64, 4, 3> {};
template <>
struct DefaultConfig<128> : MmaConfig<128, 4, 32, 4, 32, 4, 1> {};

// f(std::integral_constant<int, D>) for the head_dims built here; false for others.
template <class F>
bool WithHeadDim(int64_t d, F&& f) {
  switch (d) {
    case 32: f(std::integral_constant<int, 32>{}); return true;
    case 64: f(std::integral_constant<int, 64>{}); return true;
    case 128: f(std::integral_constant<int, 128>{}); return true;
    default: return false;
  }
}

template <class Smem, int WARPS, class Kernel, class... Args>
void LaunchMma(const Context& c, Kernel kernel, int64_t rows, unsigned grid_y, Args... args) {
  const size_t smem = sizeof(Smem);
  LONGCTX_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  const int64_t block_rows = WARPS * kWarpRows;
  const dim3 grid(static_cast<unsigned>((rows + block_rows - 1) / block_rows), grid_y);
  kernel<<<grid, 32 * WARPS, smem, c.stream>>>(args...);
  LONGCTX_CUDA_LAUNCHED();
}

int64_t RoundUpToCopyRows(int64_t rows) { return (rows + kCopyRows - 1) / kCopyRows * kCopyRows; }
size_t Aligned256(size_t bytes) { return (bytes + 255) / 256 * 256; }

// The bf16 copies of one call in the workspace (Slot::kAttnBf16): scale * Q
// and K, V (and dO for the backward), [rows rounded up to 128][heads * d].
Bf16Copies MakeBf16Copies(const Context& c, const AttentionView<float>& v, int64_t keys, bool backward) {
  const int64_t q_rows = RoundUpToCopyRows(v.n), k_rows = RoundUpToCopyRows(keys);
  const int64_t q_cols = v.heads * v.d, k_cols = v.kv_heads * v.d;
  const size_t q_bytes = Aligned256(static_cast<size_t>(q_rows * q_cols) * sizeof(Bf16));
  const size_t k_bytes = Aligned256(static_cast<size_t>(k_rows * k_cols) * sizeof(Bf16));
  // Backward row stats: lse and D ([heads][q_rows] floats), lo and hi ([q_rows] ints).
  const size_t stat_bytes = Aligned256(static_cast<size_t>(v.heads * q_rows) * sizeof(float));
  const size_t range_bytes = Aligned256(static_cast<size_t>(q_rows) * sizeof(int));
  const size_t copy_bytes = (backward ? 2 * q_bytes : q_bytes) + 2 * k_bytes;
  char* base = static_cast<char*>(c.workspace->Get(
      Slot::kAttnBf16, copy_bytes + (backward ? 2 * stat_bytes + 2 * range_bytes : 0)));
  Bf16* q = reinterpret_cast<Bf16*>(base);
  Bf16* k = reinterpret_cast<Bf16*>(base + q_bytes);
  Bf16* val = reinterpret_cast<Bf16*>(base + q_bytes + k_bytes);
  Bf16* d_o = backward ? reinterpret_cast<Bf16*>(base + q_bytes + 2 * k_bytes) : nullptr;
  auto convert = [&](const float* src, int64_t ld, int64_t rows, int64_t padded, int64_t cols, float scale,
                     Bf16* dst) {
    ToBf16Kernel<<<GridFor(padded * cols), kThreads, 0, c.stream>>>(src, ld, rows, padded, cols, scale, dst);
    LONGCTX_CUDA_LAUNCHED();
  };
  convert(v.q, v.sq, v.n, q_rows, q_cols, v.scale, q);
  convert(v.k, v.sk, keys, k_rows, k_cols, 1.f, k);
  convert(v.v, v.sv, keys, k_rows, k_cols, 1.f, val);
  if (backward) convert(v.d_o, v.sdo, v.n, q_rows, q_cols, 1.f, d_o);
  Bf16Copies out;
  out.q = q, out.k = k, out.v = val, out.d_o = d_o;
  if (backward) {
    char* stats = base + copy_bytes;
    float* lse = reinterpret_cast<float*>(stats);
    float* delta = reinterpret_cast<float*>(stats + stat_bytes);
    int* lo = reinterpret_cast<int*>(stats + 2 * stat_bytes);
    int* hi = reinterpret_cast<int*>(stats + 2 * stat_bytes + range_bytes);
    RowStatsKernel<<<GridFor(v.heads * q_rows), kThreads, 0, c.stream>>>(v, q_rows, lse, delta, lo, hi);
    LONGCTX_CUDA_LAUNCHED();
    out.lse = lse, out.delta = delta, out.lo = lo, out.hi = hi, out.rows = q_rows;
  }
  return out;
}

template <int D, int FWD_WARPS, int KV_BQ, int KV_WARPS, int Q_BK, int Q_WARPS, int KV_MIN_BLOCKS>
void RunForward(const Context& c, const AttentionView<float>& v, const Bf16Copies& b,
                MmaConfig<D, FWD_WARPS, KV_BQ, KV_WARPS, Q_BK, Q_WARPS, KV_MIN_BLOCKS>) {
  LaunchMma<FwdSmem<D, FWD_WARPS>, FWD_WARPS>(c, MmaForwardKernel<D, FWD_WARPS>, v.n,
                                              static_cast<unsigned>(v.heads), v, b);
}

template <int D, int FWD_WARPS, int KV_BQ, int KV_WARPS, int Q_BK, int Q_WARPS, int KV_MIN_BLOCKS>
void RunBackward(const Context& c, const AttentionView<float>& v, const Bf16Copies& b,
                 MmaConfig<D, FWD_WARPS, KV_BQ, KV_WARPS, Q_BK, Q_WARPS, KV_MIN_BLOCKS>) {
  LaunchMma<KvSmem<D, KV_BQ, KV_WARPS>, KV_WARPS>(c, MmaBackwardKvKernel<D, KV_BQ, KV_WARPS, KV_MIN_BLOCKS>, v.n,
                                                  static_cast<unsigned>(v.kv_heads), v, b);
  LaunchMma<QSmem<D, Q_BK, Q_WARPS>, Q_WARPS>(c, MmaBackwardQKernel<D, Q_BK, Q_WARPS>, v.n,
                                              static_cast<unsigned>(v.heads), v, b);
}

}  // namespace

bool AttentionMmaUsable(const Context& c, const AttentionView<float>& v) {
  // bf16 mma.sync and cp.async need sm_80 (mma_sync.cuh); older GPUs keep
  // the scalar kernels.
  if (!c.bf16_matmul || c.compute_capability < 80) return false;
  size_t smem = 0;
  if (!WithHeadDim(v.d, [&](auto dim) { smem = DefaultConfig<decltype(dim)::value>::MostSmem(); })) return false;
  return smem <= static_cast<size_t>(c.max_smem_per_block);
}

void AttentionForwardMma(const Context& c, const AttentionView<float>& v, int64_t keys) {
  const Bf16Copies b = MakeBf16Copies(c, v, keys, /*backward=*/false);
  WithHeadDim(v.d, [&](auto dim) {
    RunForward(c, v, b, DefaultConfig<decltype(dim)::value>{});
  });
}

void AttentionBackwardMma(const Context& c, const AttentionView<float>& v) {
  const Bf16Copies b = MakeBf16Copies(c, v, v.n, /*backward=*/true);
  WithHeadDim(v.d, [&](auto dim) {
    RunBackward(c, v, b, DefaultConfig<decltype(dim)::value>{});
  });
}

}  // namespace longctx::cuda
