// Why: the seam between the CUDA backend's two halves. cuda_backend.cc (g++)
// owns the Backend subclass, Abseil and param validation; the .cu files (nvcc)
// own the kernels and the math of kernels/math/*.h. This header is the only
// thing both include, so it stays free of Abseil and of ops.h: launch
// functions take Tensor views, plain scalars and the Abseil-free argument
// structs shared with the CPU backend (kernels/attention_args.h). Every
// launch runs on Context::stream; a function returning a host value
// synchronizes that stream.
#ifndef LONGCTX_KERNELS_CUDA_CUDA_KERNELS_H_
#define LONGCTX_KERNELS_CUDA_CUDA_KERNELS_H_

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "kernels/attention_args.h"
#include "kernels/tensor.h"

namespace longctx::cuda {

// Abort with the call, file:line and the CUDA/cuBLAS error string.
void CheckCuda(cudaError_t e, const char* what, const char* file, int line);
void CheckCublas(cublasStatus_t s, const char* what, const char* file, int line);
#define LONGCTX_CUDA_CHECK(call) ::longctx::cuda::CheckCuda((call), #call, __FILE__, __LINE__)
#define LONGCTX_CUBLAS_CHECK(call) ::longctx::cuda::CheckCublas((call), #call, __FILE__, __LINE__)
// After a kernel launch: reports bad launch configurations at once.
#define LONGCTX_CUDA_LAUNCHED() LONGCTX_CUDA_CHECK(cudaGetLastError())

// Scratch buffers of the backend, one per role so that one op can hold
// several at once. Grow-only (a steady-state training step never allocates);
// contents are undefined on return.
enum class Slot : int {
  kReduce = 0,   // reduction partials and the scalar results copied to host
  kIndex,        // an I32 index tensor staged from host memory
  kIndexK,       // a second one (attention's cu_seqlens_k beside cu_seqlens)
  kSortKeys,     // embedding backward: packed (id, token) sort keys
  kRowPartials,  // RMSNorm backward: per-chunk dweight partials
  kLogits,       // LM head: [chunk, V] logits / dlogits
  kRowLoss,      // LM head: per-token loss (double) before the final sum
  kAttnDelta,    // attention backward: D = rowsum(dO * O), [H, N]
  kGemmOperand,  // Gemm: the F32 operand of a product with a BF16 one, in bf16
  kAttnBf16,     // attention at precision bf16: bf16 copies of Q, K, V, dO (attention_mma.cu)
  kCount
};

class Workspace {
 public:
  explicit Workspace(cudaStream_t stream) : stream_(stream) {}
  ~Workspace();
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;
  void* Get(Slot slot, size_t bytes);

 private:
  cudaStream_t stream_;
  void* ptr_[static_cast<int>(Slot::kCount)] = {};
  size_t bytes_[static_cast<int>(Slot::kCount)] = {};
};

// Bits of the device error word: kernels cannot CHECK, so an invalid index
// sets a bit (and the element is skipped); the backend aborts with the op's
// name at its next synchronization (Synchronize, CopyToHost, any op that
// returns a host value).
enum ErrorBit : int {
  kErrEmbeddingId = 1,   // an embedding id outside [0, V)
  kErrTarget = 2,        // an LM-head target >= V
};

struct Context {
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
  int* error_word = nullptr;        // device int, see ErrorBit
  Workspace* workspace = nullptr;
  int max_smem_per_block = 48 << 10;  // opt-in dynamic shared memory limit
  int compute_capability = 0;         // 10 * major + minor (90 = Hopper)
  // MatmulPrecision::kBF16: F32 GEMMs (and the LM head's) use cuBLAS
  // CUBLAS_COMPUTE_32F_FAST_16BF (operands converted to bf16, fp32 accumulation).
  bool bf16_matmul = false;
};

// Elementwise and reductions (elementwise.cu). Tensors are viewed as rows x
// contiguous columns exactly as the CPU backend does (dense ones as one row).
void Fill(const Context& c, const Tensor& x, double value);
void Copy(const Context& c, const Tensor& dst, const Tensor& src);
void Axpy(const Context& c, const Tensor& y, double alpha, const Tensor& x);
void Scale(const Context& c, const Tensor& x, double alpha);
double SumSquares(const Context& c, const Tensor& x);  // synchronizes
bool AllFinite(const Context& c, const Tensor& x);     // synchronizes
void SwiGluForward(const Context& c, const Tensor& gate_up, const Tensor& h);
void SwiGluBackward(const Context& c, const Tensor& gate_up, const Tensor& dh, const Tensor& dgate_up);
void AdamW(const Context& c, const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v, double lr,
           double beta1, double beta2, double eps, double weight_decay, double grad_scale, int64_t step);
void Rope(const Context& c, const Tensor& x, const Tensor& positions, double theta, int rotary_dim,
          double position_scale, int direction);

// Embedding (embedding.cu). ids are I32 on the device.
void EmbeddingForward(const Context& c, const Tensor& ids, const Tensor& table, const Tensor& out);
void EmbeddingBackward(const Context& c, const Tensor& ids, const Tensor& d_table, const Tensor& d_out);

// RMSNorm (rmsnorm.cu).
void RmsNormForward(const Context& c, const Tensor& x, const Tensor& weight, const Tensor& y, const Tensor& rstd,
                    double eps);
void RmsNormBackward(const Context& c, const Tensor& x, const Tensor& weight, const Tensor& rstd, const Tensor& dy,
                     const Tensor& dx, const Tensor& dweight, bool accumulate_dx);

// GEMM and the LM head (gemm_lm_head.cu).
void Gemm(const Context& c, const Tensor& a, const Tensor& b, const Tensor& out, bool trans_a, bool trans_b,
          double alpha, double beta);

struct LmHeadArgs {
  Tensor x, weight, targets;  // targets I32 on the device
  Tensor dx, dweight, losses;  // optional (undefined = not wanted)
  double grad_scale = 1.0;
  int64_t chunk_tokens = 256;
};
double LmHeadLoss(const Context& c, const LmHeadArgs& a);  // synchronizes

// Attention (attention.cu): the fields of AttentionParams (ops.h) without its
// Abseil-returning Validate, one struct for both backends
// (kernels/attention_args.h); cu_seqlens and cu_seqlens_k are I32 on the device.
using AttentionArgs = ::longctx::AttentionArgs;
void AttentionForward(const Context& c, const AttentionArgs& a);
void AttentionBackward(const Context& c, const AttentionArgs& a);
// o = merge of (o1, lse1) and (o2, lse2) by log-sum-exp (attention_merge.cu).
void AttentionMerge(const Context& c, const Tensor& o1, const Tensor& lse1, const Tensor& o2, const Tensor& lse2,
                    const Tensor& o, const Tensor& lse);

}  // namespace longctx::cuda

#endif  // LONGCTX_KERNELS_CUDA_CUDA_KERNELS_H_
