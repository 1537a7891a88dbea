// Why: every matrix product goes to BLAS (OpenBLAS, OpenMP build). Row-major
// views with a strided dimension 0 map directly onto BLAS leading dimensions,
// so column slices of fused q|k|v or gate|up matrices are never copied.
#include <cblas.h>

#include "kernels/log.h"
#include "kernels/cpu/cpu_kernels.h"

namespace longctx::cpu {

void Gemm(const GemmParams& p) {
  const int m = static_cast<int>(p.trans_a ? p.a.shape[1] : p.a.shape[0]);
  const int k = static_cast<int>(p.trans_a ? p.a.shape[0] : p.a.shape[1]);
  const int n = static_cast<int>(p.trans_b ? p.b.shape[0] : p.b.shape[1]);
  if (m == 0 || n == 0) return;
  const CBLAS_TRANSPOSE ta = p.trans_a ? CblasTrans : CblasNoTrans;
  const CBLAS_TRANSPOSE tb = p.trans_b ? CblasTrans : CblasNoTrans;
  const int lda = static_cast<int>(p.a.stride0());
  const int ldb = static_cast<int>(p.b.stride0());
  const int ldc = static_cast<int>(p.c.stride0());
  switch (p.c.dtype) {
    case DType::kF32:
      cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, static_cast<float>(p.alpha), p.a.as<float>(), lda,
                  p.b.as<float>(), ldb, static_cast<float>(p.beta), p.c.as<float>(), ldc);
      break;
    case DType::kF64:
      cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, p.alpha, p.a.as<double>(), lda, p.b.as<double>(), ldb,
                  p.beta, p.c.as<double>(), ldc);
      break;
    default:
      LOG(FATAL) << "Gemm: unsupported dtype " << DTypeName(p.c.dtype);
  }
}

}  // namespace longctx::cpu
