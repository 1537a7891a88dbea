// Why: the CPU backend is a thin shell: validate each op's params once, then
// call the free-function kernel (cpu_kernels.h). Host memory, 64-byte aligned.
// Its settings are its own (BackendOptions and CpuBackendOptions,
// cpu_backend.h): the products' library and bf16 path travel to the kernels in a MatmulConfig, and the thread count is
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
#include "kernels/cpu/attention_tiles.h"
#include "kernels/cpu/cpu_backend.h"
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
  CpuBackend(const BackendOptions& options, const CpuBackendOptions& cpu)
      : default_omp_(omp_get_max_threads()), default_blas_(openblas_get_num_threads()) {
    options_ = options;
    cpu_ = cpu;
    matmul_.sgemm = cpu.gemm == GemmLibrary::kOpenBlas ? cpu::SgemmLibrary::kOpenBlas : cpu::SgemmLibrary::kOneDnn;
    cpu_.gemm = cpu.gemm == GemmLibrary::kOpenBlas ? GemmLibrary::kOpenBlas : GemmLibrary::kOneDnn;
    bf16_chosen_ = cpu.bf16_gemm != Bf16GemmLibrary::kAuto;
    cpu_.bf16_gemm = CpuBf16GemmLibrary(cpu.bf16_gemm);
    matmul_.bf16 = cpu_.bf16_gemm == Bf16GemmLibrary::kOneDnn ? cpu::Bf16GemmPath::kOneDnn
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
    c.backward_key_parts = cpu_.attention_key_parts;
    c.isa = cpu_.attention_isa;
    c.bf16_amx = cpu_.attention_amx;
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
  const CpuBackendOptions& cpu_options() const { return cpu_; }
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
  Bf16OperandCopies bf16_operand_copies() const override { return CpuBf16OperandCopies(cpu_); }

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
  CpuBackendOptions cpu_;  // kAuto libraries resolved
  cpu::MatmulConfig matmul_;
  bool bf16_chosen_ = false;
  const int default_omp_, default_blas_;
};

}  // namespace

absl::Status ValidateCpuBackendOptions(const BackendOptions& options, const CpuBackendOptions& cpu) {
  if (!cpu::AttentionIsaSupported(cpu.attention_isa))
    return absl::InvalidArgumentError(absl::StrCat("cpu backend: attention ISA ",
                                                   cpu::AttentionIsaName(cpu.attention_isa),
                                                   " is not supported by this CPU"));
  if (options.threads < 0)
    return absl::InvalidArgumentError(absl::StrCat("cpu backend: threads must be >= 0 (got ", options.threads, ")"));
  if (cpu.attention_key_parts < 0 || cpu.attention_key_parts > kMaxAttentionKeyParts)
    return absl::InvalidArgumentError(absl::StrCat("cpu backend: attention key parts must be 0 (automatic) to ",
                                                   kMaxAttentionKeyParts, " (got ", cpu.attention_key_parts, ")"));
  if (cpu.bf16_gemm == Bf16GemmLibrary::kOneDnn) {
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

Bf16OperandCopies CpuBf16OperandCopies(const CpuBackendOptions& cpu) {
  Bf16OperandCopies c;
  const bool onednn = CpuBf16GemmLibrary(cpu.bf16_gemm) == Bf16GemmLibrary::kOneDnn;
  c.f32_element_bytes = onednn ? 2 : 4;   // PrepareBf16Operand: BF16 bits, or F32 holding bf16 values
  c.bf16_element_bytes = onednn ? 0 : 4;  // oneDNN reads BF16 operands as they are; sgemm needs them widened
  c.pad_bytes = 1;                        // PrepareBf16Operand reserves one byte more than the copy
  c.align_bytes = 64;                     // Bf16Scratch::Reserve
  c.dlogits_unpadded = onednn;            // lm_head_loss.cc: rows converted into an exact buffer
  return c;
}

std::unique_ptr<Backend> MakeCpuBackend(const BackendOptions& options, const CpuBackendOptions& cpu) {
  absl::Status st = ValidateCpuBackendOptions(options, cpu);
  CHECK(st.ok()) << st;
  return std::make_unique<CpuBackend>(options, cpu);
}

std::optional<CpuBackendOptions> CpuBackendOptionsOf(const Backend& backend) {
  const auto* cpu = dynamic_cast<const CpuBackend*>(&backend);
  if (cpu == nullptr) return std::nullopt;
  return cpu->cpu_options();
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

}  // namespace longctx
