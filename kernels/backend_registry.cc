// Why: one place that knows which backends this build has, so the trainer can
// pick one by name ("cpu", "cuda") and get a clear error when it is absent, and
// the one parser of the backend options' names (config, `longctx bench` flags).
#include "absl/strings/str_cat.h"
#include "kernels/backend.h"
#include "kernels/cpu/attention_tiles.h"

namespace longctx {

#ifdef LONGCTX_HAVE_CUDA
absl::StatusOr<std::unique_ptr<Backend>> MakeCudaBackend(const BackendOptions& options);  // kernels/cuda
#endif
// Validates the options the CPU backend cannot take (kernels/cpu/cpu_backend.cc).
absl::Status ValidateCpuBackendOptions(const BackendOptions& options);

absl::StatusOr<std::unique_ptr<Backend>> MakeBackend(const std::string& name, const BackendOptions& options) {
  if (name == "cpu") {
    if (absl::Status st = ValidateCpuBackendOptions(options); !st.ok()) return st;
    return MakeCpuBackend(options);
  }
  if (name == "cuda") {
#ifdef LONGCTX_HAVE_CUDA
    return MakeCudaBackend(options);
#else
    return absl::UnavailableError("backend 'cuda' is not built (configure with -DLONGCTX_CUDA=ON)");
#endif
  }
  return absl::NotFoundError(absl::StrCat("unknown backend '", name, "' (expected cpu or cuda)"));
}

absl::StatusOr<GemmLibrary> ParseGemmLibrary(std::string_view name) {
  if (name == "auto") return GemmLibrary::kAuto;
  if (name == "onednn") return GemmLibrary::kOneDnn;
  if (name == "openblas") return GemmLibrary::kOpenBlas;
  return absl::InvalidArgumentError(absl::StrCat("GEMM library '", std::string(name), "': expected auto, onednn or openblas"));
}

absl::StatusOr<Bf16GemmLibrary> ParseBf16GemmLibrary(std::string_view name) {
  if (name == "auto") return Bf16GemmLibrary::kAuto;
  if (name == "onednn") return Bf16GemmLibrary::kOneDnn;
  if (name == "sgemm" || name == "rounded-sgemm") return Bf16GemmLibrary::kRoundedSgemm;
  return absl::InvalidArgumentError(absl::StrCat("bf16 GEMM path '", std::string(name), "': expected auto, sgemm or onednn"));
}

absl::StatusOr<CpuAttentionIsa> ParseCpuAttentionIsa(std::string_view name) {
  for (CpuAttentionIsa isa :
       {CpuAttentionIsa::kAuto, CpuAttentionIsa::kAvx512, CpuAttentionIsa::kAvx2, CpuAttentionIsa::kScalar})
    if (name == CpuAttentionIsaName(isa)) return isa;
  return absl::InvalidArgumentError(
      absl::StrCat("attention ISA '", std::string(name), "': expected auto, avx512, avx2 or scalar"));
}

const char* CpuAttentionIsaName(CpuAttentionIsa isa) { return cpu::AttentionIsaName(isa); }

const char* GemmLibraryName(GemmLibrary library) {
  switch (library) {
    case GemmLibrary::kOneDnn: return "onednn";
    case GemmLibrary::kOpenBlas: return "openblas";
    default: return "auto";
  }
}

const char* Bf16GemmLibraryName(Bf16GemmLibrary library) {
  switch (library) {
    case Bf16GemmLibrary::kOneDnn: return "onednn";
    case Bf16GemmLibrary::kRoundedSgemm: return "rounded-sgemm";
    default: return "auto";
  }
}

ScopedBackendThreads::ScopedBackendThreads(Backend* backend, int threads) : backend_(backend) {
  if (threads <= 0) return;
  saved_ = backend_->options().threads;
  absl::Status st = backend_->SetThreads(threads);
  active_ = st.ok();
}

ScopedBackendThreads::~ScopedBackendThreads() {
  if (active_) (void)backend_->SetThreads(saved_);
}

}  // namespace longctx
