// Why: every matrix product goes to a BLAS: F32 to oneDNN's sgemm or OpenBLAS
// (gemm_library.h says which and why), F64 to OpenBLAS (OpenMP build, one
// thread pool with ours). Row-major views with a strided dimension 0 map
// directly onto leading dimensions, so column slices of fused q|k|v or gate|up
// matrices are never copied. F32 products at MatmulPrecision::kBF16 go to
// gemm_bf16.cc (bf16 operands, fp32 accumulation), and so do products with a
// BF16 operand (GemmParams). Which library and path is
// the caller's MatmulConfig (the backend's options), never a process setting.
#include <cblas.h>
#include <oneapi/dnnl/dnnl.h>


#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/gemm_bf16.h"
#include "kernels/cpu/gemm_library.h"
#include "base/log.h"

namespace longctx::cpu {
const char* OpenBlasCoreName() { return openblas_get_corename(); }

const char* SgemmLibraryName(SgemmLibrary library) {
  return library == SgemmLibrary::kOneDnn ? "onednn" : "openblas";
}

void Sgemm(const GemmParams& p, SgemmLibrary library) {
  const int64_t m = p.trans_a ? p.a.shape[1] : p.a.shape[0];
  const int64_t k = p.trans_a ? p.a.shape[0] : p.a.shape[1];
  const int64_t n = p.trans_b ? p.b.shape[0] : p.b.shape[1];
  if (m == 0 || n == 0) return;
  if (library == SgemmLibrary::kOneDnn) {
    if (k == 0) {  // BLAS semantics: C = beta C (beta = 0 overwrites)
      if (p.beta == 0.0) {
        Fill(p.c, 0.0);
      } else if (p.beta != 1.0) {
        Scale(p.c, p.beta);
      }
      return;
    }
    const dnnl_status_t st = dnnl_sgemm(p.trans_a ? 'T' : 'N', p.trans_b ? 'T' : 'N', m, n, k,
                                        static_cast<float>(p.alpha), p.a.as<const float>(), p.a.stride0(),
                                        p.b.as<const float>(), p.b.stride0(), static_cast<float>(p.beta),
                                        p.c.as<float>(), p.c.stride0());
    CHECK(st == dnnl_success) << "dnnl_sgemm " << m << "x" << n << "x" << k << " failed with status "
                              << static_cast<int>(st);
    return;
  }
  cblas_sgemm(CblasRowMajor, p.trans_a ? CblasTrans : CblasNoTrans, p.trans_b ? CblasTrans : CblasNoTrans,
              static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), static_cast<float>(p.alpha),
              p.a.as<float>(), static_cast<int>(p.a.stride0()), p.b.as<float>(), static_cast<int>(p.b.stride0()),
              static_cast<float>(p.beta), p.c.as<float>(), static_cast<int>(p.c.stride0()));
}

void Gemm(const GemmParams& p, const MatmulConfig& config) {
  const bool bf16_operand = p.a.dtype == DType::kBF16 || p.b.dtype == DType::kBF16;
  if ((config.precision == MatmulPrecision::kBF16 || bf16_operand) && p.c.dtype == DType::kF32) {
    GemmBf16(p, config.bf16, config.sgemm);
    return;
  }
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
      Sgemm(p, config.sgemm);
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
