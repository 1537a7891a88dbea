// Why: MakeBackend by name: the one place that links every backend this build
// has, so the trainer can pick one by name and get a clear error when it is
// absent, and the one place that passes each backend its own options (and
// refuses another backend's). See backend_registry.h.
#include "kernels/backend_registry.h"

#include "absl/strings/str_cat.h"
#include "kernels/cpu/cpu_backend.h"
#ifdef LONGCTX_HAVE_CUDA
#include "kernels/cuda/cuda_backend.h"
#endif

namespace longctx {
namespace {

#ifdef LONGCTX_HAVE_CUDA
// The CPU options differ from their defaults: a backend that is not the CPU
// one refuses them, naming the first (`backend` names it in the message).
absl::Status RefuseCpuOptions(const std::string& backend, const CpuBackendOptions& cpu) {
  const CpuBackendOptions none;
  const std::string who = absl::StrCat(backend, " backend: ");
  if (cpu.gemm != none.gemm)
    return absl::InvalidArgumentError(absl::StrCat(who, "GEMM library '", GemmLibraryName(cpu.gemm),
                                                   "' is a CPU option (the backend's own library computes products here)"));
  if (cpu.bf16_gemm != none.bf16_gemm)
    return absl::InvalidArgumentError(absl::StrCat(who, "bf16 GEMM path '", Bf16GemmLibraryName(cpu.bf16_gemm),
                                                   "' is a CPU option (the backend's own library computes products here)"));
  if (cpu.attention_key_parts != none.attention_key_parts)
    return absl::InvalidArgumentError(absl::StrCat(who, "attention key parts are a CPU option"));
  if (cpu.attention_isa != none.attention_isa)
    return absl::InvalidArgumentError(absl::StrCat(who, "the attention ISA (--attention_isa) is a CPU option"));
  if (cpu.attention_amx != none.attention_amx)
    return absl::InvalidArgumentError(absl::StrCat(who, "--attention_amx is a CPU option"));
  return absl::OkStatus();
}
#endif

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> MakeBackend(const std::string& name, const BackendSettings& settings) {
  absl::StatusOr<BackendInfo> info = FindBackend(name);
  if (!info.ok()) return info.status();
  const BackendOptions& common = settings;
  if (info->device == Device::kCpu) {
    if (absl::Status st = ValidateCpuBackendOptions(common, settings.cpu); !st.ok()) return st;
    return MakeCpuBackend(common, settings.cpu);
  }
#ifdef LONGCTX_HAVE_CUDA
  if (absl::Status st = RefuseCpuOptions(name, settings.cpu); !st.ok()) return st;
  return MakeCudaBackend(common);
#else
  return absl::UnavailableError(
      absl::StrCat("backend '", name, "' is not built (configure with -DLONGCTX_CUDA=ON)"));
#endif
}

absl::StatusOr<Bf16OperandCopies> BackendBf16OperandCopies(std::string_view name, const BackendSettings& settings) {
  absl::StatusOr<BackendInfo> info = FindBackend(name);
  if (!info.ok()) return info.status();
  // The CPU backend copies operands for its libraries; the CUDA kernels round
  // operands as they load them (nothing kept).
  if (info->device == Device::kCpu) return CpuBf16OperandCopies(settings.cpu);
  return Bf16OperandCopies{};
}

}  // namespace longctx
