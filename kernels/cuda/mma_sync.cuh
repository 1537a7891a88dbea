// Why: the warp-level tensor-core building blocks of the CUDA attention
// (attention_mma.cu), apart from the attention they serve: the m16n8k16 bf16
// product, fragment loads by ldmatrix (plain and transposed) in PTX's
// register layouts, the accumulator-to-A-operand reuse, ex2, and cp.async
// copies in commit groups. All inline PTX, sm_80 and later; for older
// targets each compiles to a trap (LONGCTX_MMA_TARGET), so a build for them
// still compiles and the caller must not launch (AttentionMmaUsable checks
// the device). Included only by .cu files.
#ifndef LONGCTX_KERNELS_CUDA_MMA_SYNC_CUH_
#define LONGCTX_KERNELS_CUDA_MMA_SYNC_CUH_

#include <cuda_bf16.h>

#include <cstdint>

namespace longctx::cuda {

using Bf16 = __nv_bfloat16;

// bf16 mma.sync and cp.async exist from sm_80 on. For older targets (a build
// with CMAKE_CUDA_ARCHITECTURES below 80) the instructions compile to a trap.
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
#define LONGCTX_MMA_TARGET 1
#else
#define LONGCTX_MMA_TARGET 0
#endif

// d += a * b: one m16n8k16 tensor-core product, bf16 operands, fp32 accumulators.
__device__ __forceinline__ void Mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if LONGCTX_MMA_TARGET
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
  __trap();
#endif
}

// Two fp32 values as a bf16 pair (round to nearest even), lo in the low half.
__device__ __forceinline__ uint32_t PackBf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

[[maybe_unused]] __device__ __forceinline__ unsigned SmemAddress(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// Four 8 x 8 bf16 matrices from shared memory, lanes 8m..8m+7 addressing the
// rows of matrix m; each lane gets (row lane/4, columns 2(lane%4), +1) of each
// (PTX ldmatrix), or with .trans (rows 2(lane%4), +1; column lane/4).
__device__ __forceinline__ void LdMatrixX4(uint32_t (&r)[4], const Bf16* row) {
#if LONGCTX_MMA_TARGET
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(SmemAddress(row)));
#else
  __trap();
#endif
}
__device__ __forceinline__ void LdMatrixX4Trans(uint32_t (&r)[4], const Bf16* row) {
#if LONGCTX_MMA_TARGET
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(SmemAddress(row)));
#else
  __trap();
#endif
}

// The A fragment (16 x 16) at rows r0.., columns k0.. of a row-major shared
// array (leading dimension ld): matrices (r0, k0), (r0 + 8, k0), (r0, k0 + 8),
// (r0 + 8, k0 + 8) are a's four registers in PTX's m16n8k16 layout.
__device__ __forceinline__ void LoadA(uint32_t (&a)[4], const Bf16* s, int ld, int r0, int k0, int lane) {
  const int m = lane >> 3, r = lane & 7;
  LdMatrixX4(a, s + (r0 + (m & 1) * 8 + r) * ld + k0 + (m >> 1) * 8);
}

// B fragments (16 x 8, k x n) of two n8 products, columns n0.. (b[0], b[1])
// and n0 + 8.. (b[2], b[3]), k0..k0 + 15, from a shared array whose row n
// holds the k values (K for S = Q K^T).
__device__ __forceinline__ void LoadB2(uint32_t (&b)[4], const Bf16* s, int ld, int n0, int k0, int lane) {
  const int m = lane >> 3, r = lane & 7;
  LdMatrixX4(b, s + (n0 + (m >> 1) * 8 + r) * ld + k0 + (m & 1) * 8);
}

// The same from a shared array whose row k holds the n values (V for P V):
// ldmatrix's transpose.
__device__ __forceinline__ void LoadB2Trans(uint32_t (&b)[4], const Bf16* s, int ld, int k0, int n0, int lane) {
  const int m = lane >> 3, r = lane & 7;
  LdMatrixX4Trans(b, s + (k0 + (m & 1) * 8 + r) * ld + n0 + (m >> 1) * 8);
}

// FlashAttention-2's register reuse: the accumulators of two adjacent n8
// products (C layout: rows g and g + 8, columns 2t, 2t + 1) are, rounded to
// bf16, the A fragment of the 16 x 16 block they form.
__device__ __forceinline__ void AccToA(uint32_t (&a)[4], const float (&c0)[4], const float (&c1)[4]) {
  a[0] = PackBf16(c0[0], c0[1]);
  a[1] = PackBf16(c0[2], c0[3]);
  a[2] = PackBf16(c1[0], c1[1]);
  a[3] = PackBf16(c1[2], c1[3]);
}

// 2^x on the special-function unit (ex2.approx; 2^-inf = 0). The softmax's
// exp(s - m) is Exp2(s log2(e) - m log2(e)): one FFMA and one MUFU per score.
inline constexpr float kLog2e = 1.4426950408889634f;
__device__ __forceinline__ float Exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// Asynchronous 16-byte global -> shared copies (sm_80+), in commit groups.
__device__ __forceinline__ void CpAsync16(void* smem, const void* gmem) {
#if LONGCTX_MMA_TARGET
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(SmemAddress(smem)), "l"(gmem) : "memory");
#else
  __trap();
#endif
}
__device__ __forceinline__ void CpAsyncCommit() {
#if LONGCTX_MMA_TARGET
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#else
  __trap();
#endif
}
__device__ __forceinline__ void CpAsync4(void* smem, const void* gmem) {
#if LONGCTX_MMA_TARGET
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(SmemAddress(smem)), "l"(gmem) : "memory");
#else
  __trap();
#endif
}
// Wait until at most N of this thread's groups are still in flight.
template <int N>
__device__ __forceinline__ void CpAsyncWait() {
#if LONGCTX_MMA_TARGET
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#else
  __trap();
#endif
}

}  // namespace longctx::cuda

#endif  // LONGCTX_KERNELS_CUDA_MMA_SYNC_CUH_
