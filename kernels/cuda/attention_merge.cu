// Why: STRING's two attention parts (and any split-KV attention) are combined
// by their log-sum-exps with the shared functor of
// kernels/math/attention_merge.h, so the merge is the CPU backend's math. One
// warp per (query, head) row: every lane computes the row's weights from the
// two lse values, the lanes stride over head_dim (coalesced), and lane 0
// writes the merged lse after the warp has read it, so o/lse may alias the
// inputs (in place).
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/math/attention_merge.h"

namespace longctx::cuda {
namespace {

template <class T>
struct MergeArgs {
  const T *o1, *o2, *lse1, *lse2;
  T *o, *lse;
  int64_t s1, s2, so, l1, l2, lo;
  int64_t n, heads, d;
};

template <class T>
__global__ void AttentionMergeKernel(MergeArgs<T> a) {
  const int lane = threadIdx.x & 31;
  const int64_t warps_per_block = blockDim.x >> 5;
  const int64_t rows = a.n * a.heads;
  for (int64_t row = blockIdx.x * warps_per_block + (threadIdx.x >> 5); row < rows;
       row += int64_t(gridDim.x) * warps_per_block) {
    const int64_t i = row / a.heads, h = row - i * a.heads;
    const math::AttentionMergeWeights<T> w = math::AttentionMerge()(a.lse1[h * a.l1 + i], a.lse2[h * a.l2 + i]);
    const T* x1 = a.o1 + i * a.s1 + h * a.d;
    const T* x2 = a.o2 + i * a.s2 + h * a.d;
    T* out = a.o + i * a.so + h * a.d;
    for (int64_t x = lane; x < a.d; x += 32) out[x] = w.w1 * x1[x] + w.w2 * x2[x];
    __syncwarp();
    if (lane == 0) a.lse[h * a.lo + i] = w.lse;
  }
}

}  // namespace

void AttentionMerge(const Context& c, const Tensor& o1, const Tensor& lse1, const Tensor& o2, const Tensor& lse2,
                    const Tensor& o, const Tensor& lse) {
  const int64_t rows = o1.shape[0] * o1.shape[1];
  if (rows == 0) return;
  DispatchFloat(o1.dtype, "AttentionMerge", [&](auto tag) {
    using T = decltype(tag);
    MergeArgs<T> a{};
    a.o1 = o1.as<const T>();
    a.o2 = o2.as<const T>();
    a.lse1 = lse1.as<const T>();
    a.lse2 = lse2.as<const T>();
    a.o = o.as<T>();
    a.lse = lse.as<T>();
    a.s1 = o1.stride0();
    a.s2 = o2.stride0();
    a.so = o.stride0();
    a.l1 = lse1.stride0();
    a.l2 = lse2.stride0();
    a.lo = lse.stride0();
    a.n = o1.shape[0];
    a.heads = o1.shape[1];
    a.d = o1.shape[2];
    const int warps = kThreads / 32;
    AttentionMergeKernel<T><<<GridFor(rows, warps), kThreads, 0, c.stream>>>(a);
    LONGCTX_CUDA_LAUNCHED();
  });
}

}  // namespace longctx::cuda
