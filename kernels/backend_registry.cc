// Why: one place that knows which backends this build has, so the trainer can
// pick one by name ("cpu", "cuda") and get a clear error when it is absent.
#include "absl/strings/str_cat.h"
#include "kernels/backend.h"

namespace longctx {

#ifdef LONGCTX_HAVE_CUDA
absl::StatusOr<std::unique_ptr<Backend>> MakeCudaBackend();  // kernels/cuda
#endif

absl::StatusOr<std::unique_ptr<Backend>> MakeBackend(const std::string& name) {
  if (name == "cpu") return MakeCpuBackend();
  if (name == "cuda") {
#ifdef LONGCTX_HAVE_CUDA
    return MakeCudaBackend();
#else
    return absl::UnavailableError("backend 'cuda' is not built (configure with -DLONGCTX_CUDA=ON)");
#endif
  }
  return absl::NotFoundError(absl::StrCat("unknown backend '", name, "' (expected cpu or cuda)"));
}

}  // namespace longctx
