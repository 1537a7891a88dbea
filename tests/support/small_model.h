// Why: model-level tests (recomputation, bf16 activation storage, ...) run a
// small Llama-style Transformer on a small packed batch — documents of given
// lengths in one token stream, deterministic ids and targets, positions that
// restart per document — and each wrote the lines that build both. They build
// them here.
#ifndef LONGCTX_TESTS_SUPPORT_SMALL_MODEL_H_
#define LONGCTX_TESTS_SUPPORT_SMALL_MODEL_H_

#include <cstdint>
#include <vector>

#include "model/config.h"
#include "model/transformer.h"
#include "train/parallel/parallel_strategy.h"

namespace longctx::testing {

// Host arrays of one packed batch; Tensors() views them (keep this alive).
struct PackedTestBatch {
  std::vector<int32_t> ids, targets, positions, cu;
  BatchTensors Tensors();
  int64_t tokens() const { return static_cast<int64_t>(ids.size()); }
};

// Documents at cu_seqlens `cu` (cu[0] = 0, cu.back() = tokens): token t has id
// (t * 37 + 11) % vocab and target (t * 53 + 3) % vocab, except every fifth
// target (t % 5 == 0), which is -1 (no loss); positions restart at 0 per document.
PackedTestBatch MakePackedTestBatch(std::vector<int32_t> cu, int vocab = 97);

// vocab 97, hidden 32, 4 heads / 2 kv heads, ffn 48, `layers` layers of
// `pattern` in groups of `pattern_group` (window 5 for RNOPE_SWA), QK-norm
// and RoPER as given.
ModelConfig SmallTestModelConfig(int layers, int pattern_group, LayerPattern pattern, bool qk_norm, bool roper);

// Logits [T, V] (host, F32 model on a host backend) of one forward over
// `tokens` as a single segment at positions 0..T-1 (no targets).
std::vector<float> OneSegmentLogits(Transformer& model, const std::vector<int32_t>& tokens);

// The full parameters of `model` on the host, one vector per buffer, gathered
// by the strategy (and released after): what strategy tests compare.
std::vector<std::vector<float>> FullParametersOnHost(ParallelStrategy& strategy, Transformer& model);

}  // namespace longctx::testing

#endif  // LONGCTX_TESTS_SUPPORT_SMALL_MODEL_H_
