// Why: at precision bf16 on a CPU with AMX, the generic attention driver
// (attention.cc over AttentionTileKernels) converts both operands of every
// tile product to bf16 pairs — ten conversions per backward tile for five
// products, most of them of the same K, V, Q and dO blocks again and again.
// This driver (attention_amx.cc) walks the same items with the same masks and
// online softmax, but converts Q, K, V and dO once (per call, item or key
// block) and per tile only what is new: P and dS. Same products in the same
// order as the generic AMX path, so the results are the same bits
// (tests/kernels/attention_test.cc checks both against each other and against
// the double reference).
#ifndef LONGCTX_KERNELS_CPU_ATTENTION_AMX_H_
#define LONGCTX_KERNELS_CPU_ATTENTION_AMX_H_

#include <cstdint>

#include "kernels/attention_args.h"
#include "kernels/cpu/attention_tiles.h"

namespace longctx::cpu {

// What attention.cc hands over: the unpacked params, the AMX tile table (for
// its fp32 softmax passes) and, in the backward, D and the GQA partials.
struct AmxAttentionArgs {
  AttentionView<float> view;
  const AttentionTileKernels<float>* tiles = nullptr;
  const float* drow = nullptr;
  float *dk_part = nullptr, *dv_part = nullptr;
};

// Whether this driver can run: AMX usable here, head_dim a multiple of 32
// (whole k-pair tiles, no padding of d) and at most 256, keys sharing the
// queries' segments (training; not a KV cache).
bool AmxAttentionUsable(const AttentionView<float>& view);

// The forward (every item), and the backward's items (D and the GQA partials
// are attention.cc's, before and after).
void AmxAttentionForward(const AmxAttentionArgs& args);
void AmxAttentionBackwardItems(const AmxAttentionArgs& args);

// How many times either of the two above ran in this process (tests check
// that the packed driver, not the generic one, produced what they compare).
int64_t AmxAttentionCalls();

}  // namespace longctx::cpu

#endif  // LONGCTX_KERNELS_CPU_ATTENTION_AMX_H_
