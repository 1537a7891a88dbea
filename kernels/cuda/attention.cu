// Why: long-context training cannot afford an N x N score matrix, so GPU
// attention is tiled flash attention with the online softmax of
// kernels/math/online_softmax.h (the same bookkeeping as the CPU kernel).
//
// Forward: one thread block per (query tile, head). The tile's queries
// (pre-multiplied by the scale) stay in shared memory; keys and values stream
// through it one tile at a time, starting at the first key any of the tile's
// queries can see (segment start, or i - w + 1 under a sliding window) and
// ending at the tile's last query, so key tiles outside the window or segment
// are never visited (a window layer costs O(N w)). Tiles are global (not
// aligned to segments); each (query, key) pair is masked by the query's own
// lower bound, found by binary search in the device-resident cu_seqlens.
//
// Inference (forward only, ops.h): keys with their own segments aligned
// bottom-right to the queries (KV-cache decode, chunked prefill) and a
// diagonal offset (STRING's shifted part) only change each query's visible key
// range [lo, hi), kept per row in shared memory; training has hi = i + 1. The
// range, and the key and query tiles a block may skip, come from the one
// visibility rule of kernels/math/attention_visibility.h that the CPU kernel,
// the KV cache and the analyses use too.
//
// Backward: FlashAttention-2 recomputation from the saved lse and
// D_i = rowsum(dO_i * O_i) (computed first, in double), in two race-free
// kernels: one block per (key tile, kv head) owns dK and dV of its keys and
// loops over the GQA group's query heads and the query tiles that can see them;
// one block per (query tile, head) owns dQ. Every output element is written by
// one thread in a fixed order: no atomics, bitwise reproducible.
//
// At precision bf16, F32 calls with head_dim 32, 64 or 128 go to the
// tensor-core kernels of attention_mma.cu instead (same op, bf16 tile
// products); everything else runs the kernels here.
//
// NOT YET TUNED: this is a correctness-first scalar implementation (FMA loops
// over shared memory, tile size picked from the shared-memory budget). It does
// not use tensor cores (mma/wgmma), asynchronous copies or register tiling;
// expect it to be several times slower than FlashAttention-2/3.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/cuda/attention_mma.cuh"
#include "kernels/cuda/attention_rows.cuh"
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/attention_args.h"
#include "kernels/math/attention_visibility.h"
#include "kernels/math/online_softmax.h"

namespace longctx::cuda {
namespace {

constexpr int kAttnThreads = 256;
// Shared-memory budget preferred per block (several blocks per SM); a larger
// one is used only when a head_dim does not fit even the smallest tile.
constexpr int kSmemSoftBudget = 112 << 10;

// The unpacked params shared with the CPU kernel (kernels/attention_args.h)
// plus what only the launch knows. Token counts fit in int (cu_seqlens are
// I32), so kernels narrow n, d and the head counts once, at their top.
template <class T>
struct AttnParams : AttentionView<T> {
  T* delta = nullptr;  // [H, N] dense: D = rowsum(dO * O)
  int tile = 0;
};

// Shared-memory layouts, as offsets in T elements (then `tile` ints). K and V
// rows are padded to d + 1 and score rows to tile + 1 so the column-wise
// accesses of a warp fall in distinct banks. Host and device use the same
// struct, so the launch size and the kernel's carving cannot disagree.
struct FwdLayout {
  int64_t q, k, v, s, acc, m, l, alpha, total;
  __host__ __device__ FwdLayout(int b, int d) {
    int64_t o = 0;
    q = o; o += int64_t(b) * d;
    k = o; o += int64_t(b) * (d + 1);
    v = o; o += int64_t(b) * (d + 1);
    s = o; o += int64_t(b) * (b + 1);
    acc = o; o += int64_t(b) * d;
    m = o; o += b;
    l = o; o += b;
    alpha = o; o += b;
    total = o;
  }
};

struct KvLayout {
  int64_t k, v, q, d_o, p, ds, dk, dv, lse, delta, total;
  __host__ __device__ KvLayout(int b, int d) {
    int64_t o = 0;
    k = o; o += int64_t(b) * (d + 1);
    v = o; o += int64_t(b) * (d + 1);
    q = o; o += int64_t(b) * d;
    d_o = o; o += int64_t(b) * d;
    p = o; o += int64_t(b) * (b + 1);
    ds = o; o += int64_t(b) * (b + 1);
    dk = o; o += int64_t(b) * d;
    dv = o; o += int64_t(b) * d;
    lse = o; o += b;
    delta = o; o += b;
    total = o;
  }
};

struct QLayout {
  int64_t q, d_o, k, v, ds, dq, lse, delta, total;
  __host__ __device__ QLayout(int b, int d) {
    int64_t o = 0;
    q = o; o += int64_t(b) * d;
    d_o = o; o += int64_t(b) * d;
    k = o; o += int64_t(b) * (d + 1);
    v = o; o += int64_t(b) * (d + 1);
    ds = o; o += int64_t(b) * (b + 1);
    dq = o; o += int64_t(b) * d;
    lse = o; o += b;
    delta = o; o += b;
    total = o;
  }
};

// Every layout is followed by two int arrays of b entries (per-row key bounds).
template <class T, class L>
size_t SmemBytes(int b, int d) {
  return static_cast<size_t>(L(b, d).total) * sizeof(T) + 2 * static_cast<size_t>(b) * sizeof(int);
}

template <class T>
__device__ __forceinline__ T Dot(const T* a, const T* b, int d) {
  T acc = T(0);
  for (int x = 0; x < d; ++x) acc += a[x] * b[x];
  return acc;
}

// rows x d of a token-major tensor (row stride ld, column offset col) into
// shared memory with leading dimension lds, times `scale`.
template <class T>
__device__ __forceinline__ void LoadTile(T* dst, int lds, const T* src, int64_t ld, int64_t col, int row0, int rows,
                                         int d, T scale) {
  for (int e = threadIdx.x; e < rows * d; e += blockDim.x) {
    const int r = e / d, x = e - r * d;
    dst[r * lds + x] = scale * src[static_cast<int64_t>(row0 + r) * ld + col + x];
  }
}

template <class T>
__global__ void __launch_bounds__(kAttnThreads) AttnForwardKernel(AttnParams<T> p) {
  extern __shared__ __align__(16) unsigned char attn_smem[];
  const int B = p.tile, d = static_cast<int>(p.d), ldk = d + 1, lds = B + 1;
  const FwdLayout L(B, d);
  T* base = reinterpret_cast<T*>(attn_smem);
  T *qs = base + L.q, *ks = base + L.k, *vs = base + L.v, *s = base + L.s, *acc = base + L.acc;
  T *mrow = base + L.m, *lrow = base + L.l, *alpha = base + L.alpha;
  int* lo = reinterpret_cast<int*>(base + L.total);
  int* hi = lo + B;
  const int h = blockIdx.y, g = h / static_cast<int>(p.group);
  const int q0 = blockIdx.x * B, nq = min(B, static_cast<int>(p.n) - q0);
  const int tid = threadIdx.x, nt = blockDim.x;

  LoadTile(qs, d, p.q, p.sq, int64_t(h) * d, q0, nq, d, p.scale);
  for (int e = tid; e < nq * d; e += nt) acc[e] = T(0);
  for (int r = tid; r < nq; r += nt) {
    mrow[r] = math::NegInf<T>();
    lrow[r] = T(0);
    QueryKeyRange(p, q0 + r, lo[r], hi[r]);
  }
  __syncthreads();

  // lo and hi are nondecreasing in the row, so the tile's keys are
  // [lo[0], hi[nq - 1]); no query of the tile sees a key at or past k_end.
  const int k_end = hi[nq - 1];
  for (int t0 = lo[0]; t0 < k_end; t0 += B) {
    const int nk = min(B, k_end - t0);
    LoadTile(ks, ldk, p.k, p.sk, int64_t(g) * d, t0, nk, d, T(1));
    LoadTile(vs, ldk, p.v, p.sv, int64_t(g) * d, t0, nk, d, T(1));
    __syncthreads();
    // Scores, -inf where masked.
    for (int e = tid; e < nq * B; e += nt) {
      const int r = e / B, c = e - r * B;
      const int j = t0 + c;
      T sc = math::NegInf<T>();
      if (c < nk && j >= lo[r] && j < hi[r]) sc = Dot(qs + r * d, ks + c * ldk, d);
      s[r * lds + c] = sc;
    }
    __syncthreads();
    // Online softmax per row: scores -> probabilities relative to the new max.
    for (int r = tid; r < nq; r += nt) {
      T* srow = s + r * lds;
      T mx = math::NegInf<T>();
      for (int c = 0; c < nk; ++c) mx = srow[c] > mx ? srow[c] : mx;
      if (mx == math::NegInf<T>()) {  // nothing of this tile is visible to row r
        alpha[r] = T(1);
        for (int c = 0; c < nk; ++c) srow[c] = T(0);
        continue;
      }
      math::SoftmaxState<T> st{mrow[r], lrow[r]};
      const T a = math::SoftmaxAdvance(st, mx);
      T sum = T(0);
      for (int c = 0; c < nk; ++c) {
        const T sc = srow[c];
        const T pr = sc == math::NegInf<T>() ? T(0) : math::Exp(sc - st.m);
        srow[c] = pr;
        sum += pr;
      }
      math::SoftmaxAccumulate(st, sum);
      mrow[r] = st.m;
      lrow[r] = st.l;
      alpha[r] = a;
    }
    __syncthreads();
    // acc = alpha * acc + P V.
    for (int e = tid; e < nq * d; e += nt) {
      const int r = e / d, x = e - r * d;
      const T* prow = s + r * lds;
      T a = acc[e] * alpha[r];
      for (int c = 0; c < nk; ++c) a += prow[c] * vs[c * ldk + x];
      acc[e] = a;
    }
    __syncthreads();
  }

  for (int e = tid; e < nq * d; e += nt) {
    const int r = e / d, x = e - r * d;
    const math::SoftmaxState<T> st{mrow[r], lrow[r]};
    p.o[static_cast<int64_t>(q0 + r) * p.so + int64_t(h) * d + x] = acc[e] * math::SoftmaxInvSum(st);
  }
  for (int r = tid; r < nq; r += nt) {
    const math::SoftmaxState<T> st{mrow[r], lrow[r]};
    p.lse[int64_t(h) * p.slse + q0 + r] = math::SoftmaxLse(st);
  }
}

// delta[h * n + i] = dO[i, h, :] . O[i, h, :], accumulated in double.
template <class T>
__global__ void AttnDeltaKernel(AttnParams<T> p) {
  const int64_t total = int64_t(p.n) * p.heads;
  for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < total;
       idx += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = idx / p.heads, h = idx - i * p.heads;
    const T* orow = p.o + i * p.so + h * p.d;
    const T* dorow = p.d_o + i * p.sdo + h * p.d;
    double s = 0;
    for (int x = 0; x < p.d; ++x) s += static_cast<double>(orow[x]) * static_cast<double>(dorow[x]);
    p.delta[h * p.n + i] = static_cast<T>(s);
  }
}

// P and dS of one (query row r, key column c) pair, 0 when masked.
template <class T>
__device__ __forceinline__ void ProbAndGrad(const T* qrow, const T* dorow, const T* krow, const T* vrow, int d, T lse,
                                            T delta, T& pr, T& ds) {
  const T sc = Dot(qrow, krow, d);
  const T dp = Dot(dorow, vrow, d);
  pr = math::SoftmaxProb(sc, lse);
  ds = math::SoftmaxGradScore(pr, dp, delta);
}

template <class T>
__global__ void __launch_bounds__(kAttnThreads) AttnBackwardKvKernel(AttnParams<T> p) {
  extern __shared__ __align__(16) unsigned char attn_smem[];
  const int B = p.tile, d = static_cast<int>(p.d), ldk = d + 1, lds = B + 1;
  const KvLayout L(B, d);
  T* base = reinterpret_cast<T*>(attn_smem);
  T *ks = base + L.k, *vs = base + L.v, *qs = base + L.q, *dos = base + L.d_o;
  T *ps = base + L.p, *dss = base + L.ds, *dka = base + L.dk, *dva = base + L.dv;
  T *lse = base + L.lse, *delta = base + L.delta;
  int* lo = reinterpret_cast<int*>(base + L.total);
  int* hi = lo + B;
  const int g = blockIdx.y, group = static_cast<int>(p.group);
  const int j0 = blockIdx.x * B, nk = min(B, static_cast<int>(p.n) - j0);
  const int tid = threadIdx.x, nt = blockDim.x;

  LoadTile(ks, ldk, p.k, p.sk, int64_t(g) * d, j0, nk, d, T(1));
  LoadTile(vs, ldk, p.v, p.sv, int64_t(g) * d, j0, nk, d, T(1));
  for (int e = tid; e < nk * d; e += nt) dka[e] = dva[e] = T(0);
  // Queries [q_begin, q_end) can see a key of the tile.
  const int q_begin = static_cast<int>(math::FirstQuerySeeing(p.mask, j0)), q_end = QueryHi(p, j0 + nk - 1);

  for (int hh = 0; hh < group; ++hh) {
    const int h = g * group + hh;
    for (int t0 = q_begin; t0 < q_end; t0 += B) {
      const int nq = min(B, q_end - t0);
      __syncthreads();  // the previous tile's readers of qs/dos/ps/dss are done
      LoadTile(qs, d, p.q, p.sq, int64_t(h) * d, t0, nq, d, p.scale);
      LoadTile(dos, d, p.d_o, p.sdo, int64_t(h) * d, t0, nq, d, T(1));
      for (int r = tid; r < nq; r += nt) {
        lse[r] = p.lse[int64_t(h) * p.slse + t0 + r];
        delta[r] = p.delta[int64_t(h) * p.n + t0 + r];
        QueryKeyRange(p, t0 + r, lo[r], hi[r]);
      }
      __syncthreads();
      for (int e = tid; e < nq * B; e += nt) {
        const int r = e / B, c = e - r * B;
        const int j = j0 + c;
        T pr = T(0), ds = T(0);
        if (c < nk && j >= lo[r] && j < hi[r])
          ProbAndGrad(qs + r * d, dos + r * d, ks + c * ldk, vs + c * ldk, d, lse[r], delta[r], pr, ds);
        ps[r * lds + c] = pr;
        dss[r * lds + c] = ds;
      }
      __syncthreads();
      // dV += P^T dO, dK += dS^T (scale Q).
      for (int e = tid; e < nk * d; e += nt) {
        const int c = e / d, x = e - c * d;
        T av = dva[e], ak = dka[e];
        for (int r = 0; r < nq; ++r) {
          av += ps[r * lds + c] * dos[r * d + x];
          ak += dss[r * lds + c] * qs[r * d + x];
        }
        dva[e] = av;
        dka[e] = ak;
      }
    }
  }
  __syncthreads();
  for (int e = tid; e < nk * d; e += nt) {
    const int c = e / d, x = e - c * d;
    p.dk[static_cast<int64_t>(j0 + c) * p.sdk + int64_t(g) * d + x] = dka[e];
    p.dv[static_cast<int64_t>(j0 + c) * p.sdv + int64_t(g) * d + x] = dva[e];
  }
}

template <class T>
__global__ void __launch_bounds__(kAttnThreads) AttnBackwardQKernel(AttnParams<T> p) {
  extern __shared__ __align__(16) unsigned char attn_smem[];
  const int B = p.tile, d = static_cast<int>(p.d), ldk = d + 1, lds = B + 1;
  const QLayout L(B, d);
  T* base = reinterpret_cast<T*>(attn_smem);
  T *qs = base + L.q, *dos = base + L.d_o, *ks = base + L.k, *vs = base + L.v;
  T *dss = base + L.ds, *dqa = base + L.dq, *lse = base + L.lse, *delta = base + L.delta;
  int* lo = reinterpret_cast<int*>(base + L.total);
  int* hi = lo + B;
  const int h = blockIdx.y, g = h / static_cast<int>(p.group);
  const int q0 = blockIdx.x * B, nq = min(B, static_cast<int>(p.n) - q0);
  const int tid = threadIdx.x, nt = blockDim.x;

  LoadTile(qs, d, p.q, p.sq, int64_t(h) * d, q0, nq, d, p.scale);
  LoadTile(dos, d, p.d_o, p.sdo, int64_t(h) * d, q0, nq, d, T(1));
  for (int e = tid; e < nq * d; e += nt) dqa[e] = T(0);
  for (int r = tid; r < nq; r += nt) {
    lse[r] = p.lse[int64_t(h) * p.slse + q0 + r];
    delta[r] = p.delta[int64_t(h) * p.n + q0 + r];
    QueryKeyRange(p, q0 + r, lo[r], hi[r]);
  }
  __syncthreads();

  const int k_end = hi[nq - 1];  // as in the forward
  for (int t0 = lo[0]; t0 < k_end; t0 += B) {
    const int nk = min(B, k_end - t0);
    LoadTile(ks, ldk, p.k, p.sk, int64_t(g) * d, t0, nk, d, T(1));
    LoadTile(vs, ldk, p.v, p.sv, int64_t(g) * d, t0, nk, d, T(1));
    __syncthreads();
    for (int e = tid; e < nq * B; e += nt) {
      const int r = e / B, c = e - r * B;
      const int j = t0 + c;
      T pr = T(0), ds = T(0);
      if (c < nk && j >= lo[r] && j < hi[r])
        ProbAndGrad(qs + r * d, dos + r * d, ks + c * ldk, vs + c * ldk, d, lse[r], delta[r], pr, ds);
      dss[r * lds + c] = ds;
    }
    __syncthreads();
    // dQ += dS K (scaled at the end).
    for (int e = tid; e < nq * d; e += nt) {
      const int r = e / d, x = e - r * d;
      T a = dqa[e];
      for (int c = 0; c < nk; ++c) a += dss[r * lds + c] * ks[c * ldk + x];
      dqa[e] = a;
    }
    __syncthreads();
  }
  for (int e = tid; e < nq * d; e += nt) {
    const int r = e / d, x = e - r * d;
    p.dq[static_cast<int64_t>(q0 + r) * p.sdq + int64_t(h) * d + x] = p.scale * dqa[e];
  }
}

// The largest tile whose shared memory fits the soft budget, else the hard
// (device) limit.
template <class T, class L>
int ChooseTile(int d, int max_smem, const char* op) {
  constexpr int kTiles[] = {64, 32, 16, 8};
  for (int b : kTiles)
    if (SmemBytes<T, L>(b, d) <= static_cast<size_t>(std::min(max_smem, kSmemSoftBudget))) return b;
  for (int b : kTiles)
    if (SmemBytes<T, L>(b, d) <= static_cast<size_t>(max_smem)) return b;
  LOG(FATAL) << op << ": head_dim " << d << " needs " << SmemBytes<T, L>(8, d)
             << " bytes of shared memory even with 8-row tiles; this GPU allows " << max_smem;
  return 0;
}

template <class T, class L, class Kernel>
void Launch(const Context& c, Kernel kernel, AttnParams<T> p, int rows, int grid_y, const char* op) {
  const int d = static_cast<int>(p.d);
  p.tile = ChooseTile<T, L>(d, c.max_smem_per_block, op);
  const size_t smem = SmemBytes<T, L>(p.tile, d);
  LONGCTX_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  const dim3 grid(static_cast<unsigned>((rows + p.tile - 1) / p.tile), static_cast<unsigned>(grid_y));
  kernel<<<grid, kAttnThreads, smem, c.stream>>>(p);
  LONGCTX_CUDA_LAUNCHED();
}

template <class T>
AttnParams<T> MakeParams(const AttentionArgs& a, bool backward) {
  CHECK_LT(a.q.shape[0], int64_t{1} << 31) << "Attention: too many tokens";
  CHECK_LE(a.q.shape[1], 65535) << "Attention: too many heads for the grid";
  return AttnParams<T>{UnpackAttention<T>(a, backward)};
}

}  // namespace

void AttentionForward(const Context& c, const AttentionArgs& a) {
  if (a.q.shape[0] == 0 || a.q.shape[1] == 0 || a.q.shape[2] == 0) return;
  DispatchFloat(a.q.dtype, "AttentionForward", [&](auto tag) {
    using T = decltype(tag);
    const AttnParams<T> p = MakeParams<T>(a, false);
    if constexpr (std::is_same_v<T, float>) {
      if (AttentionMmaUsable(c, p)) return AttentionForwardMma(c, p, a.k.shape[0]);
    }
    Launch<T, FwdLayout>(c, AttnForwardKernel<T>, p, static_cast<int>(p.n), static_cast<int>(p.heads),
                         "AttentionForward");
  });
}

void AttentionBackward(const Context& c, const AttentionArgs& a) {
  if (a.q.shape[0] == 0 || a.q.shape[1] == 0 || a.q.shape[2] == 0) return;
  DispatchFloat(a.q.dtype, "AttentionBackward", [&](auto tag) {
    using T = decltype(tag);
    AttnParams<T> p = MakeParams<T>(a, true);
    if constexpr (std::is_same_v<T, float>) {
      if (AttentionMmaUsable(c, p)) return AttentionBackwardMma(c, p);
    }
    p.delta = static_cast<T*>(c.workspace->Get(Slot::kAttnDelta, static_cast<size_t>(p.n) * p.heads * sizeof(T)));
    AttnDeltaKernel<T><<<GridFor(int64_t(p.n) * p.heads), kThreads, 0, c.stream>>>(p);
    LONGCTX_CUDA_LAUNCHED();
    const int n = static_cast<int>(p.n);
    Launch<T, KvLayout>(c, AttnBackwardKvKernel<T>, p, n, static_cast<int>(p.kv_heads), "AttentionBackward");
    Launch<T, QLayout>(c, AttnBackwardQKernel<T>, p, n, static_cast<int>(p.heads), "AttentionBackward");
  });
}

}  // namespace longctx::cuda
