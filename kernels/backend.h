// Why: the one interface between model code and a device. The model, optimizer
// and trainer only ever call a Backend. This header names no backend: what one
// backend alone understands (its libraries, its instruction sets) is that
// backend's own options, declared in its own folder, and which backends exist,
// picked by name, is the registry's (kernels/backend_registry.h). Settings
// that shape how a backend computes are given when it is made and owned by the
// backend object: no process-wide switch or environment variable in the
// kernels, so two backends in one process (or ranks with their own thread
// budgets) never see each other's settings.
#ifndef LONGCTX_KERNELS_BACKEND_H_
#define LONGCTX_KERNELS_BACKEND_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "kernels/ops.h"
#include "kernels/tensor.h"

namespace longctx {

// The options every backend understands.
struct BackendOptions {
  // Host threads of the backend's ops (OpenMP regions, BLAS calls, host-side
  // work); 0 = the libraries' defaults (all cores). Runs that must agree bit
  // for bit (resume, eval of a checkpoint) use the same count.
  int threads = 0;
};

// The operand copies a backend keeps, across calls, to run
// MatmulPrecision::kBF16 products (Gemm, LmHeadLoss) on F32 or BF16 operands
// its kernels cannot read as they are: one kept buffer per operand side of
// the layer products, each as large as the largest copy it took, and the LM
// head's copies of its weight, of x and of one chunk's dlogits. The memory
// plan (model/plan.h) sizes those buffers from this description, so it asks
// the backend (Backend::bf16_operand_copies) instead of naming its libraries.
// All zero (the default): no copies, the kernels round operands as they read
// them (or products are fp32).
struct Bf16OperandCopies {
  // Bytes per element of the copy of an F32 operand, and of a BF16 operand;
  // 0 = read as it is.
  int f32_element_bytes = 0;
  int bf16_element_bytes = 0;
  // A kept buffer holds its copy plus pad_bytes, rounded up to a multiple of
  // align_bytes.
  int pad_bytes = 0;
  int align_bytes = 1;
  // LmHeadLoss's backward writes each chunk's dlogits into their copy as it
  // computes them: a buffer of exactly that copy, without pad_bytes.
  bool dlogits_unpadded = false;

  bool any() const { return f32_element_bytes > 0 || bf16_element_bytes > 0; }
  int element_bytes(DType dtype) const { return dtype == DType::kBF16 ? bf16_element_bytes : f32_element_bytes; }
  // Bytes a kept buffer holds for a copy of `bytes` (0: nothing copied into it).
  int64_t Buffer(int64_t bytes, bool padded = true) const {
    if (bytes <= 0) return 0;
    const int64_t held = bytes + (padded ? pad_bytes : 0), align = align_bytes > 0 ? align_bytes : 1;
    return (held + align - 1) / align * align;
  }
  // "none", else how an F32 operand is copied: "bf16 copies" (2 bytes an
  // element) or "fp32 copies" (fp32 holding bf16 values).
  const char* name() const {
    if (!any()) return "none";
    return f32_element_bytes == 2 ? "bf16 copies" : "fp32 copies";
  }
};

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

  // The options this backend runs with (a backend's own options are read
  // through that backend's header).
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
  // The operand copies this backend's products keep at MatmulPrecision::kBF16
  // (whatever the precision now), for the memory plan. None by default.
  virtual Bf16OperandCopies bf16_operand_copies() const { return {}; }
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
