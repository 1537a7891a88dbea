// Why: RMSNorm on the CPU. Rows are independent, so both passes are threaded
// over rows; row sums are accumulated in double with vectorized (omp simd)
// reductions. dweight sums over every row, so the backward gives each of a
// fixed number of row chunks its own partial (double) and adds the partials in
// chunk order: no atomics, and the result does not depend on the thread count.
#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "kernels/cpu/bf16_output.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/dispatch.h"
#include "base/log.h"
#include "kernels/math/rmsnorm.h"

namespace longctx::cpu {
namespace {

constexpr int64_t kParallelMinElems = 1 << 15;
// Row chunks of the backward (each owns a [D] partial of dweight).
constexpr int64_t kMaxBackwardChunks = 64;

template <class T>
void ForwardImpl(const RmsNormParams& p) {
  const int64_t n = p.x.shape[0], d = p.x.shape[1];
  const int64_t xs = p.x.stride0(), ys = p.y.stride0();
  const T* w = p.weight.as<T>();
  T* rstd_out = p.rstd.as<T>();
  const bool bf16_y = p.y.dtype == DType::kBF16;  // F32 x (RmsNormParams::Validate)
#pragma omp parallel for schedule(static) if (n * d >= kParallelMinElems)
  for (int64_t r = 0; r < n; ++r) {
    const T* x = p.x.as<T>() + r * xs;
    double ss = 0;
#pragma omp simd reduction(+ : ss)
    for (int64_t i = 0; i < d; ++i) ss += static_cast<double>(x[i]) * static_cast<double>(x[i]);
    const T rstd = static_cast<T>(math::RmsNormRstd<double>(ss, d, p.eps));
    rstd_out[r] = rstd;
    if constexpr (std::is_same_v<T, float>) {
      if (bf16_y) {
        StoreAsBf16(p.y.as<uint16_t>() + r * ys, d, [&](int64_t i) { return math::RmsNormY(x[i], rstd, w[i]); });
        continue;
      }
    }
    T* y = p.y.as<T>() + r * ys;
    for (int64_t i = 0; i < d; ++i) y[i] = math::RmsNormY(x[i], rstd, w[i]);
  }
}

template <class T>
void BackwardImpl(const RmsNormParams& p) {
  const int64_t n = p.x.shape[0], d = p.x.shape[1];
  if (n == 0 || d == 0) return;
  const int64_t xs = p.x.stride0(), dys = p.dy.stride0(), dxs = p.dx.stride0();
  const T* w = p.weight.as<T>();
  const T* rstd_in = p.rstd.as<T>();
  const bool accumulate = p.accumulate_dx;
  const int64_t chunks = std::min(n, kMaxBackwardChunks);
  const int64_t rows_per_chunk = (n + chunks - 1) / chunks;
  std::vector<double> partial(static_cast<size_t>(chunks * d), 0.0);

#pragma omp parallel for schedule(static) if (n * d >= kParallelMinElems)
  for (int64_t c = 0; c < chunks; ++c) {
    double* dw = partial.data() + c * d;
    const int64_t r1 = std::min(n, (c + 1) * rows_per_chunk);
    for (int64_t r = c * rows_per_chunk; r < r1; ++r) {
      const T* x = p.x.as<T>() + r * xs;
      const T* dy = p.dy.as<T>() + r * dys;
      T* dx = p.dx.as<T>() + r * dxs;
      const T rstd = rstd_in[r];
      double gx = 0;
#pragma omp simd reduction(+ : gx)
      for (int64_t i = 0; i < d; ++i)
        gx += static_cast<double>(dy[i]) * static_cast<double>(w[i]) * static_cast<double>(x[i]);
      const T coef = static_cast<T>(math::RmsNormBackwardCoef<double>(gx, static_cast<double>(rstd), d));
      // dw before dx: dx may alias dy (in-place backward).
      for (int64_t i = 0; i < d; ++i)
        dw[i] += math::RmsNormDw<double>(static_cast<double>(dy[i]), static_cast<double>(x[i]),
                                         static_cast<double>(rstd));
      if (accumulate) {
        for (int64_t i = 0; i < d; ++i) dx[i] += math::RmsNormDx(dy[i] * w[i], x[i], rstd, coef);
      } else {
        for (int64_t i = 0; i < d; ++i) dx[i] = math::RmsNormDx(dy[i] * w[i], x[i], rstd, coef);
      }
    }
  }

  T* dweight = p.dweight.as<T>();
#pragma omp parallel for schedule(static) if (chunks * d >= kParallelMinElems)
  for (int64_t i = 0; i < d; ++i) {
    double s = 0;
    for (int64_t c = 0; c < chunks; ++c) s += partial[c * d + i];
    dweight[i] += static_cast<T>(s);
  }
}

}  // namespace

void RmsNormForward(const RmsNormParams& p) {
  DispatchFloat(p.x.dtype, "RmsNormForward", [&](auto tag) { ForwardImpl<decltype(tag)>(p); });
}

void RmsNormBackward(const RmsNormParams& p) {
  DispatchFloat(p.x.dtype, "RmsNormBackward", [&](auto tag) { BackwardImpl<decltype(tag)>(p); });
}

}  // namespace longctx::cpu
