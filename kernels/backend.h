// Why: the one interface between model code and a device. The model, optimizer
// and trainer only ever call a Backend; the CPU backend (kernels/cpu) is always
// built and is the reference every other backend is tested against.
#ifndef LONGCTX_KERNELS_BACKEND_H_
#define LONGCTX_KERNELS_BACKEND_H_

#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "kernels/ops.h"
#include "kernels/tensor.h"

namespace longctx {

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
};

// The always-present CPU backend (OpenMP threads, BLAS GEMMs).
std::unique_ptr<Backend> MakeCpuBackend();
// "cpu" or "cuda"; NotFound/Unavailable with a reason when not built or no device.
absl::StatusOr<std::unique_ptr<Backend>> MakeBackend(const std::string& name);

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
