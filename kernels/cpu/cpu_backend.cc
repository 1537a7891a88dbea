// Why: the CPU backend is a thin shell: validate each op's params once, then
// call the free-function kernel (cpu_kernels.h). Host memory, 64-byte aligned.
#include <cstdlib>
#include <cstring>
#include <memory>

#include "kernels/log.h"
#include "kernels/backend.h"
#include "kernels/cpu/cpu_kernels.h"

namespace longctx {
namespace {

#define VALIDATED(p, ...)                                  \
  do {                                                     \
    absl::Status _st = (p).Validate(__VA_ARGS__);          \
    CHECK(_st.ok()) << _st;                                \
  } while (0)

class CpuBackend final : public Backend {
 public:
  Device device() const override { return Device::kCpu; }
  std::string name() const override { return "cpu"; }

  void* Alloc(size_t bytes) override {
    size_t rounded = (bytes + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
    CHECK(p != nullptr) << "CPU allocation of " << bytes << " bytes failed";
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

  void Fill(const Tensor& x, double value) override { cpu::Fill(x, value); }
  void Copy(const Tensor& dst, const Tensor& src) override { cpu::Copy(dst, src); }
  void Axpy(const Tensor& y, double alpha, const Tensor& x) override { cpu::Axpy(y, alpha, x); }
  void Scale(const Tensor& x, double alpha) override { cpu::Scale(x, alpha); }
  double SumSquares(const Tensor& x) override { return cpu::SumSquares(x); }
  bool AllFinite(const Tensor& x) override { return cpu::AllFinite(x); }

  void Gemm(const GemmParams& p) override { VALIDATED(p); cpu::Gemm(p, precision_); }
  void EmbeddingForward(const EmbeddingParams& p) override { VALIDATED(p); cpu::EmbeddingForward(p); }
  void EmbeddingBackward(const EmbeddingParams& p) override { VALIDATED(p); cpu::EmbeddingBackward(p); }
  void RmsNormForward(const RmsNormParams& p) override { VALIDATED(p, false); cpu::RmsNormForward(p); }
  void RmsNormBackward(const RmsNormParams& p) override { VALIDATED(p, true); cpu::RmsNormBackward(p); }
  void Rope(const RopeParams& p) override { VALIDATED(p); cpu::Rope(p); }
  void SwiGluForward(const SwiGluParams& p) override { VALIDATED(p, false); cpu::SwiGluForward(p); }
  void SwiGluBackward(const SwiGluParams& p) override { VALIDATED(p, true); cpu::SwiGluBackward(p); }
  void AttentionForward(const AttentionParams& p) override { VALIDATED(p, false); cpu::AttentionForward(p); }
  void AttentionBackward(const AttentionParams& p) override { VALIDATED(p, true); cpu::AttentionBackward(p); }
  void AttentionMerge(const AttentionMergeParams& p) override { VALIDATED(p); cpu::AttentionMerge(p); }
  double LmHeadLoss(const LmHeadLossParams& p) override { VALIDATED(p); return cpu::LmHeadLoss(p, precision_); }
  void AdamW(const AdamWParams& p) override { VALIDATED(p); cpu::AdamW(p); }

  // bf16: kernels/cpu/gemm_bf16.h (oneDNN or rounded operands + sgemm, per CPU).
  absl::Status SetMatmulPrecision(MatmulPrecision p) override {
    precision_ = p;
    return absl::OkStatus();
  }
  MatmulPrecision matmul_precision() const override { return precision_; }

 private:
  MatmulPrecision precision_ = MatmulPrecision::kF32;
};

}  // namespace

std::unique_ptr<Backend> MakeCpuBackend() { return std::make_unique<CpuBackend>(); }

}  // namespace longctx
