// Why: the inference engine must compute exactly what the model computes, only
// incrementally. For every layer kind (RoPE full, RNoPE-SWA with a window
// shorter than the sequence so the cache drops keys, NoPE, QK-norm, RoPER,
// and STRING on full and sliding layers) a prompt is prefilled (whole, in
// chunks, token by token) and then decoded token by token; every step's
// logits must equal the last-position logits of a fresh full forward
// (Transformer::ForwardLogits, the training code path) over the same tokens.
// Also: prefill's all-position logits, the bounded sliding-window cache,
// the capture hook, and input errors.
#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "tests/support/small_model.h"
#include "kernels/backend.h"
#include "kernels/cpu/cpu_backend.h"
#include "model/config.h"
#include "model/inference.h"
#include "model/transformer.h"
#include "tests/support/test_seed.h"

namespace longctx {
namespace {

struct Case {
  std::string name;
  LayerPattern pattern;
  bool qk_norm = false;
  bool roper = false;
  int roper_dim = 0;
  bool string = false;
  int string_s = 7, string_w = 3;
  bool rope_scale = false;
  int window = 5;
  int kv_heads = 2;
};

ModelConfig ConfigOf(const Case& c) {
  ModelConfig m;
  m.set_vocab_size(41);
  m.set_hidden_size(32);
  m.set_num_layers(4);
  m.set_num_heads(4);
  m.set_num_kv_heads(c.kv_heads);
  m.set_ffn_hidden_size(48);
  m.set_layer_pattern(c.pattern);
  m.set_pattern_group(2);
  m.set_sliding_window(c.window);
  m.set_qk_norm(c.qk_norm);
  m.set_rope_theta(40.0);  // rotations matter within tens of positions
  m.set_roper(c.roper);
  m.set_roper_dim(c.roper_dim);
  return m;
}

// A model with weights perturbed away from the tiny init, so attention is far
// from uniform and positions visibly change the logits.
std::unique_ptr<Transformer> MakeModel(const ModelDims& dims, Backend* be, uint64_t seed) {
  auto model = std::make_unique<Transformer>(dims, be, DType::kF32);
  model->InitParams(test::FreshSeed(seed));
  std::mt19937 rng(test::FreshSeed(seed + 1));
  std::normal_distribution<float> noise(0.f, 0.25f);
  for (int b = 0; b < model->layout().num_buffers(); ++b) {
    float* p = model->params().buffer(b).as<float>();
    for (int64_t i = 0; i < model->layout().buffer_size(b); ++i) p[i] += noise(rng);
  }
  return model;
}


// max |a - b| / max |b|: logits compared on their own scale.
double RelDiff(const float* a, const float* b, int64_t n) {
  double diff = 0, scale = 0;
  for (int64_t i = 0; i < n; ++i) {
    diff = std::max(diff, std::fabs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(b[i])));
  }
  return diff / scale;
}

constexpr int kPrompt = 13, kTotal = 40;
constexpr double kTol = 1e-4;

class InferenceEngineTest : public ::testing::TestWithParam<Case> {};

TEST_P(InferenceEngineTest, DecodeMatchesFullForwardEveryStep) {
  const Case c = GetParam();
  absl::StatusOr<ModelDims> dims = ResolveModelConfig(ConfigOf(c));
  ASSERT_TRUE(dims.ok()) << dims.status();
  std::unique_ptr<Backend> be = MakeCpuBackend();
  std::unique_ptr<Transformer> model = MakeModel(*dims, be.get(), 11);
  StringOptions so;
  so.enabled = c.string;
  so.s = c.string_s;
  so.w = c.string_w;
  so.rope_scale = c.rope_scale;
  ASSERT_TRUE(model->SetStringOptions(so).ok());  // the reference full forward uses the same STRING

  std::mt19937 rng(test::FreshSeed(5));
  std::uniform_int_distribution<int32_t> tok(0, dims->vocab - 1);
  std::vector<int32_t> tokens(kTotal);
  for (int32_t& t : tokens) t = tok(rng);
  const int64_t V = dims->vocab;

  const std::vector<float> full = testing::OneSegmentLogits(*model, tokens);
  double worst = 0;
  for (int64_t chunk : {int64_t{0}, int64_t{4}, int64_t{1}}) {
    EngineOptions eo;
    eo.string = so;
    eo.prefill_chunk = chunk;
    absl::StatusOr<std::unique_ptr<InferenceEngine>> engine = InferenceEngine::Create(model.get(), eo);
    ASSERT_TRUE(engine.ok()) << engine.status();
    std::vector<float> prompt_logits;
    absl::StatusOr<std::vector<float>> logits =
        (*engine)->Prefill({tokens.data(), static_cast<size_t>(kPrompt)}, &prompt_logits);
    ASSERT_TRUE(logits.ok()) << logits.status();
    // Prefill: every prompt position equals the full forward's row (causal:
    // the full forward's first rows do not depend on later tokens).
    for (int64_t t = 0; t < kPrompt; ++t) {
      const double e = RelDiff(prompt_logits.data() + t * V, full.data() + t * V, V);
      worst = std::max(worst, e);
      EXPECT_LE(e, kTol) << c.name << " chunk " << chunk << " prompt position " << t;
    }
    EXPECT_EQ(*logits, std::vector<float>(prompt_logits.end() - V, prompt_logits.end()));
    // Decode: each step against a fresh full forward over exactly the tokens so far.
    for (int64_t t = kPrompt; t < kTotal; ++t) {
      logits = (*engine)->Decode(tokens[t]);
      ASSERT_TRUE(logits.ok()) << logits.status();
      const std::vector<int32_t> prefix(tokens.begin(), tokens.begin() + t + 1);
      const std::vector<float> ref = testing::OneSegmentLogits(*model, prefix);
      const double e = RelDiff(logits->data(), ref.data() + t * V, V);
      worst = std::max(worst, e);
      EXPECT_LE(e, kTol) << c.name << " chunk " << chunk << " decode position " << t;
    }
    EXPECT_EQ((*engine)->position(), kTotal);
    // Sliding layers hold at most window - 1 + the largest block appended.
    for (int l = 0; l < dims->layers; ++l) {
      const KvCache& cache = (*engine)->cache();
      if (dims->is_sliding(l)) {
        const int64_t block = chunk == 0 ? kPrompt : chunk;
        EXPECT_LE(cache.capacity(l), std::max<int64_t>(2 * c.window, c.window - 1 + block)) << l;
        EXPECT_LE(cache.length(l), cache.capacity(l));
        EXPECT_EQ(cache.first_position(l) + cache.length(l), kTotal) << l;
        EXPECT_GT(cache.first_position(l), 0) << "the cache must have dropped keys";
      } else {
        EXPECT_EQ(cache.length(l), kTotal) << l;
        EXPECT_EQ(cache.first_position(l), 0) << l;
      }
    }
  }
  RecordProperty("worst_rel_diff", absl::StrFormat("%.3g", worst));
}

INSTANTIATE_TEST_SUITE_P(
    Kinds, InferenceEngineTest,
    ::testing::Values(Case{"AllRopeFull", ALL_ROPE_FULL},
                      Case{"RnopeSwaWindow5", RNOPE_SWA},
                      Case{"AllNopeMqa", ALL_NOPE_FULL, false, false, 0, false, 7, 3, false, 5, 1},
                      Case{"QkNormRnopeFull", RNOPE_FULL, true},
                      Case{"RoperRnopeSwaPartial", RNOPE_SWA, false, true, 4},
                      Case{"RoperQkNormRopeFull", ALL_ROPE_FULL, true, true, 0},
                      Case{"StringRopeFull", ALL_ROPE_FULL, false, false, 0, true, 7, 3},
                      Case{"StringRopeFullScaleS1", ALL_ROPE_FULL, false, false, 0, true, 1, 0, true},
                      Case{"StringRnopeSwaWindow12", RNOPE_SWA, false, false, 0, true, 5, 2, true, 12},
                      Case{"StringRoperRnopeFull", RNOPE_FULL, true, true, 4, true, 9, 30}),
    [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

// STRING must actually change the model's output once distances reach S.
TEST(InferenceEngine, StringChangesLogitsBeyondS) {
  absl::StatusOr<ModelDims> dims = ResolveModelConfig(ConfigOf(Case{"", ALL_ROPE_FULL}));
  ASSERT_TRUE(dims.ok());
  std::unique_ptr<Backend> be = MakeCpuBackend();
  std::unique_ptr<Transformer> model = MakeModel(*dims, be.get(), 3);
  std::vector<int32_t> tokens(30);
  for (int i = 0; i < 30; ++i) tokens[i] = (i * 7) % dims->vocab;
  EngineOptions plain, string;
  string.string = {true, 10, 2, false};
  auto a = InferenceEngine::Create(model.get(), plain), b = InferenceEngine::Create(model.get(), string);
  ASSERT_TRUE(a.ok() && b.ok());
  std::vector<float> la, lb;
  ASSERT_TRUE((*a)->Prefill(tokens, &la).ok());
  ASSERT_TRUE((*b)->Prefill(tokens, &lb).ok());
  const int64_t V = dims->vocab;
  // Positions 0..9 see no distance >= S = 10: identical; later ones differ.
  EXPECT_LE(RelDiff(lb.data() + 9 * V, la.data() + 9 * V, V), 1e-6);
  EXPECT_GT(RelDiff(lb.data() + 29 * V, la.data() + 29 * V, V), 1e-3);
}

TEST(InferenceEngine, CaptureHookHandsBackPostRopeQkPerLayer) {
  absl::StatusOr<ModelDims> dims = ResolveModelConfig(ConfigOf(Case{"", RNOPE_SWA, true}));
  ASSERT_TRUE(dims.ok());
  std::unique_ptr<Backend> be = MakeCpuBackend();
  std::unique_ptr<Transformer> model = MakeModel(*dims, be.get(), 4);
  std::vector<int32_t> tokens(17);
  for (int i = 0; i < 17; ++i) tokens[i] = (i * 5 + 1) % dims->vocab;
  auto run = [&](int64_t chunk, std::vector<CapturedAttention>* out, std::vector<int64_t>* firsts) {
    EngineOptions eo;
    eo.prefill_chunk = chunk;
    auto engine = InferenceEngine::Create(model.get(), eo);
    ASSERT_TRUE(engine.ok());
    (*engine)->set_capture_hook([&](const CapturedAttention& c, int64_t first) {
      out->push_back(c);
      firsts->push_back(first);
    });
    ASSERT_TRUE((*engine)->Prefill(tokens).ok());
    ASSERT_TRUE((*engine)->Decode(3).ok());  // decode steps are not captured
    // For a full layer, the captured keys are exactly the cache's first rows.
    for (int l = 0; l < dims->layers; ++l) {
      if (dims->is_sliding(l)) continue;
      const Tensor keys = (*engine)->cache().keys(l);
      const float* kc = keys.as<float>();
      const CapturedAttention& c = (*out)[out->size() - dims->layers + l];
      for (size_t e = 0; e < c.k.size(); ++e) ASSERT_EQ(c.k[e], kc[e]) << l;
    }
  };
  std::vector<CapturedAttention> whole, chunked;
  std::vector<int64_t> f1, f2;
  run(0, &whole, &f1);
  run(5, &chunked, &f2);
  ASSERT_EQ(whole.size(), static_cast<size_t>(dims->layers));
  ASSERT_EQ(chunked.size(), whole.size());
  for (int l = 0; l < dims->layers; ++l) {
    const CapturedAttention& c = whole[l];
    EXPECT_EQ(f1[l], 0);
    EXPECT_EQ(c.layer, l);
    EXPECT_EQ(c.kind, dims->is_sliding(l) ? "rope_swa" : "nope_full");
    EXPECT_EQ(c.uses_rope, dims->uses_rope(l));
    EXPECT_EQ(c.window, dims->layer_window(l));
    EXPECT_EQ(c.rotary_dim, dims->uses_rope(l) ? dims->rope_dim : 0);
    EXPECT_EQ(c.tokens, 17);
    EXPECT_EQ(c.heads, dims->heads);
    EXPECT_EQ(c.kv_heads, dims->kv_heads);
    EXPECT_EQ(c.head_dim, dims->head_dim);
    ASSERT_EQ(c.q.size(), static_cast<size_t>(17 * dims->q_dim()));
    ASSERT_EQ(c.k.size(), static_cast<size_t>(17 * dims->kv_dim()));
    // Chunking the prefill does not change what each layer saw.
    for (size_t e = 0; e < c.q.size(); ++e) ASSERT_NEAR(chunked[l].q[e], c.q[e], 1e-5 * (1 + std::fabs(c.q[e])));
    for (size_t e = 0; e < c.k.size(); ++e) ASSERT_NEAR(chunked[l].k[e], c.k[e], 1e-5 * (1 + std::fabs(c.k[e])));
  }
}

TEST(InferenceEngine, RejectsBadInputs) {
  absl::StatusOr<ModelDims> dims = ResolveModelConfig(ConfigOf(Case{"", ALL_ROPE_FULL}));
  ASSERT_TRUE(dims.ok());
  std::unique_ptr<Backend> be = MakeCpuBackend();
  std::unique_ptr<Transformer> model = MakeModel(*dims, be.get(), 1);
  EngineOptions eo;
  auto engine = InferenceEngine::Create(model.get(), eo);
  ASSERT_TRUE(engine.ok());
  absl::StatusOr<std::vector<float>> r = (*engine)->Prefill({});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  std::vector<int32_t> bad = {1, 2, 41};
  r = (*engine)->Prefill(bad);
  EXPECT_NE(r.status().message().find("token 2 is id 41"), std::string::npos) << r.status();
  EXPECT_EQ((*engine)->position(), 0);
  EXPECT_FALSE((*engine)->Decode(-1).ok());
  eo.string = {true, 0, 128, false};
  EXPECT_NE(InferenceEngine::Create(model.get(), eo).status().message().find("string.s"), std::string::npos);
  eo.string = {};
  eo.prefill_chunk = -1;
  EXPECT_FALSE(InferenceEngine::Create(model.get(), eo).ok());
}

// Reset starts a new sequence: the same prompt gives the same logits again.
TEST(InferenceEngine, ResetStartsOver) {
  absl::StatusOr<ModelDims> dims = ResolveModelConfig(ConfigOf(Case{"", RNOPE_SWA}));
  ASSERT_TRUE(dims.ok());
  std::unique_ptr<Backend> be = MakeCpuBackend();
  std::unique_ptr<Transformer> model = MakeModel(*dims, be.get(), 2);
  auto engine = InferenceEngine::Create(model.get(), EngineOptions{});
  ASSERT_TRUE(engine.ok());
  const std::vector<int32_t> prompt = {4, 8, 15, 16, 23, 40, 2, 9};
  auto first = (*engine)->Prefill(prompt);
  ASSERT_TRUE(first.ok());
  for (int i = 0; i < 12; ++i) ASSERT_TRUE((*engine)->Decode(i).ok());
  (*engine)->Reset();
  EXPECT_EQ((*engine)->position(), 0);
  auto again = (*engine)->Prefill(prompt);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*first, *again);
}

}  // namespace
}  // namespace longctx
