// Why: the memory-bound ops of the CUDA backend (fill/copy/axpy/scale, the
// gradient-norm and finiteness reductions, SwiGLU, AdamW, RoPE). Each walks a
// tensor as rows x contiguous columns like the CPU backend (View2D), with a
// grid-stride loop. SumSquares is deterministic: a grid whose size depends only
// on the element count, per-thread double sums in a fixed element order, a
// fixed-order block reduction, then one block adding the partials in order.
// The per-element math (SwiGLU, AdamW, rotation) is the shared LONGCTX_HD code
// of kernels/math, so the CPU and CUDA backends differ only in reduction order.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/math/adamw.h"
#include "kernels/math/bf16.h"
#include "kernels/math/rope.h"
#include "kernels/math/swiglu.h"

namespace longctx::cuda {
namespace {

template <class T>
__global__ void FillKernel(View2D<T> x, int64_t total, T value) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x)
    x.at(i) = value;
}

template <class D, class S>
__global__ void ConvertKernel(View2D<D> dst, View2D<const S> src, int64_t total) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x)
    dst.at(i) = static_cast<D>(src.at(i));
}

// F32 <-> BF16 (bf16 activation storage, docs/BF16_ACTIVATIONS.md) with the
// shared math::F32ToBf16Bits rounding rather than __float2bfloat16_rn: the same
// round to nearest even, but NaN keeps its sign and payload as on the CPU
// backend, so both backends store the same bits.
__global__ void F32ToBf16Kernel(View2D<uint16_t> dst, View2D<const float> src, int64_t total) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x)
    dst.at(i) = math::F32ToBf16Bits(src.at(i));
}

__global__ void Bf16ToF32Kernel(View2D<float> dst, View2D<const uint16_t> src, int64_t total) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x)
    dst.at(i) = math::Bf16BitsToF32(src.at(i));
}

template <class T>
__global__ void AxpyKernel(View2D<T> y, View2D<const T> x, int64_t total, T alpha) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x)
    y.at(i) += alpha * x.at(i);
}

template <class T>
__global__ void ScaleKernel(View2D<T> x, int64_t total, T alpha) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x)
    x.at(i) *= alpha;
}

// Stage 1: partial[b] = sum over the elements b*T + t, b*T + t + G*T, ... of
// x^2, in double, reduced over the block in a fixed order.
template <class T>
__global__ void SumSquaresPartialKernel(View2D<const T> x, int64_t total, double* partial) {
  __shared__ double sh[32];
  double s = 0;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const double v = static_cast<double>(x.at(i));
    s += v * v;
  }
  s = BlockSum(s, sh);
  if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

// Stage 2 (one block): out = sum of the partials, in a fixed order.
__global__ void SumPartialsKernel(const double* partial, int count, double* out) {
  __shared__ double sh[32];
  double s = 0;
  for (int i = threadIdx.x; i < count; i += blockDim.x) s += partial[i];
  s = BlockSum(s, sh);
  if (threadIdx.x == 0) *out = s;
}

template <class T>
__global__ void AllFiniteKernel(View2D<const T> x, int64_t total, int* bad) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x)
    if (!isfinite(x.at(i))) *bad = 1;  // benign race: every writer writes 1
}

// Rows of F columns; gate/up/h each at their own row stride.
template <class T, class Out>
__global__ void SwiGluForwardKernel(const T* gate_up, int64_t gs, Out* h, int64_t hs, int64_t rows, int64_t f) {
  const int64_t total = rows * f;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / f, c = i - r * f;
    const T* g = gate_up + r * gs + c;
    StoreAs(h + r * hs + c, math::SwiGluForward(g[0], g[f]));
  }
}

template <class T, class Out>
__global__ void SwiGluBackwardKernel(const T* gate_up, int64_t gs, const T* dh, int64_t hs, Out* dgate_up, int64_t ds,
                                     int64_t rows, int64_t f) {
  const int64_t total = rows * f;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / f, c = i - r * f;
    const T* g = gate_up + r * gs + c;
    Out* dg = dgate_up + r * ds + c;
    T a, b;
    math::SwiGluBackward(g[0], g[f], dh[r * hs + c], a, b);
    StoreAs(dg, a);
    StoreAs(dg + f, b);
  }
}

template <class T>
__global__ void AdamWKernel(T* param, const T* grad, T* m, T* v, int64_t n, math::AdamWScalars<T> s) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    math::AdamWUpdate(param[i], grad[i], m[i], v[i], s);
}

// One block per token: the pair cos/sin (exact, in double, cast once) into
// shared memory, then every (head, pair) of the token rotated.
template <class T>
__global__ void RopeKernel(T* x, int64_t xs, const int32_t* positions, int heads, int head_dim, int rotary_dim,
                           double theta, double position_scale, int direction) {
  extern __shared__ __align__(16) unsigned char rope_smem[];
  const int half = rotary_dim / 2;
  T* cs = reinterpret_cast<T*>(rope_smem);
  T* sn = cs + half;
  const int64_t t = blockIdx.x;
  const int64_t pos = positions[t];
  for (int j = threadIdx.x; j < half; j += blockDim.x) {
    const double inv_freq = math::RopeInvFreq(j, rotary_dim, theta);
    const double a = math::RopeAngle(pos, inv_freq, position_scale, direction);
    double s, c;
    sincos(a, &s, &c);
    cs[j] = static_cast<T>(c);
    sn[j] = static_cast<T>(s);
  }
  __syncthreads();
  T* row = x + t * xs;
  for (int e = threadIdx.x; e < heads * half; e += blockDim.x) {
    const int h = e / half, j = e - h * half;
    T* x1 = row + static_cast<int64_t>(h) * head_dim + j;
    math::RopeRotate(x1[0], x1[half], cs[j], sn[j]);
  }
}

}  // namespace

void Fill(const Context& c, const Tensor& x, double value) {
  const Layout l = MakeLayout({&x});
  if (l.total() == 0) return;
  DispatchFloat(x.dtype, "Fill", [&](auto tag) {
    using T = decltype(tag);
    FillKernel<T><<<GridFor(l.total()), kThreads, 0, c.stream>>>(MakeView<T>(x, l), l.total(), static_cast<T>(value));
    LONGCTX_CUDA_LAUNCHED();
  });
}

// Same dtype: any dtype, as a 2-D memcpy (rows of cols * elem bytes).
// F32 <-> F64: converted by a kernel.
void Copy(const Context& c, const Tensor& dst, const Tensor& src) {
  bool same = dst.ndim == src.ndim;
  for (int i = 0; same && i < dst.ndim; ++i) same = dst.shape[i] == src.shape[i];
  CHECK(same) << "Copy: " << dst.DebugString() << " vs " << src.DebugString();
  const Layout l = MakeLayout({&dst, &src});
  if (l.total() == 0) return;
  if (dst.dtype == src.dtype) {
    const size_t es = DTypeSize(dst.dtype);
    if (l.flat) {
      LONGCTX_CUDA_CHECK(cudaMemcpyAsync(dst.data, src.data, l.total() * es, cudaMemcpyDefault, c.stream));
    } else {
      LONGCTX_CUDA_CHECK(cudaMemcpy2DAsync(dst.data, dst.stride0() * es, src.data, src.stride0() * es, l.cols * es,
                                           l.rows, cudaMemcpyDefault, c.stream));
    }
    return;
  }
  if (dst.dtype == DType::kBF16 || src.dtype == DType::kBF16) {
    const bool to_bf16 = dst.dtype == DType::kBF16;
    CHECK((to_bf16 ? src.dtype : dst.dtype) == DType::kF32)
        << "Copy: BF16 converts only to and from F32: " << dst.DebugString() << " vs " << src.DebugString();
    if (to_bf16) {
      F32ToBf16Kernel<<<GridFor(l.total()), kThreads, 0, c.stream>>>(MakeView<uint16_t>(dst, l),
                                                                     MakeView<const float>(src, l), l.total());
    } else {
      Bf16ToF32Kernel<<<GridFor(l.total()), kThreads, 0, c.stream>>>(MakeView<float>(dst, l),
                                                                     MakeView<const uint16_t>(src, l), l.total());
    }
    LONGCTX_CUDA_LAUNCHED();
    return;
  }
  DispatchFloat(dst.dtype, "Copy", [&](auto dtag) {
    using D = decltype(dtag);
    DispatchFloat(src.dtype, "Copy", [&](auto stag) {
      using S = decltype(stag);
      if constexpr (!std::is_same_v<D, S>) {
        ConvertKernel<D, S><<<GridFor(l.total()), kThreads, 0, c.stream>>>(MakeView<D>(dst, l),
                                                                             MakeView<const S>(src, l), l.total());
        LONGCTX_CUDA_LAUNCHED();
      }
    });
  });
}

void Axpy(const Context& c, const Tensor& y, double alpha, const Tensor& x) {
  bool same = y.ndim == x.ndim && y.dtype == x.dtype;
  for (int i = 0; same && i < y.ndim; ++i) same = y.shape[i] == x.shape[i];
  CHECK(same) << "Axpy: " << y.DebugString() << " vs " << x.DebugString();
  const Layout l = MakeLayout({&y, &x});
  if (l.total() == 0) return;
  DispatchFloat(y.dtype, "Axpy", [&](auto tag) {
    using T = decltype(tag);
    AxpyKernel<T><<<GridFor(l.total()), kThreads, 0, c.stream>>>(MakeView<T>(y, l), MakeView<const T>(x, l),
                                                                  l.total(), static_cast<T>(alpha));
    LONGCTX_CUDA_LAUNCHED();
  });
}

void Scale(const Context& c, const Tensor& x, double alpha) {
  const Layout l = MakeLayout({&x});
  if (l.total() == 0) return;
  DispatchFloat(x.dtype, "Scale", [&](auto tag) {
    using T = decltype(tag);
    ScaleKernel<T><<<GridFor(l.total()), kThreads, 0, c.stream>>>(MakeView<T>(x, l), l.total(), static_cast<T>(alpha));
    LONGCTX_CUDA_LAUNCHED();
  });
}

double SumSquares(const Context& c, const Tensor& x) {
  const Layout l = MakeLayout({&x});
  if (l.total() == 0) return 0.0;
  // The grid depends only on the element count: same sum on every GPU and run.
  const int blocks = static_cast<int>(std::min<int64_t>((l.total() + kThreads - 1) / kThreads, 1024));
  double* partial = static_cast<double*>(c.workspace->Get(Slot::kReduce, (blocks + 1) * sizeof(double)));
  DispatchFloat(x.dtype, "SumSquares", [&](auto tag) {
    using T = decltype(tag);
    SumSquaresPartialKernel<T><<<blocks, kThreads, 0, c.stream>>>(MakeView<const T>(x, l), l.total(), partial);
    LONGCTX_CUDA_LAUNCHED();
  });
  SumPartialsKernel<<<1, kThreads, 0, c.stream>>>(partial, blocks, partial + blocks);
  LONGCTX_CUDA_LAUNCHED();
  double result = 0;
  LONGCTX_CUDA_CHECK(cudaMemcpyAsync(&result, partial + blocks, sizeof(double), cudaMemcpyDeviceToHost, c.stream));
  LONGCTX_CUDA_CHECK(cudaStreamSynchronize(c.stream));
  return result;
}

bool AllFinite(const Context& c, const Tensor& x) {
  const Layout l = MakeLayout({&x});
  if (l.total() == 0) return true;
  int* bad = static_cast<int*>(c.workspace->Get(Slot::kReduce, sizeof(int)));
  LONGCTX_CUDA_CHECK(cudaMemsetAsync(bad, 0, sizeof(int), c.stream));
  DispatchFloat(x.dtype, "AllFinite", [&](auto tag) {
    using T = decltype(tag);
    AllFiniteKernel<T><<<GridFor(l.total()), kThreads, 0, c.stream>>>(MakeView<const T>(x, l), l.total(), bad);
    LONGCTX_CUDA_LAUNCHED();
  });
  int host_bad = 0;
  LONGCTX_CUDA_CHECK(cudaMemcpyAsync(&host_bad, bad, sizeof(int), cudaMemcpyDeviceToHost, c.stream));
  LONGCTX_CUDA_CHECK(cudaStreamSynchronize(c.stream));
  return host_bad == 0;
}

void SwiGluForward(const Context& c, const Tensor& gate_up, const Tensor& h) {
  const int64_t rows = h.shape[0], f = h.shape[1];
  if (rows * f == 0) return;
  if (h.dtype == DType::kBF16) {  // F32 gate_up (SwiGluParams::Validate)
    SwiGluForwardKernel<float, uint16_t><<<GridFor(rows * f), kThreads, 0, c.stream>>>(
        gate_up.as<const float>(), gate_up.stride0(), h.as<uint16_t>(), h.stride0(), rows, f);
    LONGCTX_CUDA_LAUNCHED();
    return;
  }
  DispatchFloat(gate_up.dtype, "SwiGluForward", [&](auto tag) {
    using T = decltype(tag);
    SwiGluForwardKernel<T, T><<<GridFor(rows * f), kThreads, 0, c.stream>>>(
        gate_up.as<const T>(), gate_up.stride0(), h.as<T>(), h.stride0(), rows, f);
    LONGCTX_CUDA_LAUNCHED();
  });
}

void SwiGluBackward(const Context& c, const Tensor& gate_up, const Tensor& dh, const Tensor& dgate_up) {
  const int64_t rows = dh.shape[0], f = dh.shape[1];
  if (rows * f == 0) return;
  if (dgate_up.dtype == DType::kBF16) {  // F32 inputs (SwiGluParams::Validate)
    SwiGluBackwardKernel<float, uint16_t><<<GridFor(rows * f), kThreads, 0, c.stream>>>(
        gate_up.as<const float>(), gate_up.stride0(), dh.as<const float>(), dh.stride0(), dgate_up.as<uint16_t>(),
        dgate_up.stride0(), rows, f);
    LONGCTX_CUDA_LAUNCHED();
    return;
  }
  DispatchFloat(gate_up.dtype, "SwiGluBackward", [&](auto tag) {
    using T = decltype(tag);
    SwiGluBackwardKernel<T, T><<<GridFor(rows * f), kThreads, 0, c.stream>>>(
        gate_up.as<const T>(), gate_up.stride0(), dh.as<const T>(), dh.stride0(), dgate_up.as<T>(),
        dgate_up.stride0(), rows, f);
    LONGCTX_CUDA_LAUNCHED();
  });
}

void AdamW(const Context& c, const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v, double lr,
           double beta1, double beta2, double eps, double weight_decay, double grad_scale, int64_t step) {
  const int64_t n = param.numel();
  if (n == 0) return;
  DispatchFloat(param.dtype, "AdamW", [&](auto tag) {
    using T = decltype(tag);
    const math::AdamWScalars<T> s = math::MakeAdamWScalars<T>(lr, beta1, beta2, eps, weight_decay, grad_scale, step);
    AdamWKernel<T><<<GridFor(n), kThreads, 0, c.stream>>>(param.as<T>(), grad.as<const T>(), m.as<T>(), v.as<T>(), n,
                                                          s);
    LONGCTX_CUDA_LAUNCHED();
  });
}

void Rope(const Context& c, const Tensor& x, const Tensor& positions, double theta, int rotary_dim,
          double position_scale, int direction) {
  const int64_t n = x.shape[0];
  const int heads = static_cast<int>(x.shape[1]), head_dim = static_cast<int>(x.shape[2]);
  const int rd = rotary_dim == 0 ? head_dim : rotary_dim;
  if (n == 0 || heads == 0 || rd / 2 == 0) return;
  CHECK_LT(n, int64_t{1} << 31) << "Rope: too many tokens for one grid";
  DispatchFloat(x.dtype, "Rope", [&](auto tag) {
    using T = decltype(tag);
    const size_t smem = static_cast<size_t>(rd) * sizeof(T);  // cos and sin of rd/2 pairs
    RopeKernel<T><<<static_cast<unsigned>(n), 128, smem, c.stream>>>(x.as<T>(), x.stride0(),
                                                                     positions.as<const int32_t>(), heads, head_dim,
                                                                     rd, theta, position_scale, direction);
    LONGCTX_CUDA_LAUNCHED();
  });
}

}  // namespace longctx::cuda
