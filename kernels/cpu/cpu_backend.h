// Why: the CPU backend's own options and queries live with the CPU backend,
// not in the interface every backend shares (kernels/backend.h names no
// backend): which library computes F32 and bf16 products, how the attention
// backward is cut and which instruction set runs its tiles. Whoever makes a
// CPU backend by name (the registry, kernels/backend_registry.h), a CPU
// benchmark or a CPU test includes this header; model code never does.
#ifndef LONGCTX_KERNELS_CPU_CPU_BACKEND_H_
#define LONGCTX_KERNELS_CPU_CPU_BACKEND_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/backend.h"
#include "kernels/cpu/attention_isa.h"

namespace longctx {

// The library that computes F32 products. kAuto = oneDNN's sgemm (faster on
// this project's machines, kernels/cpu/gemm_library.h says why).
enum class GemmLibrary : uint8_t { kAuto = 0, kOneDnn = 1, kOpenBlas = 2 };
// How MatmulPrecision::kBF16 products run (kernels/cpu/gemm_bf16.h).
// kAuto = oneDNN where the CPU has bf16 dot products, else rounded sgemm.
enum class Bf16GemmLibrary : uint8_t { kAuto = 0, kOneDnn = 1, kRoundedSgemm = 2 };

// The most key parts a backward item is cut into (attention_key_parts' bound).
inline constexpr int kMaxAttentionKeyParts = 8;

// What only the CPU backend understands; the defaults are what a CPU backend
// made by name without options runs.
struct CpuBackendOptions {
  GemmLibrary gemm = GemmLibrary::kAuto;
  Bf16GemmLibrary bf16_gemm = Bf16GemmLibrary::kAuto;
  // Key parts per attention backward item (kernels/cpu/attention_driver.h,
  // SegmentKeyParts); 0 = chosen per call for the threads, N = every segment
  // cut into N (`bench attention --key_parts`).
  int attention_key_parts = 0;
  // Which tiles run the attention (kernels/cpu/attention_isa.h); one this CPU
  // cannot run is refused.
  CpuAttentionIsa attention_isa = CpuAttentionIsa::kAuto;
  // false runs bf16 attention on AVX512-BF16 dot products (vdpbf16ps) even
  // where the CPU has AMX, to measure that path on an AMX machine (`bench
  // attention --attention_amx=false`); no effect elsewhere.
  bool attention_amx = true;
};

// "auto", "onednn", "openblas" / "auto", "onednn", "sgemm" (or
// "rounded-sgemm"); InvalidArgument naming the accepted values otherwise.
absl::StatusOr<GemmLibrary> ParseGemmLibrary(std::string_view name);
absl::StatusOr<Bf16GemmLibrary> ParseBf16GemmLibrary(std::string_view name);
const char* GemmLibraryName(GemmLibrary library);          // "auto", "onednn", "openblas"
const char* Bf16GemmLibraryName(Bf16GemmLibrary library);  // "auto", "onednn", "rounded-sgemm"
// "auto", "avx512", "avx2", "scalar"; InvalidArgument naming them otherwise.
absl::StatusOr<CpuAttentionIsa> ParseCpuAttentionIsa(std::string_view name);
const char* CpuAttentionIsaName(CpuAttentionIsa isa);

// OK, or InvalidArgument / FailedPrecondition naming the option no CPU backend
// here can take (negative threads, key parts out of range, an ISA or the
// oneDNN bf16 path this CPU cannot run).
absl::Status ValidateCpuBackendOptions(const BackendOptions& options, const CpuBackendOptions& cpu = {});

// The always-present CPU backend (OpenMP threads, BLAS GEMMs). Aborts, naming
// the option, on options ValidateCpuBackendOptions refuses; MakeBackend
// (kernels/backend_registry.h) returns those as errors.
std::unique_ptr<Backend> MakeCpuBackend(const BackendOptions& options = {}, const CpuBackendOptions& cpu = {});

// The library the CPU backend runs bf16 products on when `asked` for one:
// kAuto resolves to kOneDnn where the CPU has bf16 dot products and oneDNN a
// bf16 matmul, else kRoundedSgemm (the backend's CpuBackendOptionsOf().bf16_gemm).
Bf16GemmLibrary CpuBf16GemmLibrary(Bf16GemmLibrary asked = Bf16GemmLibrary::kAuto);

// The operand copies a CPU backend made with `cpu` keeps for bf16 products
// (its Backend::bf16_operand_copies), known without making one:
//  * oneDNN: each F32 operand rounded to bf16 (2 bytes an element), BF16
//    operands read as they are; the LM head converts each chunk's dlogits
//    row by row into a buffer of exactly their size;
//  * rounded sgemm: every operand, bf16 ones too, as fp32 holding bf16 values
//    (4 bytes an element).
// Each copy's buffer (kernels/cpu/gemm_bf16.h, Bf16Scratch) holds one byte
// more than the copy (PrepareBf16Operand), rounded up to 64 bytes.
Bf16OperandCopies CpuBf16OperandCopies(const CpuBackendOptions& cpu = {});

// The CPU options `backend` runs with, kAuto resolved to the libraries it
// chose; nullopt when `backend` is not a CPU backend.
std::optional<CpuBackendOptions> CpuBackendOptionsOf(const Backend& backend);

}  // namespace longctx

#endif  // LONGCTX_KERNELS_CPU_CPU_BACKEND_H_
