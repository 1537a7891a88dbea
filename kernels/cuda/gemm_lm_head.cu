// Why: every matrix product goes to cuBLAS, and the LM head's cross-entropy is
// built on it the way the CPU backend builds it on BLAS: per chunk of
// chunk_tokens rows, logits = x_chunk W^T (cuBLAS) into one [chunk, V] scratch,
// a block-per-row stable log-softmax kernel (row max, sum of exp in double
// with the fixed-order block reduction, the shared math of
// kernels/math/cross_entropy.h) that overwrites the logits with dlogits, then
// cuBLAS for dx_chunk = dlogits W and dW += dlogits^T x_chunk. Per-row losses
// are kept in double and summed in index order by one block at the end, so the
// loss is reproducible run to run.
//
// Row-major on column-major cuBLAS: a row-major [r, c] matrix with leading
// dimension ld is the column-major [c, r] matrix with the same ld, its
// transpose. So C = op(A) op(B) (row-major) is computed as
// C^T = op(B)^T op(A)^T (column-major), i.e. cublas?gemm(opB, opA, n, m, k,
// B, ldb, A, lda, C, ldc) with every leading dimension a Tensor::stride0().
// The handle stays in CUBLAS_DEFAULT_MATH: no TF32, so F32 GEMMs match the CPU
// backend's to ~1e-6 relative. At MatmulPrecision::kBF16 (Context::bf16_matmul)
// F32 GEMMs go to cublasGemmEx with CUBLAS_COMPUTE_32F_FAST_16BF instead; a
// product with a BF16 operand (GemmParams) always runs on bf16 operands.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/math/cross_entropy.h"
#include "kernels/math/online_softmax.h"

namespace longctx::cuda {
namespace {

// Block per row of a [m, vocab] logits chunk. row_loss, losses and targets
// point at the chunk's first token.
template <class T>
__global__ void CrossEntropyRowsKernel(T* logits, int64_t vocab, const int32_t* targets, bool backward, T grad_scale,
                                       double* row_loss, T* losses, int64_t losses_stride, int* error_word) {
  __shared__ double shd[32];
  __shared__ T sht[32];
  const int64_t r = blockIdx.x;
  T* row = logits + r * vocab;
  const int32_t target = targets[r];
  bool ignored = math::CrossEntropyIgnored(target);
  if (!ignored && target >= vocab) {
    if (threadIdx.x == 0) atomicOr(error_word, kErrTarget);
    ignored = true;
  }
  if (ignored) {  // uniform over the block
    if (backward)
      for (int64_t v = threadIdx.x; v < vocab; v += blockDim.x) row[v] = T(0);
    if (threadIdx.x == 0) {
      row_loss[r] = 0.0;
      if (losses) losses[r * losses_stride] = T(0);
    }
    return;
  }
  const T target_logit = row[target];  // read by all before any write (BlockMax syncs)
  T mx = math::NegInf<T>();
  for (int64_t v = threadIdx.x; v < vocab; v += blockDim.x) mx = row[v] > mx ? row[v] : mx;
  mx = BlockMax(mx, sht);
  double sum = 0.0;
  for (int64_t v = threadIdx.x; v < vocab; v += blockDim.x) {
    const T e = math::ShiftedExp(row[v], mx);
    if (backward) row[v] = e;
    sum += static_cast<double>(e);
  }
  sum = BlockSum(sum, shd);
  const double lse = math::LogSumExpFromShifted<double>(static_cast<double>(mx), sum);
  const double loss = math::CrossEntropyLoss<double>(lse, static_cast<double>(target_logit));
  if (threadIdx.x == 0) {
    row_loss[r] = loss;
    if (losses) losses[r * losses_stride] = static_cast<T>(loss);
  }
  if (backward) {
    const T inv_sum = static_cast<T>(1.0 / sum);
    for (int64_t v = threadIdx.x; v < vocab; v += blockDim.x)
      row[v] = math::CrossEntropyGrad(row[v] * inv_sum, v == target, grad_scale);
  }
}

// One block: *out = sum of x[0..n) in a fixed order.
__global__ void SumDoublesKernel(const double* x, int64_t n, double* out) {
  __shared__ double sh[32];
  double s = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += x[i];
  s = BlockSum(s, sh);
  if (threadIdx.x == 0) *out = s;
}

int Ld(const Tensor& t) { return static_cast<int>(std::max<int64_t>(1, t.stride0())); }

}  // namespace

void Gemm(const Context& c, const Tensor& a, const Tensor& b, const Tensor& out, bool trans_a, bool trans_b,
          double alpha, double beta) {
  const int64_t m = trans_a ? a.shape[1] : a.shape[0];
  const int64_t k = trans_a ? a.shape[0] : a.shape[1];
  const int64_t n = trans_b ? b.shape[0] : b.shape[1];
  if (m == 0 || n == 0) return;
  if (k == 0) {  // C = beta C (BLAS semantics: beta = 0 overwrites)
    if (beta == 0.0) {
      Fill(c, out, 0.0);
    } else if (beta != 1.0) {
      Scale(c, out, beta);
    }
    return;
  }
  CHECK(m < (int64_t{1} << 31) && n < (int64_t{1} << 31) && k < (int64_t{1} << 31)) << "Gemm: dimension too large";
  CHECK(a.stride0() < (int64_t{1} << 31) && b.stride0() < (int64_t{1} << 31) && out.stride0() < (int64_t{1} << 31))
      << "Gemm: leading dimension too large";
  const cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int mi = static_cast<int>(m), ni = static_cast<int>(n), ki = static_cast<int>(k);
  switch (out.dtype) {
    case DType::kF32: {
      const float al = static_cast<float>(alpha), be = static_cast<float>(beta);
      if (a.dtype == DType::kBF16 || b.dtype == DType::kBF16) {
        // A BF16 operand (GemmParams): a bf16 product whatever the precision;
        // an F32 partner is rounded like Copy rounds (at most one of the two).
        auto as_bf16 = [&](const Tensor& t) {
          if (t.dtype == DType::kBF16) return t;
          const Tensor dense(c.workspace->Get(Slot::kGemmOperand, static_cast<size_t>(t.numel()) * 2), DType::kBF16,
                             {t.shape[0], t.shape[1]}, t.device);
          Copy(c, dense, t);
          return dense;
        };
        const Tensor a16 = as_bf16(a), b16 = as_bf16(b);
        LONGCTX_CUBLAS_CHECK(cublasGemmEx(c.blas, op_b, op_a, ni, mi, ki, &al, b16.data, CUDA_R_16BF, Ld(b16),
                                          a16.data, CUDA_R_16BF, Ld(a16), &be, out.as<float>(), CUDA_R_32F, Ld(out),
                                          CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        break;
      }
      if (c.bf16_matmul) {  // bf16 operands on the tensor cores, fp32 accumulation and output
        LONGCTX_CUBLAS_CHECK(cublasGemmEx(c.blas, op_b, op_a, ni, mi, ki, &al, b.as<const float>(), CUDA_R_32F, Ld(b),
                                          a.as<const float>(), CUDA_R_32F, Ld(a), &be, out.as<float>(), CUDA_R_32F,
                                          Ld(out), CUBLAS_COMPUTE_32F_FAST_16BF, CUBLAS_GEMM_DEFAULT));
        break;
      }
      LONGCTX_CUBLAS_CHECK(cublasSgemm(c.blas, op_b, op_a, ni, mi, ki, &al, b.as<const float>(), Ld(b),
                                       a.as<const float>(), Ld(a), &be, out.as<float>(), Ld(out)));
      break;
    }
    case DType::kF64:
      LONGCTX_CUBLAS_CHECK(cublasDgemm(c.blas, op_b, op_a, ni, mi, ki, &alpha, b.as<const double>(), Ld(b),
                                       a.as<const double>(), Ld(a), &beta, out.as<double>(), Ld(out)));
      break;
    default:
      LOG(FATAL) << "Gemm: unsupported dtype " << DTypeName(out.dtype);
  }
}

double LmHeadLoss(const Context& c, const LmHeadArgs& a) {
  const int64_t n = a.x.shape[0], vocab = a.weight.shape[0];
  if (n == 0) return 0.0;
  const int64_t chunk = std::min<int64_t>(a.chunk_tokens, n);
  const bool want_dx = a.dx.defined(), want_dw = a.dweight.defined();
  const bool backward = want_dx || want_dw;
  double* row_loss = static_cast<double*>(c.workspace->Get(Slot::kRowLoss, n * sizeof(double)));
  double* total = static_cast<double*>(c.workspace->Get(Slot::kReduce, sizeof(double)));
  const int32_t* targets = a.targets.as<const int32_t>();
  DispatchFloat(a.x.dtype, "LmHeadLoss", [&](auto tag) {
    using T = decltype(tag);
    T* logits = static_cast<T*>(c.workspace->Get(Slot::kLogits, chunk * vocab * sizeof(T)));
    T* losses = a.losses.defined() ? a.losses.as<T>() : nullptr;
    const int64_t ls = a.losses.defined() ? a.losses.stride0() : 0;
    for (int64_t t0 = 0; t0 < n; t0 += chunk) {
      const int64_t m = std::min(chunk, n - t0);
      const Tensor x_chunk = a.x.Rows(t0, t0 + m);
      const Tensor l(logits, a.x.dtype, {m, vocab}, Device::kCuda);
      Gemm(c, x_chunk, a.weight, l, false, true, 1.0, 0.0);
      CrossEntropyRowsKernel<T><<<static_cast<unsigned>(m), kThreads, 0, c.stream>>>(
          logits, vocab, targets + t0, backward, static_cast<T>(a.grad_scale), row_loss + t0,
          losses ? losses + t0 * ls : nullptr, ls, c.error_word);
      LONGCTX_CUDA_LAUNCHED();
      if (want_dx) Gemm(c, l, a.weight, a.dx.Rows(t0, t0 + m), false, false, 1.0, 0.0);  // dx = dlogits W
      if (want_dw) Gemm(c, l, x_chunk, a.dweight, true, false, 1.0, 1.0);             // dW += dlogits^T x
    }
  });
  SumDoublesKernel<<<1, kThreads, 0, c.stream>>>(row_loss, n, total);
  LONGCTX_CUDA_LAUNCHED();
  double result = 0.0;
  LONGCTX_CUDA_CHECK(cudaMemcpyAsync(&result, total, sizeof(double), cudaMemcpyDeviceToHost, c.stream));
  LONGCTX_CUDA_CHECK(cudaStreamSynchronize(c.stream));
  return result;
}

}  // namespace longctx::cuda
