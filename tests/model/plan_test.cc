// Why: the plan is how people decide what hardware a run needs. Its parameter
// count must match the published models exactly, its FLOPs must reflect that
// windowed layers do less work, and its memory lines must add up.
#include "model/plan.h"

#include <algorithm>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "base/log.h"
#include "train/config_loader.h"

namespace longctx {
namespace {

using ::testing::HasSubstr;

ModelDims Preset(const std::string& name) {
  auto cfg = LoadTrainConfig(std::string(LONGCTX_SOURCE_DIR) + "/configs/" + name + ".textproto", {});
  CHECK_OK(cfg.status());
  auto dims = ResolveModelConfig(cfg->model());
  CHECK_OK(dims.status());
  return *dims;
}

TEST(CountParams, TinyLlama11BIsExact) {
  const ParamCounts p = CountParams(Preset("tinyllama-1.1b"));
  EXPECT_EQ(p.total, 1100048384);
  EXPECT_EQ(p.embedding, 32000 * 2048);
  EXPECT_EQ(p.lm_head, 32000 * 2048);
  EXPECT_EQ(p.attention_per_layer, 2048 * 2048 * 2 + 2 * 2048 * 256);
  EXPECT_EQ(p.mlp_per_layer, 3 * 2048 * 5632);
  // The attention pattern changes no weight.
  EXPECT_EQ(CountParams(Preset("tinyllama-1.1b-rnope-swa")).total, 1100048384);
}

TEST(CountParams, RnopeSwa8BTiedIsExact) {
  const ParamCounts p = CountParams(Preset("rnope-swa-8b"));
  EXPECT_EQ(p.total, 8028164096);
  EXPECT_EQ(p.lm_head, 0);
  EXPECT_EQ(CountParams(Preset("rope-8b")).total, 8028164096);
}

TEST(CountParams, TinyLlama13BBothWays) {
  const ModelDims d = Preset("tinyllama-1.3b");
  EXPECT_EQ(CountParams(d).total, 1494312960);
  ModelDims tied = d;
  tied.tied = true;
  EXPECT_EQ(CountParams(tied).total, 1231644672);  // the "~1.23B" of the config comment
}

TEST(CountParams, TinyTestEqualsAHandSum) {
  const ModelDims d = Preset("tiny-test");
  // hidden 32, 4 layers, 4 heads x 8, 2 kv heads, ffn 64, vocab 260, untied.
  const int64_t attention = 32 * 32 /*q*/ + 32 * 16 /*k*/ + 32 * 16 /*v*/ + 32 * 32 /*o*/;  // 3072
  const int64_t mlp = 3 * 32 * 64;                                                       // 6144
  const int64_t norms = 2 * 32;
  const int64_t expected = 260 * 32 + 4 * (attention + mlp + norms) + 32 + 260 * 32;
  const ParamCounts p = CountParams(d);
  EXPECT_EQ(expected, 53792);
  EXPECT_EQ(p.total, expected);
  EXPECT_EQ(p.per_layer, 9280);
  EXPECT_EQ(p.matmul, 4 * (attention + mlp) + 260 * 32);

  ModelDims qk = d;
  qk.qk_norm = true;
  EXPECT_EQ(CountParams(qk).total, expected + 4 * 2 * 8);  // q_norm + k_norm of head_dim per layer
}

TEST(CountParams, TiedMinusUntiedIsVocabTimesHidden) {
  ModelDims d = Preset("demo");
  ASSERT_FALSE(d.tied);
  const ParamCounts untied = CountParams(d);
  d.tied = true;
  const ParamCounts tied = CountParams(d);
  EXPECT_EQ(untied.total - tied.total, int64_t{d.vocab} * d.hidden);
  // The LM-head product happens either way.
  EXPECT_EQ(untied.matmul, tied.matmul);
  EXPECT_EQ(untied.total, 6035712);
}

TEST(MeanKeysPerQuery, MatchesBruteForce) {
  for (int64_t T : {1, 2, 7, 64, 100}) {
    for (int64_t w : {0, 1, 3, 8, 64, 100, 1000}) {
      double sum = 0;
      for (int64_t i = 0; i < T; ++i) sum += (w == 0) ? static_cast<double>(i + 1) : std::min(i + 1, w);
      EXPECT_DOUBLE_EQ(MeanKeysPerQuery(T, w), sum / T) << "T " << T << " w " << w;
    }
  }
  EXPECT_DOUBLE_EQ(MeanKeysPerQuery(2048, 0), 1024.5);
}

TEST(CountTrainingFlops, WindowLayersDoLessAttentionWork) {
  const ModelDims full = Preset("rope-8b");
  const ModelDims swa = Preset("rnope-swa-8b");
  const FlopCounts ff = CountTrainingFlops(full, 32768);
  const FlopCounts fs = CountTrainingFlops(swa, 32768);
  EXPECT_EQ(ff.matmul_per_token, fs.matmul_per_token);
  EXPECT_LT(fs.attention_per_token, ff.attention_per_token);
  EXPECT_EQ(ff.standard_attention_per_token, fs.standard_attention_per_token);
  // Full layers: 12 x q_dim x (T+1)/2 each.
  EXPECT_DOUBLE_EQ(ff.attention_per_token, 32 * 12.0 * 4096 * (32768 + 1) / 2.0);
  // RNoPE-SWA: 8 full layers + 24 window layers.
  const double window_keys = MeanKeysPerQuery(32768, 4096);
  EXPECT_DOUBLE_EQ(fs.attention_per_token, 12.0 * 4096 * (8 * (32768 + 1) / 2.0 + 24 * window_keys));
  // At a length inside the window every layer is effectively full.
  EXPECT_DOUBLE_EQ(CountTrainingFlops(swa, 4096).attention_per_token,
                   CountTrainingFlops(full, 4096).attention_per_token);
  EXPECT_DOUBLE_EQ(ff.matmul_per_token, 6.0 * CountParams(full).matmul);
  EXPECT_DOUBLE_EQ(ff.standard_attention_per_token, 12.0 * 32 * 32768 * 4096);
}

TEST(EstimateTrainingMemory, TinyTestLinesByHand) {
  const ModelDims d = Preset("tiny-test");
  const MemoryPlan m = EstimateTrainingMemory(d, 2, 32);
  const int64_t n = 64;  // tokens
  // x 32, norm1 32+1, qkv (4+2+2)x8, attn out 32, lse 4, mid 32, norm2 32+1, gate_up 128, swiglu 64.
  EXPECT_EQ(m.layer_floats_per_token, 422);
  EXPECT_EQ(m.layer_activations, 4 * n * 422 * 4);
  EXPECT_EQ(m.weights, 53792 * 4);
  EXPECT_EQ(m.grads, m.weights);
  EXPECT_EQ(m.adam_m, m.weights);
  EXPECT_EQ(m.adam_v, m.weights);
  EXPECT_EQ(m.final_norm, n * (32 + 33) * 4);  // final residual + final norm out and rstd
  EXPECT_EQ(m.token_buffers, n * 12);
  EXPECT_EQ(m.logits_chunk_tokens, 64);  // fewer tokens than one chunk
  EXPECT_EQ(m.logits_chunk, 64 * 260 * 4);
  EXPECT_EQ(m.scratch_floats_per_token, 2 * 32 + 64 + 32 + 128 + 64);
  EXPECT_EQ(m.activations, m.layer_activations + m.final_norm + m.token_buffers + m.logits_chunk + m.backward_scratch);
  EXPECT_EQ(m.total, 4 * m.weights + m.activations);

  ModelDims qk = d;
  qk.qk_norm = true;
  EXPECT_EQ(EstimateTrainingMemory(qk, 2, 32).layer_floats_per_token, 422 + (4 + 2) * 8 + (4 + 2));
  // Activations scale with tokens; the logits chunk stops growing at the LM
  // head's default rows (1,024 at this vocab) or the rows asked for.
  const MemoryPlan big = EstimateTrainingMemory(d, 64, 32);
  EXPECT_EQ(big.layer_activations, 32 * m.layer_activations);
  EXPECT_EQ(big.logits_chunk, 1024 * 260 * 4);
  EXPECT_EQ(EstimateTrainingMemory(d, 64, 32, 256).logits_chunk, 256 * 260 * 4);
}

TEST(FormatPlan, PrintsTheTotalsAndJsonAgrees) {
  const ModelDims d = Preset("tinyllama-1.1b");
  PlanOptions o;
  o.batch = 8;
  o.seq_len = 2048;
  o.grad_accum = 128;
  const Plan plan = MakePlan(d, o);
  const std::string text = FormatPlan(plan);
  EXPECT_THAT(text, HasSubstr("1,100,048,384"));
  EXPECT_THAT(text, HasSubstr("Training memory"));
  EXPECT_THAT(text, HasSubstr("RRRR RRRR"));
  const nlohmann::json j = PlanToJson(plan);
  EXPECT_EQ(j["params"]["total"], 1100048384);
  EXPECT_EQ(j["memory_bytes"]["total"], plan.memory.total);
  EXPECT_EQ(j["flops_per_token"]["mean_keys_per_layer"].size(), 22u);
  EXPECT_DOUBLE_EQ(j["flops_per_step"].get<double>(), plan.flops.total_per_token * 8 * 2048 * 128);
}

}  // namespace
}  // namespace longctx
