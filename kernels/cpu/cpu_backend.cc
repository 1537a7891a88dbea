// Why: the CPU backend is a thin shell: validate each op's params once, then
// call the free-function kernel (cpu_kernels.h). Host memory, 64-byte aligned.
// Its settings are its own (BackendOptions): the products' library and bf16
// path travel to the kernels in a MatmulConfig, and the thread count is
// applied to OpenMP and OpenBLAS when the backend is made, when SetThreads
// changes it, and again on entry to an op if something else changed the
// libraries' counts in between (OpenMP and OpenBLAS counts are per process).
#include <cblas.h>
#include <omp.h>

#include <cstdlib>
#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"
#include "kernels/backend.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/gemm_bf16.h"
#include "kernels/cpu/gemm_library.h"
#include "kernels/cpu/huge_pages.h"
#include "base/log.h"

namespace longctx {
namespace {

#define VALIDATED(p, ...)                                  \
  do {                                                     \
    EnterOp();                                             \
    absl::Status _st = (p).Validate(__VA_ARGS__);          \
    CHECK(_st.ok()) << _st;                                \
  } while (0)

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(const BackendOptions& options)
      : default_omp_(omp_get_max_threads()), default_blas_(openblas_get_num_threads()) {
    options_ = options;
    matmul_.sgemm = options.gemm == GemmLibrary::kOpenBlas ? cpu::SgemmLibrary::kOpenBlas : cpu::SgemmLibrary::kOneDnn;
    options_.gemm = options.gemm == GemmLibrary::kOpenBlas ? GemmLibrary::kOpenBlas : GemmLibrary::kOneDnn;
    bf16_chosen_ = options.bf16_gemm != Bf16GemmLibrary::kAuto;
    options_.bf16_gemm = CpuBf16GemmLibrary(options.bf16_gemm);
    matmul_.bf16 = options_.bf16_gemm == Bf16GemmLibrary::kOneDnn ? cpu::Bf16GemmPath::kOneDnn
                                                                  : cpu::Bf16GemmPath::kRoundedSgemm;
    if (options_.threads > 0) ApplyThreads();  // 0: leave the libraries' counts untouched
  }

  Device device() const override { return Device::kCpu; }
  std::string name() const override { return "cpu"; }

  void* Alloc(size_t bytes) override {
    size_t rounded = (bytes + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
    CHECK(p != nullptr) << "CPU allocation of " << bytes << " bytes failed";
    cpu::AdviseHugePages(p, rounded);  // the arena and long-sequence tensors: 2 MiB pages (huge_pages.h)
    return p;
  }
  void Free(void* p) override { std::free(p); }
  void CopyFromHost(const Tensor& dst, const void* src) override {
    CHECK(dst.contiguous());
    std::memcpy(dst.data, src, dst.nbytes());
  }
  void CopyToHost(void* dst, const Tensor& src) override {
    CHECK(src.contiguous());
    std::memcpy(dst, src.data, src.nbytes());
  }
  void Synchronize() override {}

  void Fill(const Tensor& x, double value) override { EnterOp(); cpu::Fill(x, value); }
  void Copy(const Tensor& dst, const Tensor& src) override { EnterOp(); cpu::Copy(dst, src); }
  void Axpy(const Tensor& y, double alpha, const Tensor& x) override { EnterOp(); cpu::Axpy(y, alpha, x); }
  void Scale(const Tensor& x, double alpha) override { EnterOp(); cpu::Scale(x, alpha); }
  double SumSquares(const Tensor& x) override { EnterOp(); return cpu::SumSquares(x); }
  bool AllFinite(const Tensor& x) override { EnterOp(); return cpu::AllFinite(x); }

  void Gemm(const GemmParams& p) override { VALIDATED(p); cpu::Gemm(p, matmul_); }
  void EmbeddingForward(const EmbeddingParams& p) override { VALIDATED(p); cpu::EmbeddingForward(p); }
  void EmbeddingBackward(const EmbeddingParams& p) override { VALIDATED(p); cpu::EmbeddingBackward(p); }
  void RmsNormForward(const RmsNormParams& p) override { VALIDATED(p, false); cpu::RmsNormForward(p); }
  void RmsNormBackward(const RmsNormParams& p) override { VALIDATED(p, true); cpu::RmsNormBackward(p); }
  void Rope(const RopeParams& p) override { VALIDATED(p); cpu::Rope(p); }
  void SwiGluForward(const SwiGluParams& p) override { VALIDATED(p, false); cpu::SwiGluForward(p); }
  void SwiGluBackward(const SwiGluParams& p) override { VALIDATED(p, true); cpu::SwiGluBackward(p); }
  // At precision bf16 the attention tiles are bf16 too where the CPU has AMX
  // (cpu_kernels.h AttentionConfig); elsewhere attention stays fp32.
  void AttentionForward(const AttentionParams& p) override {
    VALIDATED(p, false);
    cpu::AttentionForward(p, AttentionConfig());
  }
  void AttentionBackward(const AttentionParams& p) override {
    VALIDATED(p, true);
    cpu::AttentionBackward(p, AttentionConfig());
  }
  cpu::AttentionConfig AttentionConfig() const {
    cpu::AttentionConfig c;
    c.bf16 = matmul_.precision == MatmulPrecision::kBF16;
    c.backward_key_parts = options_.attention_key_parts;
    c.isa = options_.attention_isa;
    c.bf16_amx = options_.attention_amx;
    return c;
  }
  void AttentionMerge(const AttentionMergeParams& p) override { VALIDATED(p); cpu::AttentionMerge(p); }
  double LmHeadLoss(const LmHeadLossParams& p) override { VALIDATED(p); return cpu::LmHeadLoss(p, matmul_); }
  void AdamW(const AdamWParams& p) override { VALIDATED(p); cpu::AdamW(p); }

  // bf16: kernels/cpu/gemm_bf16.h (oneDNN or rounded operands + sgemm, per CPU).
  absl::Status SetMatmulPrecision(MatmulPrecision p) override {
    matmul_.precision = p;
    return absl::OkStatus();
  }
  MatmulPrecision matmul_precision() const override { return matmul_.precision; }

  BackendOptions options() const override { return options_; }
  absl::Status SetThreads(int threads) override {
    if (threads < 0) return absl::InvalidArgumentError(absl::StrCat("cpu backend: threads must be >= 0 (got ", threads, ")"));
    options_.threads = threads;
    ApplyThreads();
    return absl::OkStatus();
  }
  std::string MatmulDescription() const override {
    const std::string fp32 = cpu::SgemmLibraryName(matmul_.sgemm);
    if (matmul_.precision == MatmulPrecision::kBF16)
      return absl::StrCat(cpu::Bf16GemmDescription(matmul_.bf16, bf16_chosen_), "; fp32 products on ", fp32);
    return absl::StrCat("fp32 sgemm: ", fp32);
  }

 private:
  // threads > 0: that count for OpenMP and OpenBLAS; 0: the counts the
  // libraries had when this backend was made (their defaults, normally).
  void ApplyThreads() {
    if (options_.threads > 0) {
      omp_set_num_threads(options_.threads);
      openblas_set_num_threads(options_.threads);
    } else {  // OpenBLAS (OpenMP build) sets OpenMP's count too: OpenMP's last
      openblas_set_num_threads(default_blas_);
      omp_set_num_threads(default_omp_);
    }
  }
  // Cheap check on every op: two queries, a set only when someone else moved them.
  void EnterOp() {
    if (options_.threads > 0 &&
        (omp_get_max_threads() != options_.threads || openblas_get_num_threads() != options_.threads))
      ApplyThreads();
  }

  BackendOptions options_;
  cpu::MatmulConfig matmul_;
  bool bf16_chosen_ = false;
  const int default_omp_, default_blas_;
};

}  // namespace

absl::Status ValidateCpuBackendOptions(const BackendOptions& options) {
  if (!cpu::AttentionIsaSupported(options.attention_isa))
    return absl::InvalidArgumentError(absl::StrCat("cpu backend: attention ISA ",
                                                   cpu::AttentionIsaName(options.attention_isa),
                                                   " is not supported by this CPU"));
  if (options.threads < 0)
    return absl::InvalidArgumentError(absl::StrCat("cpu backend: threads must be >= 0 (got ", options.threads, ")"));
  if (options.attention_key_parts < 0 || options.attention_key_parts > kMaxAttentionKeyParts)
    return absl::InvalidArgumentError(absl::StrCat("cpu backend: attention key parts must be 0 (automatic) to ",
                                                   kMaxAttentionKeyParts, " (got ", options.attention_key_parts, ")"));
  if (options.bf16_gemm == Bf16GemmLibrary::kOneDnn) {
    absl::Status st = cpu::CheckBf16GemmPath(cpu::Bf16GemmPath::kOneDnn);
    if (!st.ok()) return absl::Status(st.code(), absl::StrCat("cpu backend: ", st.message()));
  }
  return absl::OkStatus();
}

Bf16GemmLibrary CpuBf16GemmLibrary(Bf16GemmLibrary asked) {
  if (asked != Bf16GemmLibrary::kAuto) return asked;
  return cpu::AutoBf16GemmPath() == cpu::Bf16GemmPath::kOneDnn ? Bf16GemmLibrary::kOneDnn
                                                               : Bf16GemmLibrary::kRoundedSgemm;
}

std::unique_ptr<Backend> MakeCpuBackend(const BackendOptions& options) {
  absl::Status st = ValidateCpuBackendOptions(options);
  CHECK(st.ok()) << st;
  return std::make_unique<CpuBackend>(options);
}

}  // namespace longctx
