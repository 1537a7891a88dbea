// Why: the scalar CUDA attention (attention.cu) runs at under 1 % of an
// H200's bf16 tensor-core peak, so a 16K-token step is attention-bound. At
// precision bf16 these kernels run FlashAttention-2 on the tensor cores
// instead: warp-level mma.sync.m16n8k16 (bf16 operands, fp32 accumulation),
// which every GPU from sm_80 on runs, Hopper included.
//
// Structure (FlashAttention-2, Dao 2023), 4 warps per block, 16 rows per warp:
//  * forward: one block per (64 queries, head). The scaled Q tile is rounded
//    to bf16 once; each key tile of 64 keys is staged in shared memory as K
//    (rows) and V transposed, so every operand fragment is one 32-bit load
//    from a row. S = Q K^T lands in registers; the online softmax (row max by
//    quad shuffles, fp32 sums) works on those registers, and P, rounded to
//    bf16, is the A operand of O += P V straight from S's accumulator layout
//    (no trip through shared memory). Only key tiles some row of the block can
//    see are loaded (causal, window, document: the visibility rule of
//    kernels/math/attention_visibility.h); a warp skips tiles none of its rows
//    sees and masks only the tiles its rows see in part.
//  * backward, as attention.cu's: D = rowsum(dO * O) first, then two kernels
//    without atomics (bitwise repeatable): one block per (64 keys, kv head)
//    owns dK, dV of its keys over the GQA group's query heads (S^T = K Q^T,
//    dP^T = V dO^T, dV += P^T dO, dK += dS^T Q), one block per (64 queries,
//    head) owns dQ (S, dP, dQ += dS K).
// What is rounded to bf16: scale * Q, K, V, P, dO, dS (the operands of the
// products); max, sums, lse, D and every accumulator stay fp32. The CPU's
// bf16 attention rounds the same operands (attention_packed_bf16.h), so the
// two agree to bf16 accuracy, not bit for bit (exp and summation orders
// differ). tests/kernels/backend_consistency_test.cc checks both against the
// fp32 op.
//
// Not done here (measured first, docs/BENCHMARKS.md): Hopper's wgmma and TMA
// (FlashAttention-3), cp.async double buffering. Global loads are F32 (the
// model's activations), converted while staging.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "kernels/cuda/attention_mma.cuh"
#include "kernels/cuda/attention_rows.cuh"
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/math/online_softmax.h"

namespace longctx::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kMmaThreads = 32 * kWarps;
constexpr int kWarpRows = 16;                  // rows of one m16n8k16 A operand
constexpr int kBlockRows = kWarps * kWarpRows;  // queries (forward, dQ) or keys (dK, dV) per block
// bf16 elements of padding per shared-memory row: with it, the 32 lanes'
// 32-bit fragment loads (row lane/4, word lane%4) fall in 32 distinct banks.
constexpr int kPad = 8;

using Bf16 = __nv_bfloat16;

// d += a * b: one m16n8k16 tensor-core product, bf16 operands, fp32 accumulators.
__device__ __forceinline__ void Mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two fp32 values as a bf16 pair (round to nearest even), lo in the low half.
__device__ __forceinline__ uint32_t PackBf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// The bf16 pair at column x (even) of row r of a shared array with leading dimension ld.
__device__ __forceinline__ uint32_t Pair(const Bf16* s, int ld, int r, int x) {
  return *reinterpret_cast<const uint32_t*>(s + r * ld + x);
}

// The A fragment (16 x 16, row-major) at rows r0.., columns k0.. of a shared
// array: PTX's layout for m16n8k16 (lane = 4 g + t: rows g and g + 8,
// columns 2t, 2t + 1 and those + 8).
__device__ __forceinline__ void LoadA(uint32_t (&a)[4], const Bf16* s, int ld, int r0, int k0, int lane) {
  const int g = lane >> 2, t = (lane & 3) * 2;
  a[0] = Pair(s, ld, r0 + g, k0 + t);
  a[1] = Pair(s, ld, r0 + g + 8, k0 + t);
  a[2] = Pair(s, ld, r0 + g, k0 + t + 8);
  a[3] = Pair(s, ld, r0 + g + 8, k0 + t + 8);
}

// The B fragment (16 x 8, k x n) whose column n is row n0 + n of a shared
// array (k along the row): lane 4 g + t holds k = 2t, 2t + 1 and those + 8 of column g.
__device__ __forceinline__ void LoadB(uint32_t& b0, uint32_t& b1, const Bf16* s, int ld, int n0, int k0, int lane) {
  const int g = lane >> 2, t = (lane & 3) * 2;
  b0 = Pair(s, ld, n0 + g, k0 + t);
  b1 = Pair(s, ld, n0 + g, k0 + t + 8);
}

// FlashAttention-2's register reuse: the accumulators of two adjacent n8
// products (C layout: rows g and g + 8, columns 2t, 2t + 1) are, rounded to
// bf16, the A fragment of the 16 x 16 block they form.
__device__ __forceinline__ void AccToA(uint32_t (&a)[4], const float (&c0)[4], const float (&c1)[4]) {
  a[0] = PackBf16(c0[0], c0[1]);
  a[1] = PackBf16(c0[2], c0[3]);
  a[2] = PackBf16(c1[0], c1[1]);
  a[3] = PackBf16(c1[2], c1[3]);
}

// rows x D of a token-major F32 tensor (rows row0.., columns col.., row
// stride ld) times `scale`, rounded to bf16, into shared memory: row-major
// (leading dimension D + kPad) into dst and/or transposed (leading dimension
// ld_t) into dst_t. Rows from `valid` on are zeros (keys past the tile's end
// must not bring NaN into P V).
template <int D>
__device__ __forceinline__ void StageRows(Bf16* dst, Bf16* dst_t, int ld_t, int rows, const float* src, int64_t ld,
                                          int64_t col, int row0, int valid, float scale) {
  for (int e = threadIdx.x; e < rows * D; e += kMmaThreads) {
    const int r = e / D, x = e - r * D;
    const float v = r < valid ? scale * src[static_cast<int64_t>(row0 + r) * ld + col + x] : 0.f;
    const Bf16 b = __float2bfloat16_rn(v);
    if (dst != nullptr) dst[r * (D + kPad) + x] = b;
    if (dst_t != nullptr) dst_t[x * ld_t + r] = b;
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

// ---------------------------------------------------------------- forward

template <int D>
struct FwdSmem {
  static constexpr int kLd = D + kPad, kLdT = kBlockRows + kPad;
  Bf16 q[kBlockRows * kLd];   // scaled Q of the block's 64 queries
  Bf16 k[kBlockRows * kLd];   // a key tile, 64 keys
  Bf16 vt[D * kLdT];          // its V, transposed
};

template <int D>
__global__ void __launch_bounds__(kMmaThreads) MmaForwardKernel(AttentionView<float> p) {
  extern __shared__ __align__(16) unsigned char mma_smem[];
  using S = FwdSmem<D>;
  S& sm = *reinterpret_cast<S*>(mma_smem);
  constexpr int kTileN = kBlockRows / 8;  // n8 products per key tile
  const int n = static_cast<int>(p.n), lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t2 = (lane & 3) * 2;
  const int h = blockIdx.y, kvh = h / static_cast<int>(p.group);
  const int q0 = blockIdx.x * kBlockRows, nq = min(kBlockRows, n - q0);
  const int w0 = warp * kWarpRows;
  const WarpKeys wk = WarpKeyRange(p, q0 + w0, min(kWarpRows, nq - w0));
  int block_lo, block_hi, unused;
  QueryKeyRange(p, q0, block_lo, unused);
  QueryKeyRange(p, q0 + nq - 1, unused, block_hi);
  // This thread's two rows (C layout): ra = q0 + w0 + g and rb = ra + 8.
  const int ra = q0 + w0 + g, rb = ra + 8;
  int lo_a = 0, hi_a = 0, lo_b = 0, hi_b = 0;
  if (ra < n) QueryKeyRange(p, ra, lo_a, hi_a);
  if (rb < n) QueryKeyRange(p, rb, lo_b, hi_b);

  StageRows<D>(sm.q, nullptr, 0, kBlockRows, p.q, p.sq, int64_t(h) * D, q0, nq, p.scale);
  __syncthreads();
  uint32_t qf[D / 16][4];
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) LoadA(qf[kk], sm.q, S::kLd, w0, kk * 16, lane);

  float o[D / 8][4];
#pragma unroll
  for (int dt = 0; dt < D / 8; ++dt) o[dt][0] = o[dt][1] = o[dt][2] = o[dt][3] = 0.f;
  float m_a = math::NegInf<float>(), m_b = m_a, l_a = 0.f, l_b = 0.f;  // l: this thread's columns only

  for (int t0 = block_lo; t0 < block_hi; t0 += kBlockRows) {
    const int nk = min(kBlockRows, block_hi - t0);
    __syncthreads();  // the previous tile's readers are done
    StageRows<D>(sm.k, nullptr, 0, kBlockRows, p.k, p.sk, int64_t(kvh) * D, t0, nk, 1.f);
    StageRows<D>(nullptr, sm.vt, S::kLdT, kBlockRows, p.v, p.sv, int64_t(kvh) * D, t0, nk, 1.f);
    __syncthreads();
    if (wk.Skips(t0, kBlockRows)) continue;

    float s[kTileN][4];
#pragma unroll
    for (int nt = 0; nt < kTileN; ++nt) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
#pragma unroll
      for (int nt = 0; nt < kTileN; ++nt) {
        uint32_t b0, b1;
        LoadB(b0, b1, sm.k, S::kLd, nt * 8, kk * 16, lane);
        Mma(s[nt], qf[kk], b0, b1);
      }
    if (!wk.Inside(t0, kBlockRows)) {
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
    const float shift_a = math::SoftmaxSafeMax(m_a), shift_b = math::SoftmaxSafeMax(m_b);
    float sum_a = 0.f, sum_b = 0.f;
#pragma unroll
    for (int nt = 0; nt < kTileN; ++nt) {
      s[nt][0] = __expf(s[nt][0] - shift_a);
      s[nt][1] = __expf(s[nt][1] - shift_a);
      s[nt][2] = __expf(s[nt][2] - shift_b);
      s[nt][3] = __expf(s[nt][3] - shift_b);
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
    for (int kc = 0; kc < kBlockRows / 16; ++kc) {
      uint32_t pa[4];
      AccToA(pa, s[2 * kc], s[2 * kc + 1]);
#pragma unroll
      for (int dt = 0; dt < D / 8; ++dt) {
        uint32_t b0, b1;
        LoadB(b0, b1, sm.vt, S::kLdT, dt * 8, kc * 16, lane);
        Mma(o[dt], pa, b0, b1);
      }
    }
  }

  // The quad's partial sums, added in the same order on every lane.
#pragma unroll
  for (int x = 1; x <= 2; x <<= 1) {
    l_a += __shfl_xor_sync(0xffffffffu, l_a, x);
    l_b += __shfl_xor_sync(0xffffffffu, l_b, x);
  }
  const float inv_a = math::SoftmaxInvSum(l_a), inv_b = math::SoftmaxInvSum(l_b);
  if (ra < n) {
    float* orow = p.o + int64_t(ra) * p.so + int64_t(h) * D + t2;
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt) orow[dt * 8] = o[dt][0] * inv_a, orow[dt * 8 + 1] = o[dt][1] * inv_a;
    if (t2 == 0) p.lse[int64_t(h) * p.slse + ra] = math::SoftmaxLse(m_a, l_a);
  }
  if (rb < n) {
    float* orow = p.o + int64_t(rb) * p.so + int64_t(h) * D + t2;
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt) orow[dt * 8] = o[dt][2] * inv_b, orow[dt * 8 + 1] = o[dt][3] * inv_b;
    if (t2 == 0) p.lse[int64_t(h) * p.slse + rb] = math::SoftmaxLse(m_b, l_b);
  }
}

// ---------------------------------------------------------------- backward: dK, dV

template <int D, int BQ>
struct KvSmem {
  static constexpr int kLd = D + kPad, kLdT = BQ + kPad;
  Bf16 k[kBlockRows * kLd];  // the block's 64 keys (A operands)
  Bf16 v[kBlockRows * kLd];
  Bf16 q[BQ * kLd];          // a query tile: scaled Q and dO as B of S^T, dP^T
  Bf16 d_o[BQ * kLd];
  Bf16 qt[D * kLdT];         // ... and transposed, as B of dK, dV
  Bf16 dot[D * kLdT];
  float lse[BQ], delta[BQ];
  int lo[BQ], hi[BQ];        // each query's visible keys
};

template <int D, int BQ>
__global__ void __launch_bounds__(kMmaThreads) MmaBackwardKvKernel(AttentionView<float> p, const float* delta) {
  extern __shared__ __align__(16) unsigned char mma_smem[];
  using S = KvSmem<D, BQ>;
  S& sm = *reinterpret_cast<S*>(mma_smem);
  constexpr int kTileN = BQ / 8;
  const int n = static_cast<int>(p.n), lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t2 = (lane & 3) * 2;
  const int kvh = blockIdx.y, group = static_cast<int>(p.group);
  const int j0 = blockIdx.x * kBlockRows, nk = min(kBlockRows, n - j0);
  const int w0 = warp * kWarpRows, wkeys = min(kWarpRows, nk - w0);
  // Queries that see a key of the block, and of the warp's keys.
  const int q_begin = static_cast<int>(math::FirstQuerySeeing(p.mask, j0)), q_end = QueryHi(p, j0 + nk - 1);
  int wq_begin = 0, wq_end = 0;
  if (wkeys > 0) {
    wq_begin = static_cast<int>(math::FirstQuerySeeing(p.mask, j0 + w0));
    wq_end = QueryHi(p, j0 + w0 + wkeys - 1);
  }
  const int ja = j0 + w0 + g, jb = ja + 8;  // this thread's key rows

  StageRows<D>(sm.k, nullptr, 0, kBlockRows, p.k, p.sk, int64_t(kvh) * D, j0, nk, 1.f);
  StageRows<D>(sm.v, nullptr, 0, kBlockRows, p.v, p.sv, int64_t(kvh) * D, j0, nk, 1.f);

  float dk[D / 8][4], dv[D / 8][4];
#pragma unroll
  for (int dt = 0; dt < D / 8; ++dt)
#pragma unroll
    for (int e = 0; e < 4; ++e) dk[dt][e] = dv[dt][e] = 0.f;

  for (int hh = 0; hh < group; ++hh) {
    const int h = kvh * group + hh;
    for (int t0 = q_begin; t0 < q_end; t0 += BQ) {
      const int nq = min(BQ, q_end - t0);
      __syncthreads();  // the previous tile's readers are done
      StageRows<D>(sm.q, sm.qt, S::kLdT, BQ, p.q, p.sq, int64_t(h) * D, t0, nq, p.scale);
      StageRows<D>(sm.d_o, sm.dot, S::kLdT, BQ, p.d_o, p.sdo, int64_t(h) * D, t0, nq, 1.f);
      for (int r = threadIdx.x; r < BQ; r += kMmaThreads) {
        int lo = 0, hi = 0;  // queries past the tile see nothing
        float lse = 0.f, dd = 0.f;
        if (r < nq) {
          QueryKeyRange(p, t0 + r, lo, hi);
          lse = p.lse[int64_t(h) * p.slse + t0 + r];
          dd = delta[int64_t(h) * n + t0 + r];
        }
        sm.lo[r] = lo, sm.hi[r] = hi, sm.lse[r] = lse, sm.delta[r] = dd;
      }
      __syncthreads();
      if (wkeys <= 0 || t0 >= wq_end || t0 + BQ <= wq_begin) continue;

      // S^T = K (scale Q)^T and dP^T = V dO^T: the warp's 16 keys x BQ queries.
      float s[kTileN][4], dp[kTileN][4];
#pragma unroll
      for (int nt = 0; nt < kTileN; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[nt][e] = dp[nt][e] = 0.f;
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        uint32_t ka[4], va[4];
        LoadA(ka, sm.k, S::kLd, w0, kk * 16, lane);
        LoadA(va, sm.v, S::kLd, w0, kk * 16, lane);
#pragma unroll
        for (int nt = 0; nt < kTileN; ++nt) {
          uint32_t b0, b1;
          LoadB(b0, b1, sm.q, S::kLd, nt * 8, kk * 16, lane);
          Mma(s[nt], ka, b0, b1);
          LoadB(b0, b1, sm.d_o, S::kLd, nt * 8, kk * 16, lane);
          Mma(dp[nt], va, b0, b1);
        }
      }
      // P^T = exp(S^T - lse) where visible, dS^T = P^T (dP^T - D).
#pragma unroll
      for (int nt = 0; nt < kTileN; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int c = nt * 8 + t2 + (e & 1);
          const int j = e < 2 ? ja : jb;
          const float pr = (j >= sm.lo[c] && j < sm.hi[c]) ? __expf(s[nt][e] - sm.lse[c]) : 0.f;
          dp[nt][e] = math::SoftmaxGradScore(pr, dp[nt][e], sm.delta[c]);
          s[nt][e] = pr;
        }
      // dV += P^T dO, dK += dS^T (scale Q).
#pragma unroll
      for (int kc = 0; kc < BQ / 16; ++kc) {
        uint32_t pa[4], da[4];
        AccToA(pa, s[2 * kc], s[2 * kc + 1]);
        AccToA(da, dp[2 * kc], dp[2 * kc + 1]);
#pragma unroll
        for (int dt = 0; dt < D / 8; ++dt) {
          uint32_t b0, b1;
          LoadB(b0, b1, sm.dot, S::kLdT, dt * 8, kc * 16, lane);
          Mma(dv[dt], pa, b0, b1);
          LoadB(b0, b1, sm.qt, S::kLdT, dt * 8, kc * 16, lane);
          Mma(dk[dt], da, b0, b1);
        }
      }
    }
  }

  if (ja < j0 + nk) {
    float* krow = p.dk + int64_t(ja) * p.sdk + int64_t(kvh) * D + t2;
    float* vrow = p.dv + int64_t(ja) * p.sdv + int64_t(kvh) * D + t2;
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt) {
      krow[dt * 8] = dk[dt][0], krow[dt * 8 + 1] = dk[dt][1];
      vrow[dt * 8] = dv[dt][0], vrow[dt * 8 + 1] = dv[dt][1];
    }
  }
  if (jb < j0 + nk) {
    float* krow = p.dk + int64_t(jb) * p.sdk + int64_t(kvh) * D + t2;
    float* vrow = p.dv + int64_t(jb) * p.sdv + int64_t(kvh) * D + t2;
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt) {
      krow[dt * 8] = dk[dt][2], krow[dt * 8 + 1] = dk[dt][3];
      vrow[dt * 8] = dv[dt][2], vrow[dt * 8 + 1] = dv[dt][3];
    }
  }
}

// ---------------------------------------------------------------- backward: dQ

template <int D, int BK>
struct QSmem {
  static constexpr int kLd = D + kPad, kLdT = BK + kPad;
  Bf16 q[kBlockRows * kLd];  // the block's 64 queries: scaled Q and dO (A operands)
  Bf16 d_o[kBlockRows * kLd];
  Bf16 k[BK * kLd];          // a key tile (B of S and dP)
  Bf16 v[BK * kLd];
  Bf16 kt[D * kLdT];         // its K transposed (B of dQ)
};

template <int D, int BK>
__global__ void __launch_bounds__(kMmaThreads) MmaBackwardQKernel(AttentionView<float> p, const float* delta) {
  extern __shared__ __align__(16) unsigned char mma_smem[];
  using S = QSmem<D, BK>;
  S& sm = *reinterpret_cast<S*>(mma_smem);
  constexpr int kTileN = BK / 8;
  const int n = static_cast<int>(p.n), lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t2 = (lane & 3) * 2;
  const int h = blockIdx.y, kvh = h / static_cast<int>(p.group);
  const int q0 = blockIdx.x * kBlockRows, nq = min(kBlockRows, n - q0);
  const int w0 = warp * kWarpRows;
  const WarpKeys wk = WarpKeyRange(p, q0 + w0, min(kWarpRows, nq - w0));
  int block_lo, block_hi, unused;
  QueryKeyRange(p, q0, block_lo, unused);
  QueryKeyRange(p, q0 + nq - 1, unused, block_hi);
  const int ra = q0 + w0 + g, rb = ra + 8;
  int lo_a = 0, hi_a = 0, lo_b = 0, hi_b = 0;
  float lse_a = 0.f, lse_b = 0.f, d_a = 0.f, d_b = 0.f;
  if (ra < n) {
    QueryKeyRange(p, ra, lo_a, hi_a);
    lse_a = p.lse[int64_t(h) * p.slse + ra], d_a = delta[int64_t(h) * n + ra];
  }
  if (rb < n) {
    QueryKeyRange(p, rb, lo_b, hi_b);
    lse_b = p.lse[int64_t(h) * p.slse + rb], d_b = delta[int64_t(h) * n + rb];
  }

  StageRows<D>(sm.q, nullptr, 0, kBlockRows, p.q, p.sq, int64_t(h) * D, q0, nq, p.scale);
  StageRows<D>(sm.d_o, nullptr, 0, kBlockRows, p.d_o, p.sdo, int64_t(h) * D, q0, nq, 1.f);

  float dq[D / 8][4];
#pragma unroll
  for (int dt = 0; dt < D / 8; ++dt) dq[dt][0] = dq[dt][1] = dq[dt][2] = dq[dt][3] = 0.f;

  for (int t0 = block_lo; t0 < block_hi; t0 += BK) {
    const int nk = min(BK, block_hi - t0);
    __syncthreads();  // the previous tile's readers are done (and Q, dO staged)
    StageRows<D>(sm.k, sm.kt, S::kLdT, BK, p.k, p.sk, int64_t(kvh) * D, t0, nk, 1.f);
    StageRows<D>(sm.v, nullptr, 0, BK, p.v, p.sv, int64_t(kvh) * D, t0, nk, 1.f);
    __syncthreads();
    if (wk.Skips(t0, BK)) continue;

    float s[kTileN][4], dp[kTileN][4];
#pragma unroll
    for (int nt = 0; nt < kTileN; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[nt][e] = dp[nt][e] = 0.f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      uint32_t qa[4], da[4];
      LoadA(qa, sm.q, S::kLd, w0, kk * 16, lane);
      LoadA(da, sm.d_o, S::kLd, w0, kk * 16, lane);
#pragma unroll
      for (int nt = 0; nt < kTileN; ++nt) {
        uint32_t b0, b1;
        LoadB(b0, b1, sm.k, S::kLd, nt * 8, kk * 16, lane);
        Mma(s[nt], qa, b0, b1);
        LoadB(b0, b1, sm.v, S::kLd, nt * 8, kk * 16, lane);
        Mma(dp[nt], da, b0, b1);
      }
    }
    // dS = P (dP - D), P = exp(S - lse) where visible; kept in s.
    const bool inside = wk.Inside(t0, BK);
#pragma unroll
    for (int nt = 0; nt < kTileN; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int j = t0 + nt * 8 + t2 + (e & 1);
        const bool seen = inside || (e < 2 ? (j >= lo_a && j < hi_a) : (j >= lo_b && j < hi_b));
        const float pr = seen ? __expf(s[nt][e] - (e < 2 ? lse_a : lse_b)) : 0.f;
        s[nt][e] = math::SoftmaxGradScore(pr, dp[nt][e], e < 2 ? d_a : d_b);
      }
    // dQ += dS K.
#pragma unroll
    for (int kc = 0; kc < BK / 16; ++kc) {
      uint32_t da[4];
      AccToA(da, s[2 * kc], s[2 * kc + 1]);
#pragma unroll
      for (int dt = 0; dt < D / 8; ++dt) {
        uint32_t b0, b1;
        LoadB(b0, b1, sm.kt, S::kLdT, dt * 8, kc * 16, lane);
        Mma(dq[dt], da, b0, b1);
      }
    }
  }

  const float scale = p.scale;
  if (ra < n) {
    float* row = p.dq + int64_t(ra) * p.sdq + int64_t(h) * D + t2;
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt) row[dt * 8] = scale * dq[dt][0], row[dt * 8 + 1] = scale * dq[dt][1];
  }
  if (rb < n) {
    float* row = p.dq + int64_t(rb) * p.sdq + int64_t(h) * D + t2;
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt) row[dt * 8] = scale * dq[dt][2], row[dt * 8 + 1] = scale * dq[dt][3];
  }
}

// ---------------------------------------------------------------- launch

// Query tile of the dK/dV kernel: 32 at head_dim 128 keeps dK, dV (128
// fp32 registers per thread) and the tile's S^T, dP^T in registers.
template <int D>
constexpr int KvQueryTile() { return D >= 128 ? 32 : 64; }
constexpr int kQKeyTile = 64;

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

template <int D>
size_t MostSmem() {
  return std::max({sizeof(FwdSmem<D>), sizeof(KvSmem<D, KvQueryTile<D>()>), sizeof(QSmem<D, kQKeyTile>)});
}

template <class Smem, class Kernel, class... Args>
void LaunchMma(const Context& c, Kernel kernel, dim3 grid, Args... args) {
  const size_t smem = sizeof(Smem);
  LONGCTX_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  kernel<<<grid, kMmaThreads, smem, c.stream>>>(args...);
  LONGCTX_CUDA_LAUNCHED();
}

unsigned BlocksFor(int64_t rows) { return static_cast<unsigned>((rows + kBlockRows - 1) / kBlockRows); }

}  // namespace

bool AttentionMmaUsable(const Context& c, const AttentionView<float>& v) {
  if (!c.bf16_matmul) return false;
  size_t smem = 0;
  if (!WithHeadDim(v.d, [&](auto dim) { smem = MostSmem<decltype(dim)::value>(); })) return false;
  return smem <= static_cast<size_t>(c.max_smem_per_block);
}

void AttentionForwardMma(const Context& c, const AttentionView<float>& v) {
  WithHeadDim(v.d, [&](auto dim) {
    constexpr int D = decltype(dim)::value;
    LaunchMma<FwdSmem<D>>(c, MmaForwardKernel<D>, dim3(BlocksFor(v.n), static_cast<unsigned>(v.heads)), v);
  });
}

void AttentionBackwardMma(const Context& c, const AttentionView<float>& v, const float* delta) {
  WithHeadDim(v.d, [&](auto dim) {
    constexpr int D = decltype(dim)::value, BQ = KvQueryTile<D>();
    LaunchMma<KvSmem<D, BQ>>(c, MmaBackwardKvKernel<D, BQ>, dim3(BlocksFor(v.n), static_cast<unsigned>(v.kv_heads)),
                             v, delta);
    LaunchMma<QSmem<D, kQKeyTile>>(c, MmaBackwardQKernel<D, kQKeyTile>,
                                   dim3(BlocksFor(v.n), static_cast<unsigned>(v.heads)), v, delta);
  });
}

}  // namespace longctx::cuda
