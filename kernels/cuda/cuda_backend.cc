// Why: the CUDA backend's host half, compiled by g++ so that Abseil (Status,
// the ops' Validate) never reaches nvcc. Like the CPU backend it is a thin
// shell: validate each op's params once (CHECK on failure), then call the
// launch functions of cuda_kernels.h. It owns the device state: one stream
// (blocking with respect to the legacy default stream, so stray default-stream
// work still orders correctly), the cuBLAS handle bound to it, the scratch
// workspace, and the device error word through which kernels report invalid
// indices (checked at every synchronization).
//
// Index tensors (ids, positions, targets, cu_seqlens) are normally on the
// device; one marked Device::kCpu is staged into device scratch first, so a
// caller may also pass host cu_seqlens. Float tensors must be device memory.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "kernels/backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_kernels.h"
#include "base/log.h"

namespace longctx {
namespace cuda {

void CheckCuda(cudaError_t e, const char* what, const char* file, int line) {
  if (e == cudaSuccess) return;
  logging::LogMessage(file, line, logging::Severity::kFatal).stream()
      << "CUDA error " << cudaGetErrorName(e) << " (" << cudaGetErrorString(e) << ") in " << what;
}

void CheckCublas(cublasStatus_t s, const char* what, const char* file, int line) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  logging::LogMessage(file, line, logging::Severity::kFatal).stream()
      << "cuBLAS error " << cublasGetStatusName(s) << " (" << cublasGetStatusString(s) << ") in " << what;
}

Workspace::~Workspace() {
  for (void* p : ptr_)
    if (p) cudaFree(p);  // errors ignored: the process may be tearing down
}

void* Workspace::Get(Slot slot, size_t bytes) {
  const int i = static_cast<int>(slot);
  if (ptr_[i] && bytes <= bytes_[i]) return ptr_[i];
  if (ptr_[i]) {
    // Queued kernels may still use the old buffer.
    LONGCTX_CUDA_CHECK(cudaStreamSynchronize(stream_));
    LONGCTX_CUDA_CHECK(cudaFree(ptr_[i]));
    ptr_[i] = nullptr;
    bytes_[i] = 0;
  }
  const size_t want = std::max<size_t>(256, (bytes + 255) / 256 * 256);
  const cudaError_t e = cudaMalloc(&ptr_[i], want);
  CHECK(e == cudaSuccess) << "CUDA workspace allocation of " << want << " bytes (slot " << i
                          << ") failed: " << cudaGetErrorString(e);
  bytes_[i] = want;
  return ptr_[i];
}

}  // namespace cuda

namespace {

#define VALIDATED(p, ...)                         \
  do {                                            \
    absl::Status _st = (p).Validate(__VA_ARGS__); \
    CHECK(_st.ok()) << _st;                       \
  } while (0)

class CudaBackend final : public Backend {
 public:
  static absl::StatusOr<std::unique_ptr<Backend>> Create(int device) {
    auto fail = [&](const char* what, const std::string& why) {
      return absl::UnavailableError(absl::StrCat("CUDA backend: ", what, " failed on device ", device, ": ", why));
    };
    cudaError_t e = cudaSetDevice(device);
    if (e != cudaSuccess) return fail("cudaSetDevice", cudaGetErrorString(e));
    std::unique_ptr<CudaBackend> b(new CudaBackend(device));
    if ((e = cudaStreamCreate(&b->ctx_.stream)) != cudaSuccess) return fail("cudaStreamCreate", cudaGetErrorString(e));
    const cublasStatus_t s = cublasCreate(&b->ctx_.blas);
    if (s != CUBLAS_STATUS_SUCCESS) return fail("cublasCreate", cublasGetStatusString(s));
    LONGCTX_CUBLAS_CHECK(cublasSetStream(b->ctx_.blas, b->ctx_.stream));
    // Default math: no TF32 tensor-op shortcuts for F32 (CPU parity).
    LONGCTX_CUBLAS_CHECK(cublasSetMathMode(b->ctx_.blas, CUBLAS_DEFAULT_MATH));
    if ((e = cudaMalloc(reinterpret_cast<void**>(&b->ctx_.error_word), sizeof(int))) != cudaSuccess)
      return fail("cudaMalloc", cudaGetErrorString(e));
    LONGCTX_CUDA_CHECK(cudaMemset(b->ctx_.error_word, 0, sizeof(int)));
    int smem = 0;
    LONGCTX_CUDA_CHECK(cudaDeviceGetAttribute(&smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    b->ctx_.max_smem_per_block = smem;
    b->workspace_ = std::make_unique<cuda::Workspace>(b->ctx_.stream);
    b->ctx_.workspace = b->workspace_.get();
    cudaDeviceProp prop{};
    LONGCTX_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    b->description_ = absl::StrCat(prop.name, " (sm_", prop.major, prop.minor, ")");
    b->ctx_.compute_capability = prop.major * 10 + prop.minor;
    return std::unique_ptr<Backend>(std::move(b));
  }

  ~CudaBackend() override {
    // Best effort: errors here cannot be reported usefully.
    if (ctx_.stream) cudaStreamSynchronize(ctx_.stream);
    workspace_.reset();
    if (ctx_.error_word) cudaFree(ctx_.error_word);
    if (ctx_.blas) cublasDestroy(ctx_.blas);
    if (ctx_.stream) cudaStreamDestroy(ctx_.stream);
  }

  Device device() const override { return Device::kCuda; }
  std::string name() const override { return "cuda"; }

  void* Alloc(size_t bytes) override {
    void* p = nullptr;
    const cudaError_t e = cudaMalloc(&p, std::max<size_t>(bytes, 1));  // 256-byte aligned
    if (e != cudaSuccess) {
      size_t free_b = 0, total_b = 0;
      cudaMemGetInfo(&free_b, &total_b);
      LOG(FATAL) << "CUDA allocation of " << bytes << " bytes failed on " << description_ << ": "
                 << cudaGetErrorString(e) << " (" << free_b << " of " << total_b << " bytes free)";
    }
    return p;
  }
  // cudaFree waits for queued work, so a buffer is never freed under a kernel.
  void Free(void* p) override { LONGCTX_CUDA_CHECK(cudaFree(p)); }

  void CopyFromHost(const Tensor& dst, const void* src) override {
    CHECK(dst.contiguous()) << "CopyFromHost: " << dst.DebugString();
    if (dst.nbytes() == 0) return;
    LONGCTX_CUDA_CHECK(cudaMemcpyAsync(dst.data, src, dst.nbytes(), cudaMemcpyDefault, ctx_.stream));
    // The caller may reuse src at once (pinned memory would otherwise be read later).
    LONGCTX_CUDA_CHECK(cudaStreamSynchronize(ctx_.stream));
  }
  void CopyToHost(void* dst, const Tensor& src) override {
    CHECK(src.contiguous()) << "CopyToHost: " << src.DebugString();
    if (src.nbytes() > 0)
      LONGCTX_CUDA_CHECK(cudaMemcpyAsync(dst, src.data, src.nbytes(), cudaMemcpyDefault, ctx_.stream));
    SyncAndCheck();
  }
  void Synchronize() override { SyncAndCheck(); }

  void Fill(const Tensor& x, double value) override { cuda::Fill(ctx_, x, value); }
  void Copy(const Tensor& dst, const Tensor& src) override { cuda::Copy(ctx_, dst, src); }
  void Axpy(const Tensor& y, double alpha, const Tensor& x) override { cuda::Axpy(ctx_, y, alpha, x); }
  void Scale(const Tensor& x, double alpha) override { cuda::Scale(ctx_, x, alpha); }
  double SumSquares(const Tensor& x) override { return cuda::SumSquares(ctx_, x); }
  bool AllFinite(const Tensor& x) override { return cuda::AllFinite(ctx_, x); }

  void Gemm(const GemmParams& p) override {
    VALIDATED(p);
    cuda::Gemm(ctx_, p.a, p.b, p.c, p.trans_a, p.trans_b, p.alpha, p.beta);
  }
  void EmbeddingForward(const EmbeddingParams& p) override {
    VALIDATED(p);
    cuda::EmbeddingForward(ctx_, Index(p.ids), p.table, p.out);
  }
  void EmbeddingBackward(const EmbeddingParams& p) override {
    VALIDATED(p);
    cuda::EmbeddingBackward(ctx_, Index(p.ids), p.table, p.out);
  }
  void RmsNormForward(const RmsNormParams& p) override {
    VALIDATED(p, false);
    cuda::RmsNormForward(ctx_, p.x, p.weight, p.y, p.rstd, p.eps);
  }
  void RmsNormBackward(const RmsNormParams& p) override {
    VALIDATED(p, true);
    cuda::RmsNormBackward(ctx_, p.x, p.weight, p.rstd, p.dy, p.dx, p.dweight, p.accumulate_dx);
  }
  void Rope(const RopeParams& p) override {
    VALIDATED(p);
    cuda::Rope(ctx_, p.x, Index(p.positions), p.theta, p.rotary_dim, p.position_scale, p.direction);
  }
  void SwiGluForward(const SwiGluParams& p) override {
    VALIDATED(p, false);
    cuda::SwiGluForward(ctx_, p.gate_up, p.h);
  }
  void SwiGluBackward(const SwiGluParams& p) override {
    VALIDATED(p, true);
    cuda::SwiGluBackward(ctx_, p.gate_up, p.dh, p.dgate_up);
  }
  // Offset-aligned blocks (context parallelism, AttentionParams) are not
  // implemented by the CUDA kernels: refused here rather than computed with
  // the bottom-right rule.
  void AttentionForward(const AttentionParams& p) override {
    VALIDATED(p, false);
    CHECK(!p.query_offset_set) << "CUDA backend: AttentionForward with query_offset_set (context-parallel blocks) "
                                  "is not implemented; run context-parallel attention on the cpu backend";
    cuda::AttentionForward(ctx_, Attention(p));
  }
  void AttentionBackward(const AttentionParams& p) override {
    VALIDATED(p, true);
    CHECK(!p.query_offset_set) << "CUDA backend: AttentionBackward with query_offset_set (context-parallel blocks) "
                                  "is not implemented; run context-parallel attention on the cpu backend";
    cuda::AttentionBackward(ctx_, Attention(p));
  }
  void AttentionMerge(const AttentionMergeParams& p) override {
    VALIDATED(p);
    cuda::AttentionMerge(ctx_, p.o1, p.lse1, p.o2, p.lse2, p.o, p.lse);
  }
  double LmHeadLoss(const LmHeadLossParams& p) override {
    VALIDATED(p);
    cuda::LmHeadArgs a;
    a.x = p.x;
    a.weight = p.weight;
    a.targets = Index(p.targets);
    a.dx = p.dx;
    a.dweight = p.dweight;
    a.losses = p.losses;
    a.grad_scale = p.grad_scale;
    a.chunk_tokens = p.ChunkRows();
    const double loss = cuda::LmHeadLoss(ctx_, a);
    SyncAndCheck();  // an invalid target must not pass silently
    return loss;
  }
  absl::Status SetMatmulPrecision(MatmulPrecision p) override {
    ctx_.bf16_matmul = p == MatmulPrecision::kBF16;
    return absl::OkStatus();
  }
  MatmulPrecision matmul_precision() const override {
    return ctx_.bf16_matmul ? MatmulPrecision::kBF16 : MatmulPrecision::kF32;
  }
  // Host threads: kept and reported (the device computes; the host side of an
  // op is a launch), validated like the CPU backend's.
  BackendOptions options() const override { return options_; }
  absl::Status SetThreads(int threads) override {
    if (threads < 0)
      return absl::InvalidArgumentError(absl::StrCat("cuda backend: threads must be >= 0 (got ", threads, ")"));
    options_.threads = threads;
    return absl::OkStatus();
  }
  void set_options(const BackendOptions& options) { options_ = options; }
  void AdamW(const AdamWParams& p) override {
    VALIDATED(p);
    cuda::AdamW(ctx_, p.param, p.grad, p.m, p.v, p.lr, p.beta1, p.beta2, p.eps, p.weight_decay, p.grad_scale,
                p.step);
  }

 private:
  explicit CudaBackend(int device) : device_(device) {}

  // An I32 index tensor on the device: as is, or staged from host memory
  // (into `slot`; two tensors staged for one op need two slots).
  Tensor Index(const Tensor& t, cuda::Slot slot = cuda::Slot::kIndex) {
    if (t.device == Device::kCuda || t.numel() == 0) return t;
    CHECK(t.contiguous()) << "index tensor " << t.DebugString() << " must be dense";
    Tensor d = t;
    d.data = ctx_.workspace->Get(slot, t.nbytes());
    d.device = Device::kCuda;
    // From pageable memory the copy returns once the source has been read.
    LONGCTX_CUDA_CHECK(cudaMemcpyAsync(d.data, t.data, t.nbytes(), cudaMemcpyDefault, ctx_.stream));
    return d;
  }

  // The op's fields as the kernels take them (the one struct both backends
  // read, kernels/attention_args.h), with the segment tables on the device.
  cuda::AttentionArgs Attention(const AttentionParams& p) {
    cuda::AttentionArgs a = p;
    a.cu_seqlens = Index(p.cu_seqlens);
    if (p.cu_seqlens_k.defined()) a.cu_seqlens_k = Index(p.cu_seqlens_k, cuda::Slot::kIndexK);
    return a;
  }

  // Waits for the stream; aborts on a kernel fault or a reported bad index.
  void SyncAndCheck() {
    int flags = 0;
    LONGCTX_CUDA_CHECK(cudaMemcpyAsync(&flags, ctx_.error_word, sizeof(int), cudaMemcpyDeviceToHost, ctx_.stream));
    LONGCTX_CUDA_CHECK(cudaStreamSynchronize(ctx_.stream));
    if (flags == 0) return;
    std::string what;
    if (flags & cuda::kErrEmbeddingId) what += " EmbeddingForward/Backward: an id outside [0, vocab).";
    if (flags & cuda::kErrTarget) what += " LmHeadLoss: a target >= vocab.";
    LOG(FATAL) << "CUDA backend: invalid input detected on the device (affected elements were skipped):" << what;
  }

  int device_;
  BackendOptions options_;
  std::string description_;
  cuda::Context ctx_;
  std::unique_ptr<cuda::Workspace> workspace_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> MakeCudaBackend(const BackendOptions& options) {
  // Options of other backends (the CPU's libraries) are refused by the
  // registry, which knows them; here only what every backend understands.
  if (options.threads < 0)
    return absl::InvalidArgumentError(absl::StrCat("cuda backend: threads must be >= 0 (got ", options.threads, ")"));
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky-free error state
    return absl::UnavailableError(absl::StrCat("CUDA backend: no usable CUDA device (cudaGetDeviceCount: ",
                                               cudaGetErrorName(e), ": ", cudaGetErrorString(e), ")"));
  }
  if (count == 0) return absl::UnavailableError("CUDA backend: no CUDA device present");
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) device = 0;
  absl::StatusOr<std::unique_ptr<Backend>> b = CudaBackend::Create(device);
  if (b.ok()) static_cast<CudaBackend*>(b->get())->set_options(options);
  return b;
}

}  // namespace longctx
