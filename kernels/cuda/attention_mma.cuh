// Why: at precision bf16 (MatmulPrecision::kBF16) the GPU's attention should
// run its tile products on the tensor cores, as the CPU's runs them on
// vdpbf16ps / AMX. attention_mma.cu holds those kernels; attention.cu, which
// owns the op for every dtype and head_dim, calls them where they apply
// (F32 tensors, head_dim 32, 64 or 128) and keeps its scalar kernels for the
// rest. Included only by .cu files.
#ifndef LONGCTX_KERNELS_CUDA_ATTENTION_MMA_CUH_
#define LONGCTX_KERNELS_CUDA_ATTENTION_MMA_CUH_

#include "kernels/attention_args.h"
#include "kernels/cuda/cuda_kernels.h"

namespace longctx::cuda {

// Whether the tensor-core kernels take this call: bf16 precision on the
// context, and a head_dim they are built for (32, 64, 128).
bool AttentionMmaUsable(const Context& c, const AttentionView<float>& v);

// The op of kernels/ops.h (AttentionParams) with bf16 tile products: the
// scaled Q, K, V, P, dO and dS rounded to bf16 (round to nearest even), every
// product accumulated in fp32, softmax statistics (max, sum, lse) and D in
// fp32. Outputs are F32. The backward computes D = rowsum(dO * O) itself;
// no atomics, so repeated calls give the same bits.
// keys: the rows of K and V (Nk; N in training).
void AttentionForwardMma(const Context& c, const AttentionView<float>& v, int64_t keys);
void AttentionBackwardMma(const Context& c, const AttentionView<float>& v);

}  // namespace longctx::cuda

#endif  // LONGCTX_KERNELS_CUDA_ATTENTION_MMA_CUH_
