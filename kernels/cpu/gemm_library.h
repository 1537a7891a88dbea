// Why: F32 products are most of a training step's time, and no one BLAS is
// fastest everywhere. On AVX2 machines oneDNN's JIT sgemm runs the model's
// GEMM shapes (k = 512..2816, fused q|k|v and gate|up, the
// weight-gradient TN products) faster than OpenBLAS (docs/BENCHMARKS.md), while
// OpenBLAS stays the reference BLAS for F64 and a selectable alternative. The
// choice is the backend's (CpuBackendOptions::gemm, kernels/cpu/cpu_backend.h),
// handed to each product in a MatmulConfig, so a benchmark can compare the two
// and a test can run both; both are row-major with leading dimensions, so
// strided views are never copied.
#ifndef LONGCTX_KERNELS_CPU_GEMM_LIBRARY_H_
#define LONGCTX_KERNELS_CPU_GEMM_LIBRARY_H_

#include <cstdint>

#include "kernels/ops.h"

namespace longctx::cpu {

enum class SgemmLibrary : uint8_t { kOneDnn = 0, kOpenBlas = 1 };
// MatmulPrecision::kBF16 products: gemm_bf16.h describes both paths.
enum class Bf16GemmPath : uint8_t { kRoundedSgemm = 0, kOneDnn = 1 };
// The bf16 path a backend with default options takes: kOneDnn when the CPU has
// bf16 dot products and oneDNN offers them, else kRoundedSgemm (decided once
// per process: it depends on the CPU only). gemm_bf16.cc.
Bf16GemmPath AutoBf16GemmPath();

const char* SgemmLibraryName(SgemmLibrary library);  // "onednn" / "openblas"
// The kernels OpenBLAS chose for this CPU as it loaded ("SkylakeX",
// "Haswell", ...; "Prescott" on a CPU newer than the OpenBLAS: `longctx
// bench` then says which OPENBLAS_CORETYPE to start with).
const char* OpenBlasCoreName();

// How one backend's products run: the precision of F32 products, the library
// of F32 sgemm and the path of bf16 products. CpuBackend holds one (from its
// CpuBackendOptions); a kernel test builds its own. The defaults are what a CPU
// backend made with default options uses.
struct MatmulConfig {
  MatmulPrecision precision = MatmulPrecision::kF32;
  SgemmLibrary sgemm = SgemmLibrary::kOneDnn;
  Bf16GemmPath bf16 = AutoBf16GemmPath();
};

// C = alpha op(A) op(B) + beta C, all F32, on `library`.
void Sgemm(const GemmParams& p, SgemmLibrary library);

}  // namespace longctx::cpu

#endif  // LONGCTX_KERNELS_CPU_GEMM_LIBRARY_H_
