// Why: ops whose output only bf16 products read (RMSNorm's y, SwiGLU's h;
// kernels/ops.h) can write it in bf16 directly. They compute each value in
// fp32 as always and round it exactly as Copy does; this helper does that a
// block at a time through a small stack buffer, so no F32 output is ever
// stored and the conversion runs on whole vectors (ConvertF32ToBf16).
#ifndef LONGCTX_KERNELS_CPU_BF16_OUTPUT_H_
#define LONGCTX_KERNELS_CPU_BF16_OUTPUT_H_

#include <algorithm>
#include <cstdint>

#include "kernels/cpu/cpu_kernels.h"

namespace longctx::cpu {

// Values per block: 2 KiB of fp32, in L1 beside the op's inputs.
inline constexpr int64_t kBf16OutputBlock = 512;

// out[i] = bf16(value(i)) for i in [0, n), value returning float.
template <class Value>
void StoreAsBf16(uint16_t* out, int64_t n, Value value) {
  alignas(64) float block[kBf16OutputBlock];
  for (int64_t i0 = 0; i0 < n; i0 += kBf16OutputBlock) {
    const int64_t len = std::min(kBf16OutputBlock, n - i0);
    for (int64_t i = 0; i < len; ++i) block[i] = value(i0 + i);
    ConvertF32ToBf16(out + i0, block, len);
  }
}

}  // namespace longctx::cpu

#endif  // LONGCTX_KERNELS_CPU_BF16_OUTPUT_H_
