// Why: the CPU implementations of every op in ops.h, as free functions so each
// can live in its own file and be tested directly. cpu_backend.cc validates the
// params once and dispatches here. Every function handles F32 and F64 (F64 is
// what the finite-difference gradient checks run in).
#ifndef LONGCTX_KERNELS_CPU_CPU_KERNELS_H_
#define LONGCTX_KERNELS_CPU_CPU_KERNELS_H_

#include "kernels/cpu/attention_tiles.h"
#include "kernels/cpu/gemm_library.h"
#include "kernels/ops.h"

namespace longctx::cpu {

// config.precision applies to F32 only (see MatmulPrecision in ops.h); the
// config also names the sgemm library and bf16 path (gemm_library.h).
void Gemm(const GemmParams& p, const MatmulConfig& config = {});  // gemm.cc

void Fill(const Tensor& x, double value);              // elementwise.cc
// Same dtype: bytewise. F32 <-> F64 and F32 <-> BF16: converted (to bf16 by
// round to nearest even exactly as math::F32ToBf16Bits, the bf16 GEMM operand
// rounding: NaN kept quiet with its sign, denormals rounded, not flushed).
void Copy(const Tensor& dst, const Tensor& src);
// The F32 -> BF16 span conversion behind Copy, per path (tests pin the paths
// against each other): kAuto = AVX512-BF16 (vcvtneps2bf16) when the CPU has
// it, else the scalar loop; both give the same bits.
enum class Bf16ConvertPath { kAuto, kScalar, kAvx512Bf16 };
bool Avx512Bf16ConvertAvailable();
void ConvertF32ToBf16(uint16_t* dst, const float* src, int64_t n, Bf16ConvertPath path = Bf16ConvertPath::kAuto);
void Axpy(const Tensor& y, double alpha, const Tensor& x);
void Scale(const Tensor& x, double alpha);
double SumSquares(const Tensor& x);
bool AllFinite(const Tensor& x);
void EmbeddingForward(const EmbeddingParams& p);
void EmbeddingBackward(const EmbeddingParams& p);
void SwiGluForward(const SwiGluParams& p);
void SwiGluBackward(const SwiGluParams& p);
void AdamW(const AdamWParams& p);

void RmsNormForward(const RmsNormParams& p);           // rmsnorm.cc
void RmsNormBackward(const RmsNormParams& p);
void Rope(const RopeParams& p);                        // rope.cc

// How attention's tile products run: the ISA of the tile kernels
// (attention_tiles.h; kAuto = the best this CPU has; tests force each path),
// and bf16 = F32 attention with bf16 tile operands and fp32 accumulation and
// softmax statistics where the CPU has AMX, or AVX512-BF16 and a shape the
// packed driver runs (AttentionTileKernelsBf16; otherwise, and for F64, it
// has no effect: attention stays fp32, since vdpbf16ps products packed per
// product are no faster than fp32 FMAs).
struct AttentionConfig {
  AttentionIsa isa = AttentionIsa::kAuto;
  bool bf16 = false;
  bool bf16_amx = true;  // false: the AVX512-BF16 (vdpbf16ps) products, even where AMX exists (tests)
  // bf16 products through the packed driver (kernels/cpu/attention_packed_bf16.h:
  // operands converted once per block) where it applies; false: the generic
  // driver's per-product packing (the same bits; tests compare the two).
  bool bf16_packed = true;
  // Key parts per backward item (attention_driver.h, SegmentKeyParts); 0 =
  // as many as keep the threads busy (1 where the items already do). Tests
  // set it to check the split at any thread count.
  int backward_key_parts = 0;
};
void AttentionForward(const AttentionParams& p, const AttentionConfig& config = {});  // attention.cc
void AttentionBackward(const AttentionParams& p, const AttentionConfig& config = {});
// How many backward items of the generic driver kept their staged rows in a
// ring that wrapped (a sliding window much shorter than its segment): tests
// check that their cases reach it.
int64_t AttentionBackwardRingWraps();
void AttentionMerge(const AttentionMergeParams& p);    // attention_merge.cc

double LmHeadLoss(const LmHeadLossParams& p,           // lm_head_loss.cc
                  const MatmulConfig& config = {});

}  // namespace longctx::cpu

#endif  // LONGCTX_KERNELS_CPU_CPU_KERNELS_H_
