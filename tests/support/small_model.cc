// Why: see small_model.h.
#include "tests/support/small_model.h"

#include <utility>

#include "gtest/gtest.h"

namespace longctx::testing {

BatchTensors PackedTestBatch::Tensors() {
  const int64_t n = tokens();
  BatchTensors b;
  b.inputs = Tensor(ids.data(), DType::kI32, {n});
  b.targets = Tensor(targets.data(), DType::kI32, {n});
  b.positions = Tensor(positions.data(), DType::kI32, {n});
  b.cu_seqlens = Tensor(cu.data(), DType::kI32, {static_cast<int64_t>(cu.size())});
  return b;
}

PackedTestBatch MakePackedTestBatch(std::vector<int32_t> cu, int vocab) {
  PackedTestBatch p;
  const int64_t n = cu.back();
  p.ids.resize(n);
  p.targets.resize(n);
  p.positions.resize(n);
  for (int64_t t = 0; t < n; ++t) {
    p.ids[t] = static_cast<int32_t>((t * 37 + 11) % vocab);
    p.targets[t] = t % 5 == 0 ? -1 : static_cast<int32_t>((t * 53 + 3) % vocab);
  }
  for (size_t s = 0; s + 1 < cu.size(); ++s)
    for (int32_t t = cu[s]; t < cu[s + 1]; ++t) p.positions[t] = t - cu[s];
  p.cu = std::move(cu);
  return p;
}

ModelConfig SmallTestModelConfig(int layers, int pattern_group, LayerPattern pattern, bool qk_norm, bool roper) {
  ModelConfig m;
  m.set_vocab_size(97);
  m.set_hidden_size(32);
  m.set_num_layers(layers);
  m.set_num_heads(4);
  m.set_num_kv_heads(2);
  m.set_ffn_hidden_size(48);
  m.set_layer_pattern(pattern);
  m.set_pattern_group(pattern_group);
  if (pattern == RNOPE_SWA) m.set_sliding_window(5);
  m.set_qk_norm(qk_norm);
  m.set_roper(roper);
  return m;
}

std::vector<std::vector<float>> FullParametersOnHost(ParallelStrategy& strategy, Transformer& model) {
  EXPECT_TRUE(strategy.GatherFullParameters().ok());
  std::vector<std::vector<float>> out;
  for (int b = 0; b < model.layout().num_buffers(); ++b) {
    out.emplace_back(model.layout().buffer_size(b));
    model.params().CopyToHost(b, out.back().data());
  }
  strategy.ReleaseFullParameters();
  return out;
}

std::vector<float> OneSegmentLogits(Transformer& model, const std::vector<int32_t>& tokens) {
  const int64_t T = static_cast<int64_t>(tokens.size()), V = model.dims().vocab;
  std::vector<int32_t> inputs = tokens, targets(T, -1), positions(T), cu = {0, static_cast<int32_t>(T)};
  for (int64_t t = 0; t < T; ++t) positions[t] = static_cast<int32_t>(t);
  BatchTensors b;
  b.inputs = Tensor(inputs.data(), DType::kI32, {T});
  b.targets = Tensor(targets.data(), DType::kI32, {T});
  b.positions = Tensor(positions.data(), DType::kI32, {T});
  b.cu_seqlens = Tensor(cu.data(), DType::kI32, {2});
  std::vector<float> logits(T * V);
  model.ForwardLogits(b, Tensor(logits.data(), DType::kF32, {T, V}));
  return logits;
}

}  // namespace longctx::testing
