// Why: RMSNorm on the GPU. Forward: one block per row, the row's sum of
// squares in double through the fixed-order block reduction, then the shared
// math of kernels/math/rmsnorm.h. Backward: dweight sums over every row, so a
// fixed number of row chunks (independent of the GPU) each own a [D] double
// partial, written by the same thread for the same column every row (no
// atomics), and a second kernel adds the partials in chunk order: dweight is
// bitwise reproducible run to run.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/math/rmsnorm.h"

namespace longctx::cuda {
namespace {

constexpr int64_t kBackwardChunks = 256;

template <class T, class Out>
__global__ void RmsNormForwardKernel(const T* x, int64_t xs, const T* w, Out* y, int64_t ys, T* rstd_out, int64_t d,
                                     double eps) {
  __shared__ double sh[32];
  const int64_t r = blockIdx.x;
  const T* xr = x + r * xs;
  double ss = 0;
  for (int64_t c = threadIdx.x; c < d; c += blockDim.x) ss += static_cast<double>(xr[c]) * static_cast<double>(xr[c]);
  ss = BlockSum(ss, sh);
  const T rstd = static_cast<T>(math::RmsNormRstd<double>(ss, d, eps));
  if (threadIdx.x == 0) rstd_out[r] = rstd;
  Out* yr = y + r * ys;
  for (int64_t c = threadIdx.x; c < d; c += blockDim.x) StoreAs(yr + c, math::RmsNormY(xr[c], rstd, w[c]));
}

// Block b: rows [b * rows_per_chunk, ...) in order; partial[b * d + c] owned by
// the thread that owns column c.
template <class T>
__global__ void RmsNormBackwardKernel(const T* x, int64_t xs, const T* w, const T* rstd_in, const T* dy, int64_t dys,
                                      T* dx, int64_t dxs, double* partial, int64_t n, int64_t d,
                                      int64_t rows_per_chunk, bool accumulate) {
  __shared__ double sh[32];
  double* pw = partial + blockIdx.x * d;
  for (int64_t c = threadIdx.x; c < d; c += blockDim.x) pw[c] = 0.0;
  const int64_t r0 = blockIdx.x * rows_per_chunk;
  const int64_t r1 = r0 + rows_per_chunk < n ? r0 + rows_per_chunk : n;
  for (int64_t r = r0; r < r1; ++r) {
    const T* xr = x + r * xs;
    const T* dyr = dy + r * dys;
    T* dxr = dx + r * dxs;
    const T rstd = rstd_in[r];
    double gx = 0;
    for (int64_t c = threadIdx.x; c < d; c += blockDim.x)
      gx += static_cast<double>(dyr[c]) * static_cast<double>(w[c]) * static_cast<double>(xr[c]);
    gx = BlockSum(gx, sh);  // every read of the row's dy precedes any dx write (dx may alias dy)
    const T coef = static_cast<T>(math::RmsNormBackwardCoef<double>(gx, static_cast<double>(rstd), d));
    for (int64_t c = threadIdx.x; c < d; c += blockDim.x) {
      const T dyc = dyr[c], xc = xr[c];
      pw[c] += math::RmsNormDw<double>(static_cast<double>(dyc), static_cast<double>(xc), static_cast<double>(rstd));
      const T g = math::RmsNormDx(dyc * w[c], xc, rstd, coef);
      dxr[c] = accumulate ? dxr[c] + g : g;
    }
  }
}

template <class T>
__global__ void RmsNormDweightKernel(const double* partial, int64_t chunks, int64_t d, T* dweight) {
  for (int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; c < d; c += int64_t(gridDim.x) * blockDim.x) {
    double s = 0;
    for (int64_t k = 0; k < chunks; ++k) s += partial[k * d + c];
    dweight[c] += static_cast<T>(s);
  }
}

}  // namespace

void RmsNormForward(const Context& c, const Tensor& x, const Tensor& weight, const Tensor& y, const Tensor& rstd,
                    double eps) {
  const int64_t n = x.shape[0], d = x.shape[1];
  if (n == 0) return;
  CHECK_LT(n, int64_t{1} << 31) << "RmsNormForward: too many rows for one grid";
  if (y.dtype == DType::kBF16) {  // F32 x (RmsNormParams::Validate)
    RmsNormForwardKernel<float, uint16_t><<<static_cast<unsigned>(n), kThreads, 0, c.stream>>>(
        x.as<const float>(), x.stride0(), weight.as<const float>(), y.as<uint16_t>(), y.stride0(),
        rstd.as<float>(), d, eps);
    LONGCTX_CUDA_LAUNCHED();
    return;
  }
  DispatchFloat(x.dtype, "RmsNormForward", [&](auto tag) {
    using T = decltype(tag);
    RmsNormForwardKernel<T, T><<<static_cast<unsigned>(n), kThreads, 0, c.stream>>>(
        x.as<const T>(), x.stride0(), weight.as<const T>(), y.as<T>(), y.stride0(), rstd.as<T>(), d, eps);
    LONGCTX_CUDA_LAUNCHED();
  });
}

void RmsNormBackward(const Context& c, const Tensor& x, const Tensor& weight, const Tensor& rstd, const Tensor& dy,
                     const Tensor& dx, const Tensor& dweight, bool accumulate_dx) {
  const int64_t n = x.shape[0], d = x.shape[1];
  if (n == 0 || d == 0) return;
  const int64_t chunks = std::min(n, kBackwardChunks);
  const int64_t rows_per_chunk = (n + chunks - 1) / chunks;
  double* partial = static_cast<double*>(c.workspace->Get(Slot::kRowPartials, chunks * d * sizeof(double)));
  DispatchFloat(x.dtype, "RmsNormBackward", [&](auto tag) {
    using T = decltype(tag);
    RmsNormBackwardKernel<T><<<static_cast<unsigned>(chunks), kThreads, 0, c.stream>>>(
        x.as<const T>(), x.stride0(), weight.as<const T>(), rstd.as<const T>(), dy.as<const T>(), dy.stride0(),
        dx.as<T>(), dx.stride0(), partial, n, d, rows_per_chunk, accumulate_dx);
    LONGCTX_CUDA_LAUNCHED();
    RmsNormDweightKernel<T><<<GridFor(d), kThreads, 0, c.stream>>>(partial, chunks, d, dweight.as<T>());
    LONGCTX_CUDA_LAUNCHED();
  });
}

}  // namespace longctx::cuda
