// Why: at precision bf16 the generic attention driver (attention.cc over
// AttentionTileKernels) converts both operands of every tile product to bf16
// pairs — ten conversions per backward tile for five products, most of them
// of the same K, V, Q and dO blocks again and again. This driver
// (attention_packed_bf16.cc) walks the same items with the same masks and
// online softmax, but converts Q, K, V and dO once (per call, item or key
// block) and per tile only what is new: P and dS. Its tile products run on
// one of two units with the same operand layouts (amx_bf16.h): the AMX tile
// unit (tdpbf16ps) or, on CPUs with AVX512-BF16 and no AMX, vdpbf16ps dot
// products. Same products in the same order as the generic path on the same
// unit, so the results are the same bits (tests/kernels/attention_test.cc
// checks both against each other and against the double reference).
#ifndef LONGCTX_KERNELS_CPU_ATTENTION_PACKED_BF16_H_
#define LONGCTX_KERNELS_CPU_ATTENTION_PACKED_BF16_H_

#include <cstdint>

#include "kernels/attention_args.h"
#include "kernels/cpu/attention_tiles.h"

namespace longctx::cpu {

// What attention.cc hands over: the unpacked params, the bf16 tile table of
// the unit (its fp32 softmax passes), which unit runs the products, and, in
// the backward, D and the GQA partials.
struct PackedBf16AttentionArgs {
  AttentionView<float> view;
  const AttentionTileKernels<float>* tiles = nullptr;
  bool tile_unit = true;  // AMX tdpbf16ps; false: AVX512-BF16 vdpbf16ps
  const float* drow = nullptr;
  float *dk_part = nullptr, *dv_part = nullptr;
  // Backward: items of one segment and one kv head run its query heads in
  // turn and write dK, dV themselves (the first head stores, the others add,
  // in head order: the bits of summing per-head partials), so there are no
  // partials and no pass summing them (PackedBf16KeysDirect says when).
  bool keys_direct = false;
  // Backward key parts (attention_driver.h): key_parts > 1 (the most of any
  // segment; segment_parts per segment) splits items' keys, each part's raw
  // dQ going to dQ (part 0) or dq_part; attention.cc combines.
  int key_parts = 1;
  const int* segment_parts = nullptr;
  float* dq_part = nullptr;
};

// Whether this driver can run on the unit: the unit usable here (AMX with
// tile state granted, or AVX512-BF16), head_dim a multiple of 32 (whole
// k-pair tiles, no padding of d) and at most 256, keys sharing the queries'
// segments (training; not a KV cache).
bool PackedBf16AttentionUsable(const AttentionView<float>& view, bool tile_unit);

// Whether the backward writes dK, dV directly (keys_direct): GQA, and enough
// (segment, kv head) items to keep `threads` busy (two per thread; fewer
// would leave threads idle, and per-query-head items with partials are used).
bool PackedBf16KeysDirect(const AttentionView<float>& view, int threads);

// The forward (every item), and the backward's items (D and the GQA partials
// are attention.cc's, before and after).
void PackedBf16AttentionForward(const PackedBf16AttentionArgs& args);
void PackedBf16AttentionBackwardItems(const PackedBf16AttentionArgs& args);

// How many times either of the two above ran in this process on the unit
// (tests check that the packed driver, not the generic one, produced what
// they compare).
int64_t PackedBf16AttentionCalls(bool tile_unit);

// How many (segment, query head) backward passes in this process kept their
// packed Q, dO and dQ rows in a wrapping ring (a window much shorter than its
// segment) rather than whole-segment buffers (tests check that they cover it).
int64_t PackedBf16BackwardRingWraps();

}  // namespace longctx::cpu

#endif  // LONGCTX_KERNELS_CPU_ATTENTION_PACKED_BF16_H_
