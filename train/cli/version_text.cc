// Why: see version_text.h. The CPU facts are asked of the CPU backend's own
// checks (through the registry header), so this text says what a run would
// get, not what the compiler flags suggest.
#include "train/cli/version_text.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/version.h"
#include "kernels/backend_registry.h"

namespace longctx::cli {

std::string VersionText() {
  std::string out = absl::StrCat("longctx ", LongctxVersion(), " (", LongctxGitDescription(), ")\n");
  absl::StrAppend(&out, "build: ", *LongctxBuildType() == '\0' ? "no build type" : LongctxBuildType(), ", ",
                  LongctxBuiltNative() ? "compiled for the building machine's CPU (-march=native)"
                                       : "generic CPU code (LONGCTX_NATIVE=OFF)",
                  "\n");
  absl::StrAppend(&out, "backends: cpu, cuda ",
                  LongctxBuiltWithCuda() ? "(built; needs an NVIDIA GPU at run time)"
                                         : "(not built: configure with -DLONGCTX_CUDA=ON)",
                  "\n");
  // The attention tiles' ISA dispatch: which this CPU (and build) can run.
  std::vector<std::string> runs;
  for (CpuAttentionIsa isa : {CpuAttentionIsa::kAvx512, CpuAttentionIsa::kAvx2, CpuAttentionIsa::kScalar}) {
    CpuBackendOptions cpu;
    cpu.attention_isa = isa;
    if (ValidateCpuBackendOptions(BackendOptions{}, cpu).ok()) runs.push_back(CpuAttentionIsaName(isa));
  }
  absl::StrAppend(&out, "cpu attention ISA dispatch: ", absl::StrJoin(runs, ", "), " on this CPU (auto picks ",
                  runs.empty() ? "none" : runs.front(), "); bf16 products: ",
                  Bf16GemmLibraryName(CpuBf16GemmLibrary()));
  return out;
}

}  // namespace longctx::cli
