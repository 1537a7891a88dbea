// Why: F32 products are most of a training step's time, and no one BLAS is
// fastest everywhere. On this project's 2-core AVX2 machine oneDNN's JIT sgemm
// ran the model's GEMM shapes (k = 512..2816, fused q|k|v and gate|up, the
// weight-gradient TN products) 10-80 % faster than OpenBLAS 0.3.21, while
// OpenBLAS stays the reference BLAS for F64 and a selectable alternative. The
// choice is one process-wide setting so a benchmark can compare the two and a
// test can run both; both are row-major with leading dimensions, so strided
// views are never copied.
#ifndef LONGCTX_KERNELS_CPU_GEMM_LIBRARY_H_
#define LONGCTX_KERNELS_CPU_GEMM_LIBRARY_H_

#include <cstdint>
#include <optional>

#include "absl/status/status.h"
#include "kernels/ops.h"

namespace longctx::cpu {

enum class SgemmLibrary : uint8_t { kOneDnn = 0, kOpenBlas = 1 };

// LONGCTX_SGEMM=onednn|openblas (read once; anything else aborts naming the
// variable), else the override set below, else kOneDnn.
SgemmLibrary DefaultSgemmLibrary();
void SetSgemmLibrary(std::optional<SgemmLibrary> library);  // nullopt = back to the default
const char* SgemmLibraryName(SgemmLibrary library);          // "onednn" / "openblas"

// C = alpha op(A) op(B) + beta C, all F32, on `library`.
void Sgemm(const GemmParams& p, SgemmLibrary library);

}  // namespace longctx::cpu

#endif  // LONGCTX_KERNELS_CPU_GEMM_LIBRARY_H_
