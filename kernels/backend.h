// Why: the one interface between model code and a device. The model, optimizer
// and trainer only ever call a Backend; the CPU backend (kernels/cpu) is always
// built and is the reference every other backend is tested against.
// Settings that shape how a backend computes (host threads, which GEMM library
// runs the products) are BackendOptions given when it is made and owned by the
// backend object: no process-wide switch or environment variable in the
// kernels, so two backends in one process (or ranks with their own thread
// budgets) never see each other's settings.
#ifndef LONGCTX_KERNELS_BACKEND_H_
#define LONGCTX_KERNELS_BACKEND_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "kernels/attention_isa.h"
#include "kernels/ops.h"
#include "kernels/tensor.h"

namespace longctx {

// The library that computes F32 products on the CPU. kAuto = oneDNN's sgemm
// (faster on this project's machines, kernels/cpu/gemm_library.h says why).
enum class GemmLibrary : uint8_t { kAuto = 0, kOneDnn = 1, kOpenBlas = 2 };
// How MatmulPrecision::kBF16 products run on the CPU (kernels/cpu/gemm_bf16.h).
// kAuto = oneDNN where the CPU has bf16 dot products, else rounded sgemm.
enum class Bf16GemmLibrary : uint8_t { kAuto = 0, kOneDnn = 1, kRoundedSgemm = 2 };

struct BackendOptions {
  // Host threads of the backend's ops (OpenMP regions and BLAS calls);
  // 0 = the libraries' defaults (all cores). Runs that must agree bit for bit
  // (resume, eval of a checkpoint) use the same count.
  int threads = 0;
  GemmLibrary gemm = GemmLibrary::kAuto;           // CPU only; other backends take kAuto
  Bf16GemmLibrary bf16_gemm = Bf16GemmLibrary::kAuto;  // CPU only
  // CPU only: key parts per attention backward item (kernels/cpu/
  // attention_driver.h, SegmentKeyParts); 0 = chosen per call for the
  // threads, N = every segment cut into N (`bench attention --key_parts`).
  int attention_key_parts = 0;
  // CPU only: which tiles run the attention (kernels/attention_isa.h); one
  // this CPU cannot run is refused.
  CpuAttentionIsa attention_isa = CpuAttentionIsa::kAuto;
  // CPU only: false runs bf16 attention on AVX512-BF16 dot products
  // (vdpbf16ps) even where the CPU has AMX, to measure that path on an AMX
  // machine (`bench attention --attention_amx=false`); no effect elsewhere.
  bool attention_amx = true;
};
// The most key parts a backward item is cut into (attention_key_parts' bound).
inline constexpr int kMaxAttentionKeyParts = 8;

// "auto", "onednn", "openblas" / "auto", "onednn", "sgemm" (or
// "rounded-sgemm"); InvalidArgument naming the accepted values otherwise.
absl::StatusOr<GemmLibrary> ParseGemmLibrary(std::string_view name);
absl::StatusOr<Bf16GemmLibrary> ParseBf16GemmLibrary(std::string_view name);
const char* GemmLibraryName(GemmLibrary library);          // "auto", "onednn", "openblas"
const char* Bf16GemmLibraryName(Bf16GemmLibrary library);  // "auto", "onednn", "rounded-sgemm"
// "auto", "avx512", "avx2", "scalar"; InvalidArgument naming them otherwise.
absl::StatusOr<CpuAttentionIsa> ParseCpuAttentionIsa(std::string_view name);
const char* CpuAttentionIsaName(CpuAttentionIsa isa);

class Backend {
 public:
  virtual ~Backend() = default;
  virtual Device device() const = 0;
  virtual std::string name() const = 0;

  // Memory. Alloc returns 64-byte aligned memory, or aborts with the size.
  virtual void* Alloc(size_t bytes) = 0;
  virtual void Free(void* p) = 0;
  virtual void CopyFromHost(const Tensor& dst, const void* src) = 0;  // dense dst
  virtual void CopyToHost(void* dst, const Tensor& src) = 0;          // dense src
  virtual void Synchronize() = 0;

  // Elementwise / reductions on float tensors (any row stride).
  virtual void Fill(const Tensor& x, double value) = 0;
  virtual void Copy(const Tensor& dst, const Tensor& src) = 0;
  virtual void Axpy(const Tensor& y, double alpha, const Tensor& x) = 0;  // y += alpha x
  virtual void Scale(const Tensor& x, double alpha) = 0;
  virtual double SumSquares(const Tensor& x) = 0;  // in double
  virtual bool AllFinite(const Tensor& x) = 0;

  // The model's ops (see ops.h for the exact math of each).
  virtual void Gemm(const GemmParams& p) = 0;
  virtual void EmbeddingForward(const EmbeddingParams& p) = 0;
  virtual void EmbeddingBackward(const EmbeddingParams& p) = 0;
  virtual void RmsNormForward(const RmsNormParams& p) = 0;
  virtual void RmsNormBackward(const RmsNormParams& p) = 0;
  virtual void Rope(const RopeParams& p) = 0;
  virtual void SwiGluForward(const SwiGluParams& p) = 0;
  virtual void SwiGluBackward(const SwiGluParams& p) = 0;
  virtual void AttentionForward(const AttentionParams& p) = 0;
  virtual void AttentionBackward(const AttentionParams& p) = 0;
  virtual void AttentionMerge(const AttentionMergeParams& p) = 0;
  virtual double LmHeadLoss(const LmHeadLossParams& p) = 0;
  virtual void AdamW(const AdamWParams& p) = 0;

  // Precision of the products of every later F32 Gemm and LmHeadLoss (see
  // MatmulPrecision in ops.h). kF32 (the default) always works; a backend
  // without a bf16 path answers Unimplemented, naming itself.
  virtual absl::Status SetMatmulPrecision(MatmulPrecision p) {
    if (p == MatmulPrecision::kF32) return absl::OkStatus();
    return absl::UnimplementedError(name() + " backend: no bf16 matmul path");
  }
  virtual MatmulPrecision matmul_precision() const { return MatmulPrecision::kF32; }

  // The options this backend runs with, kAuto choices resolved where the
  // backend resolves them (the CPU backend names its libraries).
  virtual BackendOptions options() const { return {}; }
  // Changes the host thread count of later ops (0 = the libraries' defaults);
  // InvalidArgument for a negative count. ScopedBackendThreads below is the
  // usual way in (the periodic probe runs with its own count).
  virtual absl::Status SetThreads(int threads) {
    if (threads < 0) return absl::InvalidArgumentError(name() + " backend: threads must be >= 0");
    return absl::OkStatus();
  }
  // One line naming how products run here (libraries, paths, ISA), for logs
  // and `longctx bench`.
  virtual std::string MatmulDescription() const { return name(); }
};

// backend->SetThreads(threads) for a scope when threads > 0 (0 leaves the
// backend's count as it is); the backend's previous count comes back at the end.
class ScopedBackendThreads {
 public:
  ScopedBackendThreads(Backend* backend, int threads);
  ~ScopedBackendThreads();
  ScopedBackendThreads(const ScopedBackendThreads&) = delete;
  ScopedBackendThreads& operator=(const ScopedBackendThreads&) = delete;

 private:
  Backend* backend_;
  int saved_ = 0;
  bool active_ = false;
};

// The always-present CPU backend (OpenMP threads, BLAS GEMMs). Aborts, naming
// the option, on options no CPU backend can take (negative threads, the oneDNN
// bf16 path where oneDNN has no bf16 matmul); MakeBackend returns those as errors.
std::unique_ptr<Backend> MakeCpuBackend(const BackendOptions& options = {});
// The library the CPU backend runs bf16 products on when `asked` for one:
// kAuto resolves to kOneDnn where the CPU has bf16 dot products and oneDNN a
// bf16 matmul, else kRoundedSgemm (the backend's options().bf16_gemm; the
// memory plan asks it, since the two keep operand copies of different sizes).
Bf16GemmLibrary CpuBf16GemmLibrary(Bf16GemmLibrary asked = Bf16GemmLibrary::kAuto);
// "cpu" or "cuda"; NotFound/Unavailable with a reason when not built or no
// device, InvalidArgument for options the backend cannot take.
absl::StatusOr<std::unique_ptr<Backend>> MakeBackend(const std::string& name, const BackendOptions& options = {});

// An owning buffer allocated through a backend.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(Backend* b, size_t bytes) : backend_(b), bytes_(bytes), p_(bytes ? b->Alloc(bytes) : nullptr) {}
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept { *this = std::move(o); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      Reset();
      backend_ = o.backend_; bytes_ = o.bytes_; p_ = o.p_;
      o.p_ = nullptr; o.bytes_ = 0;
    }
    return *this;
  }
  ~DeviceBuffer() { Reset(); }
  void Reset() { if (p_) backend_->Free(p_); p_ = nullptr; bytes_ = 0; }
  void* data() const { return p_; }
  size_t bytes() const { return bytes_; }

 private:
  Backend* backend_ = nullptr;
  size_t bytes_ = 0;
  void* p_ = nullptr;
};

}  // namespace longctx

#endif  // LONGCTX_KERNELS_BACKEND_H_
