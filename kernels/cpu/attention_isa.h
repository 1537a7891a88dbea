// Why: which instruction set runs the CPU attention's tiles is named once, for
// the CPU backend's options (kernels/cpu/cpu_backend.h:
// CpuBackendOptions::attention_isa) and for the CPU kernels that act on it
// (kernels/cpu/attention_tiles.h, where it is cpu::AttentionIsa), so the option
// needs no translation on its way in. A CPU name, so it lives with the CPU
// backend, not in the interface every backend shares.
#ifndef LONGCTX_KERNELS_CPU_ATTENTION_ISA_H_
#define LONGCTX_KERNELS_CPU_ATTENTION_ISA_H_

#include <cstdint>

namespace longctx {

// kAuto = the best this CPU has: kAvx512 (avx512f/bw/dq/vl), else kAvx2 (avx2 +
// fma), else kScalar; at precision bf16 the bf16 tiles where the CPU has bf16
// dot products. The others force one, e.g. to measure or check the AVX2 path
// on an AVX-512 machine (`bench attention --attention_isa=avx2`); kAvx2 and
// kScalar run fp32 tiles at either precision, as a CPU without bf16 dot
// products does.
enum class CpuAttentionIsa : uint8_t { kAuto = 0, kAvx512 = 1, kAvx2 = 2, kScalar = 3 };

}  // namespace longctx

#endif  // LONGCTX_KERNELS_CPU_ATTENTION_ISA_H_
