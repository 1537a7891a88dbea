// Why: the few device-side building blocks every .cu file of the backend
// shares: a deterministic block reduction (fixed shuffle tree, so a sum does
// not depend on scheduling), the rows x columns view of the tensor layout
// both backends share (kernels/tensor_layout.h), and grid sizing; the F32/F64
// dispatch is kernels/dispatch.h, also shared. Included only by .cu files.
#ifndef LONGCTX_KERNELS_CUDA_CUDA_COMMON_CUH_
#define LONGCTX_KERNELS_CUDA_CUDA_COMMON_CUH_

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/dispatch.h"
#include "kernels/math/bf16.h"
#include "base/log.h"
#include "kernels/tensor.h"
#include "kernels/tensor_layout.h"

namespace longctx::cuda {

// An op's output element: Out = T, or uint16_t (bf16 bits, rounded as Copy
// rounds) for an F32 T: the outputs only bf16 products read (ops.h).
template <class T>
__device__ inline void StoreAs(T* p, T v) { *p = v; }
__device__ inline void StoreAs(uint16_t* p, float v) { *p = math::F32ToBf16Bits(v); }

// Threads per block of every 1-D kernel; a multiple of 32 (BlockReduce).
inline constexpr int kThreads = 256;

// Grid for a grid-stride loop over `total` items: enough blocks to fill any
// current GPU, never more than needed. (Only reductions must not depend on the
// grid; they use fixed grids of their own.)
inline unsigned GridFor(int64_t total, int threads = kThreads) {
  const int64_t blocks = (total + threads - 1) / threads;
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(blocks, 16384)));
}

// Sum (or max) over the block, in a fixed order: shuffle tree within each
// warp, then warp results in warp order. Every thread gets the result. `sh`
// needs 32 entries; consecutive calls may reuse it.
template <class A, class Op>
__device__ A BlockReduce(A v, A* sh, Op op) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_down_sync(0xffffffffu, v, o));
  __syncthreads();  // previous users of sh are done
  if (lane == 0) sh[warp] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    A r = sh[0];
    for (int w = 1; w < warps; ++w) r = op(r, sh[w]);
    sh[0] = r;
  }
  __syncthreads();
  return sh[0];
}

struct SumOp {
  template <class A>
  __device__ A operator()(A a, A b) const { return a + b; }
};
struct MaxOp {
  template <class A>
  __device__ A operator()(A a, A b) const { return b > a ? b : a; }
};

template <class A>
__device__ A BlockSum(A v, A* sh) { return BlockReduce(v, sh, SumOp{}); }
template <class A>
__device__ A BlockMax(A v, A* sh) { return BlockReduce(v, sh, MaxOp{}); }

// A tensor as rows x cols with a row stride (elements). Dense tensors are one
// flat row (rows = 1), as in the CPU backend; element i of the view is
// (i / cols, i % cols).
template <class T>
struct View2D {
  T* p;
  int64_t cols, stride;
  bool flat;
  __device__ T& at(int64_t i) const {
    if (flat) return p[i];
    const int64_t r = i / cols;
    return p[r * stride + (i - r * cols)];
  }
};

template <class T>
View2D<T> MakeView(const Tensor& t, const Layout& l) {
  return View2D<T>{static_cast<T*>(t.data), l.cols, l.Stride(t), l.flat};
}

}  // namespace longctx::cuda

#endif  // LONGCTX_KERNELS_CUDA_CUDA_COMMON_CUH_
