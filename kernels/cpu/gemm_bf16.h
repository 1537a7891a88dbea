// Why: MatmulPrecision::kBF16 on the CPU (bf16 operands, round to nearest
// even, fp32 accumulation) has two implementations, chosen per CPU at run time:
//  * kOneDnn: operands packed to bf16 and multiplied by oneDNN's matmul, which
//    dispatches to AVX512-BF16 (vdpbf16ps) or AMX kernels where the CPU has
//    them. oneDNN 2.6 (Debian 12) offers bf16 matmuls only from avx512_core up
//    (without native bf16 it emulates them), so on an AVX2 machine this path
//    cannot run at all and its tests skip, saying so.
//  * kRoundedSgemm: operands rounded to bf16 values kept in fp32 and multiplied
//    by OpenBLAS sgemm. The products of two bf16 values are exact in fp32, so
//    this computes the same mathematical product as the bf16 dot-product
//    instructions (sums in fp32, order per BLAS); it is the fast path on CPUs
//    without bf16 instructions (AVX2), where it costs an sgemm plus a rounding
//    pass.
// Rounding copies keep each operand's layout (no transposed copies); their
// buffers are per-thread and kept across calls, so a training step does not
// allocate once warm.
#ifndef LONGCTX_KERNELS_CPU_GEMM_BF16_H_
#define LONGCTX_KERNELS_CPU_GEMM_BF16_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "kernels/cpu/gemm_library.h"
#include "kernels/ops.h"
#include "kernels/tensor.h"

namespace longctx::cpu {

// True when oneDNN can dispatch bf16 dot-product instructions here
// (dnnl_get_effective_cpu_isa() includes avx512_core_bf16, or AMX).
bool CpuHasBf16DotProducts();
// True when oneDNN creates a bf16 matmul on this CPU at all (avx512_core+).
bool OneDnnBf16Available();
// OK when `path` can run on this CPU; FailedPrecondition for kOneDnn where
// OneDnnBf16Available() is false.
absl::Status CheckBf16GemmPath(Bf16GemmPath path);
const char* Bf16GemmPathName(Bf16GemmPath path);  // "onednn" or "rounded-sgemm"
// One line for logs and `longctx bench`: the path, why (`chosen` = named in
// the backend's options rather than kAuto), and oneDNN's ISA.
std::string Bf16GemmDescription(Bf16GemmPath path, bool chosen);

// A growable 64-byte-aligned buffer, kept for reuse.
class Bf16Scratch {
 public:
  Bf16Scratch() = default;
  Bf16Scratch(const Bf16Scratch&) = delete;
  Bf16Scratch& operator=(const Bf16Scratch&) = delete;
  ~Bf16Scratch();
  void* Reserve(size_t bytes);

 private:
  struct Free {
    void operator()(void* p) const;
  };
  std::unique_ptr<void, Free> p_;
  size_t bytes_ = 0;
};

// Bytes all Bf16Scratch buffers of the process hold now: the bf16 products'
// operand copies, which the memory plan counts (model/plan.h,
// MemoryPlan::bf16_operand_copies) and a test holds it to.
int64_t Bf16ScratchBytes();

// `src` (F32, 2-D, any row stride) rounded to bf16 for `path`, densely into
// *scratch, same shape and orientation: F32 holding bf16 values for
// kRoundedSgemm, BF16 bits for kOneDnn. OpenMP-parallel over rows when large.
// A BF16 `src` is already rounded: returned as it is for kOneDnn, widened to
// F32 for kRoundedSgemm.
Tensor PrepareBf16Operand(const Tensor& src, Bf16GemmPath path, Bf16Scratch* scratch);

// C (F32) = alpha op(A) op(B) + beta C for A and B prepared for the same path
// (both F32 bf16-valued, or both BF16); F32 operands go to `sgemm`.
void GemmBf16Prepared(const GemmParams& p, SgemmLibrary sgemm = SgemmLibrary::kOneDnn);

// C (F32) = alpha op(A) op(B) + beta C with A and B rounded to bf16 first
// (per-thread scratch); an operand that is BF16 already is used as it is.
void GemmBf16(const GemmParams& p, Bf16GemmPath path, SgemmLibrary sgemm = SgemmLibrary::kOneDnn);

// oneDNN matmul of BF16 A, B into F32 C (gemm_onednn.cc); primitives are
// cached by shape, strides, alpha and beta.
void OneDnnGemmBf16(const GemmParams& p);
// dnnl_get_effective_cpu_isa() by name ("avx2", "avx512_core_bf16", ...).
std::string OneDnnCpuIsaName();
// The oneDNN implementations the cached matmuls use, comma-separated
// (e.g. "brg:avx512_core_amx"): what a benchmark reports as proof of the ISA.
std::string OneDnnImplsUsed();

}  // namespace longctx::cpu

#endif  // LONGCTX_KERNELS_CPU_GEMM_BF16_H_
