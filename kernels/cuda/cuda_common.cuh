// Why: the few device-side building blocks every .cu file of the backend
// shares: a deterministic block reduction (fixed shuffle tree, so a sum does
// not depend on scheduling), the rows x columns view that mirrors the CPU
// backend's tensor layout, grid sizing, and the F32/F64 dispatch. Included
// only by .cu files.
#ifndef LONGCTX_KERNELS_CUDA_CUDA_COMMON_CUH_
#define LONGCTX_KERNELS_CUDA_CUDA_COMMON_CUH_

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/log.h"
#include "kernels/tensor.h"

namespace longctx::cuda {

// Threads per block of every 1-D kernel; a multiple of 32 (BlockReduce).
inline constexpr int kThreads = 256;

// Grid for a grid-stride loop over `total` items: enough blocks to fill any
// current GPU, never more than needed. (Only reductions must not depend on the
// grid; they use fixed grids of their own.)
inline unsigned GridFor(int64_t total, int threads = kThreads) {
  const int64_t blocks = (total + threads - 1) / threads;
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(blocks, 16384)));
}

template <class F>
void DispatchFloat(DType t, const char* op, F&& f) {
  switch (t) {
    case DType::kF32: f(float{}); break;
    case DType::kF64: f(double{}); break;
    default: LOG(FATAL) << op << ": unsupported dtype " << DTypeName(t);
  }
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

// The common layout of tensors of one shape: flat when all are contiguous.
struct Layout {
  int64_t rows = 0, cols = 0;
  bool flat = true;
  int64_t total() const { return rows * cols; }
};

inline Layout MakeLayout(std::initializer_list<const Tensor*> ts) {
  const Tensor& first = **ts.begin();
  Layout l;
  for (const Tensor* t : ts) l.flat = l.flat && t->contiguous();
  if (l.flat || first.ndim == 0) {
    l.flat = true;
    l.rows = first.numel() > 0 ? 1 : 0;
    l.cols = first.numel();
  } else {
    l.rows = first.shape[0];
    l.cols = first.row_size();
  }
  return l;
}

template <class T>
View2D<T> MakeView(const Tensor& t, const Layout& l) {
  return View2D<T>{static_cast<T*>(t.data), l.cols, l.flat ? 0 : t.stride0(), l.flat};
}

}  // namespace longctx::cuda

#endif  // LONGCTX_KERNELS_CUDA_CUDA_COMMON_CUH_
