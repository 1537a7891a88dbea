// Why: ResolveModelConfig is the gate every run passes through. These tests pin
// the layer patterns of the paper (1:1, 1:3, 1:7, pure), the derived defaults,
// that each bad field is reported by its own name, and that the Hugging Face
// config.json export reads back to the same model.
#include "model/config.h"

#include <filesystem>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/hf_config.h"
#include "train/config_loader.h"

namespace longctx {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr AttentionKind S = ROPE_SWA, N = NOPE_FULL, R = ROPE_FULL;

TEST(LayerKindsForPattern, OneToThreeIsThreeWindowLayersThenNope) {
  EXPECT_THAT(LayerKindsForPattern(RNOPE_SWA, 8, 4), ElementsAre(S, S, S, N, S, S, S, N));
  // A partial last group has no NoPE layer.
  EXPECT_THAT(LayerKindsForPattern(RNOPE_SWA, 6, 4), ElementsAre(S, S, S, N, S, S));
}

TEST(LayerKindsForPattern, OneToOneAndOneToSeven) {
  EXPECT_THAT(LayerKindsForPattern(RNOPE_SWA, 6, 2), ElementsAre(S, N, S, N, S, N));
  const auto k = LayerKindsForPattern(RNOPE_SWA, 16, 8);
  ASSERT_EQ(k.size(), 16u);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(k[i], (i == 7 || i == 15) ? N : S) << "layer " << i;
}

TEST(LayerKindsForPattern, PurePatternsAndRnopeFull) {
  EXPECT_THAT(LayerKindsForPattern(ALL_ROPE_FULL, 3, 4), ElementsAre(R, R, R));
  EXPECT_THAT(LayerKindsForPattern(ALL_NOPE_FULL, 3, 4), ElementsAre(N, N, N));
  EXPECT_THAT(LayerKindsForPattern(RNOPE_FULL, 4, 2), ElementsAre(R, N, R, N));
  EXPECT_TRUE(LayerKindsForPattern(CUSTOM, 4, 4).empty());
}

TEST(LayerKindsString, GroupsLetters) {
  EXPECT_EQ(LayerKindsString(LayerKindsForPattern(RNOPE_SWA, 8, 4)), "SSSN SSSN");
  EXPECT_EQ(LayerKindsString({R, R, N}, 2), "RR N");
}

ModelConfig Small() {
  ModelConfig c;
  c.set_vocab_size(260);
  c.set_hidden_size(256);
  c.set_num_layers(8);
  c.set_num_heads(8);
  c.set_num_kv_heads(4);
  c.set_ffn_hidden_size(704);
  c.set_layer_pattern(RNOPE_SWA);
  c.set_pattern_group(4);
  c.set_sliding_window(64);
  return c;
}

TEST(ResolveModelConfig, FillsDerivedDefaults) {
  ModelConfig c = Small();
  c.clear_num_kv_heads();
  auto d = ResolveModelConfig(c);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->head_dim, 32);
  EXPECT_EQ(d->kv_heads, 8);
  EXPECT_EQ(d->rope_dim, 32);
  EXPECT_EQ(d->q_dim(), 256);
  EXPECT_EQ(d->kv_dim(), 256);
  EXPECT_FLOAT_EQ(d->init_std, std::sqrt(2.0f / (5.0f * 256)));
  EXPECT_FLOAT_EQ(d->out_init_std, 1.0f / 16.0f / 8.0f);
  EXPECT_EQ(d->window, 64);
  ASSERT_EQ(d->kinds.size(), 8u);
  EXPECT_TRUE(d->uses_rope(0));
  EXPECT_FALSE(d->uses_rope(3));
  EXPECT_EQ(d->layer_window(0), 64);
  EXPECT_EQ(d->layer_window(3), 0);  // full
  EXPECT_EQ(d->num_layers_of(NOPE_FULL), 2);
}

TEST(ResolveModelConfig, ExplicitValuesWin) {
  ModelConfig c = Small();
  c.set_head_dim(48);  // q_dim 384 != hidden is allowed
  c.set_rope_dim(16);
  c.set_init_std(0.02f);
  auto d = ResolveModelConfig(c);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->head_dim, 48);
  EXPECT_EQ(d->q_dim(), 384);
  EXPECT_EQ(d->rope_dim, 16);
  EXPECT_FLOAT_EQ(d->init_std, 0.02f);
  EXPECT_EQ(d->kv_group(), 2);
}

TEST(ResolveModelConfig, CustomKinds) {
  ModelConfig c = Small();
  c.set_num_layers(3);
  c.set_layer_pattern(CUSTOM);
  c.add_layer_kinds(NOPE_FULL);
  c.add_layer_kinds(ROPE_FULL);
  c.add_layer_kinds(ROPE_SWA);
  auto d = ResolveModelConfig(c);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_THAT(d->kinds, ElementsAre(N, R, S));
}

TEST(ResolveModelConfig, WindowNotNeededWithoutSwaLayers) {
  ModelConfig c = Small();
  c.set_layer_pattern(RNOPE_FULL);
  c.set_sliding_window(0);
  auto d = ResolveModelConfig(c);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_FALSE(d->any_sliding());
  EXPECT_EQ(d->layer_window(0), 0);
}

TEST(ResolveModelConfig, OddHeadDimIsFineWithoutRope) {
  ModelConfig c = Small();
  c.set_layer_pattern(ALL_NOPE_FULL);
  c.set_head_dim(33);
  EXPECT_TRUE(ResolveModelConfig(c).ok());
  c.set_layer_pattern(ALL_ROPE_FULL);
  EXPECT_EQ(ResolveModelConfig(c).status().message(), "model.head_dim: must be even when a layer uses RoPE (got 33)");
}

std::string ErrorOf(const ModelConfig& c) {
  auto d = ResolveModelConfig(c);
  return d.ok() ? "OK" : std::string(d.status().message());
}

TEST(ResolveModelConfig, ExactMessagesForTheCommonMistakes) {
  ModelConfig c = Small();
  c.set_num_heads(7);
  c.set_num_kv_heads(7);
  EXPECT_EQ(ErrorOf(c), "model.num_heads: 7 does not divide model.hidden_size 256");

  c = Small();
  c.set_sliding_window(0);
  EXPECT_EQ(ErrorOf(c), "model.sliding_window: must be > 0 when a layer uses ROPE_SWA (got 0)");
  c.set_sliding_window(-3);
  EXPECT_EQ(ErrorOf(c), "model.sliding_window: must be >= 0 (got -3)");

  c = Small();
  c.set_num_kv_heads(3);
  EXPECT_EQ(ErrorOf(c), "model.num_kv_heads: 3 does not divide model.num_heads 8");
}

struct BadCase {
  const char* what;
  void (*mutate)(ModelConfig*);
  const char* field;  // the message must start with this
};

TEST(ResolveModelConfig, EveryBadFieldIsNamed) {
  const BadCase cases[] = {
      {"vocab 0", [](ModelConfig* c) { c->set_vocab_size(0); }, "model.vocab_size: must be > 0"},
      {"hidden -1", [](ModelConfig* c) { c->set_hidden_size(-1); }, "model.hidden_size: must be > 0"},
      {"layers 0", [](ModelConfig* c) { c->set_num_layers(0); }, "model.num_layers: must be > 0"},
      {"ffn 0", [](ModelConfig* c) { c->set_ffn_hidden_size(0); }, "model.ffn_hidden_size: must be > 0"},
      {"heads 0", [](ModelConfig* c) { c->set_num_heads(0); }, "model.num_heads: must be > 0"},
      {"kv -1", [](ModelConfig* c) { c->set_num_kv_heads(-1); }, "model.num_kv_heads: must be >= 0"},
      {"kv > heads", [](ModelConfig* c) { c->set_num_kv_heads(16); }, "model.num_kv_heads: 16 does not divide"},
      {"eps 0", [](ModelConfig* c) { c->set_rms_norm_eps(0); }, "model.rms_norm_eps: must be > 0"},
      {"eps nan", [](ModelConfig* c) { c->set_rms_norm_eps(NAN); }, "model.rms_norm_eps: must be > 0"},
      {"theta 0", [](ModelConfig* c) { c->set_rope_theta(0); }, "model.rope_theta: must be > 0"},
      {"theta inf", [](ModelConfig* c) { c->set_rope_theta(INFINITY); }, "model.rope_theta: must be finite"},
      {"rope_dim odd", [](ModelConfig* c) { c->set_rope_dim(15); }, "model.rope_dim: must be even (got 15)"},
      {"rope_dim big", [](ModelConfig* c) { c->set_rope_dim(64); }, "model.rope_dim: 64 exceeds model.head_dim 32"},
      {"head_dim odd", [](ModelConfig* c) { c->set_head_dim(31); }, "model.head_dim: must be even"},
      {"init_std -1", [](ModelConfig* c) { c->set_init_std(-1); }, "model.init_std: must be >= 0"},
      {"group 1", [](ModelConfig* c) { c->set_pattern_group(1); }, "model.pattern_group: must be >= 2"},
      {"pattern unset", [](ModelConfig* c) { c->set_layer_pattern(LAYER_PATTERN_UNSPECIFIED); },
       "model.layer_pattern: must be one of"},
      {"kinds without CUSTOM", [](ModelConfig* c) { c->add_layer_kinds(ROPE_FULL); },
       "model.layer_kinds: must be empty unless model.layer_pattern is CUSTOM"},
      {"CUSTOM short", [](ModelConfig* c) {
         c->set_layer_pattern(CUSTOM);
         c->add_layer_kinds(ROPE_FULL);
       },
       "model.layer_kinds: has 1 entries but model.num_layers is 8"},
      {"CUSTOM unspecified kind", [](ModelConfig* c) {
         c->set_num_layers(2);
         c->set_layer_pattern(CUSTOM);
         c->add_layer_kinds(ROPE_FULL);
         c->add_layer_kinds(ATTENTION_KIND_UNSPECIFIED);
       },
       "model.layer_kinds[1]: must be ROPE_FULL, ROPE_SWA or NOPE_FULL"},
      {"max pos 0", [](ModelConfig* c) { c->set_max_position_embeddings(0); },
       "model.max_position_embeddings: must be > 0"},
  };
  ASSERT_TRUE(ResolveModelConfig(Small()).ok());
  for (const BadCase& bc : cases) {
    ModelConfig c = Small();
    bc.mutate(&c);
    const std::string msg = ErrorOf(c);
    EXPECT_THAT(msg, StartsWith(bc.field)) << bc.what;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << bc.what;
  }
}

// ---- Hugging Face config.json ----

void ExpectRoundTrip(const ModelConfig& c) {
  auto dims = ResolveModelConfig(c);
  ASSERT_TRUE(dims.ok()) << dims.status();
  const nlohmann::json j = HfConfigJson(*dims, c, 256, 257);
  // Through text, as it would be on disk.
  const nlohmann::json reread = nlohmann::json::parse(j.dump(2));
  auto back = ModelConfigFromHfJson(reread);
  ASSERT_TRUE(back.ok()) << back.status();
  auto dims2 = ResolveModelConfig(*back);
  ASSERT_TRUE(dims2.ok()) << dims2.status();
  EXPECT_TRUE(*dims == *dims2) << c.name();
  EXPECT_EQ(back->layer_pattern(), c.layer_pattern()) << c.name();
  if (c.layer_pattern() == RNOPE_SWA || c.layer_pattern() == RNOPE_FULL) {
    EXPECT_EQ(back->pattern_group(), c.pattern_group());
  }
}

// The label follows the layers: only what the labelled class computes.
TEST(HfConfig, ArchitectureFollowsTheLayerKinds) {
  auto label = [](ModelConfig c) {
    auto d = ResolveModelConfig(c);
    EXPECT_TRUE(d.ok()) << d.status();
    return HfConfigJson(*d, c, 1, 2)["architectures"][0].get<std::string>();
  };
  ModelConfig c = Small();
  EXPECT_EQ(label(c), "SmolLM3ForCausalLM");
  c.set_layer_pattern(ALL_ROPE_FULL);
  EXPECT_EQ(label(c), "LlamaForCausalLM");
  c.set_layer_pattern(ALL_NOPE_FULL);
  EXPECT_EQ(label(c), "SmolLM3ForCausalLM");
  c.set_layer_pattern(RNOPE_FULL);
  EXPECT_EQ(label(c), "SmolLM3ForCausalLM");
  c.set_layer_pattern(CUSTOM);
  c.clear_layer_kinds();
  for (int l = 0; l < c.num_layers(); ++l) c.add_layer_kinds(ROPE_SWA);
  EXPECT_EQ(label(c), "MistralForCausalLM");
  c = Small();
  c.set_qk_norm(true);
  EXPECT_EQ(label(c), "LongctxForCausalLM");  // no stock class has QK-norm here: refused by transformers
  c = Small();
  c.set_roper(true);
  EXPECT_EQ(label(c), "LongctxForCausalLM");
}

TEST(HfConfig, WritesLlamaKeysAndLayerKinds) {
  ModelConfig c = Small();
  c.set_name("small");
  auto d = ResolveModelConfig(c);
  ASSERT_TRUE(d.ok());
  const nlohmann::json j = HfConfigJson(*d, c, 256, -1);
  // RNoPE-SWA is labelled SmolLM3 (Llama would ignore the NoPE and sliding layers).
  EXPECT_EQ(j["architectures"], nlohmann::json::array({"SmolLM3ForCausalLM"}));
  EXPECT_EQ(j["model_type"], "smollm3");
  EXPECT_EQ(j["use_sliding_window"], true);
  EXPECT_EQ(j["hidden_size"], 256);
  EXPECT_EQ(j["intermediate_size"], 704);
  EXPECT_EQ(j["num_hidden_layers"], 8);
  EXPECT_EQ(j["num_attention_heads"], 8);
  EXPECT_EQ(j["num_key_value_heads"], 4);
  EXPECT_EQ(j["head_dim"], 32);
  EXPECT_EQ(j["vocab_size"], 260);
  EXPECT_EQ(j["rms_norm_eps"].dump(), "1e-05");  // shortest float form
  EXPECT_EQ(j["rope_theta"], 10000.0);
  EXPECT_EQ(j["tie_word_embeddings"], false);
  EXPECT_EQ(j["hidden_act"], "silu");
  EXPECT_EQ(j["attention_bias"], false);
  EXPECT_EQ(j["mlp_bias"], false);
  EXPECT_EQ(j["torch_dtype"], "float32");
  EXPECT_EQ(j["bos_token_id"], 256);
  EXPECT_TRUE(j["eos_token_id"].is_null());
  EXPECT_EQ(j["sliding_window"], 64);
  ASSERT_EQ(j["layer_types"].size(), 8u);
  EXPECT_EQ(j["layer_types"][0], "sliding_attention");
  EXPECT_EQ(j["layer_types"][3], "full_attention");
  EXPECT_EQ(j["no_rope_layers"], nlohmann::json::array({1, 1, 1, 0, 1, 1, 1, 0}));
  EXPECT_EQ(j["longctx_attention_kinds"][3], "NOPE_FULL");
  EXPECT_EQ(j["use_qk_norm"], false);
  EXPECT_FALSE(j.contains("partial_rotary_factor"));

  c.set_layer_pattern(ALL_ROPE_FULL);
  d = ResolveModelConfig(c);
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(HfConfigJson(*d, c, 1, 2)["sliding_window"].is_null());
}

TEST(HfConfig, RoundTripsEveryPattern) {
  ModelConfig c = Small();
  c.set_name("rnope-swa");
  ExpectRoundTrip(c);
  c.set_pattern_group(2);
  ExpectRoundTrip(c);
  c.set_pattern_group(8);  // 8 layers, one group of 8: only layer 7 is NoPE
  ExpectRoundTrip(c);
  c.set_pattern_group(16);  // longer than the model: all windowed, recorded pattern kept
  ExpectRoundTrip(c);
  c.set_pattern_group(4);
  c.set_layer_pattern(RNOPE_FULL);
  ExpectRoundTrip(c);
  c.set_layer_pattern(ALL_NOPE_FULL);
  ExpectRoundTrip(c);
  c.set_layer_pattern(ALL_ROPE_FULL);
  c.set_tie_embeddings(true);
  c.set_qk_norm(true);
  c.set_rope_dim(16);
  c.set_rope_theta(2e6f);
  c.set_rms_norm_eps(1e-6f);
  c.set_max_position_embeddings(65536);
  ExpectRoundTrip(c);
  c.set_layer_pattern(CUSTOM);
  c.set_num_layers(3);
  c.add_layer_kinds(NOPE_FULL);
  c.add_layer_kinds(ROPE_SWA);
  c.add_layer_kinds(ROPE_FULL);
  ExpectRoundTrip(c);
}

TEST(HfConfig, RoundTripsEveryPreset) {
  const std::filesystem::path dir = std::filesystem::path(LONGCTX_SOURCE_DIR) / "configs";
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() != ".textproto") continue;
    auto cfg = LoadTrainConfig(e.path().string(), {});
    ASSERT_TRUE(cfg.ok()) << cfg.status();
    SCOPED_TRACE(e.path().string());
    ExpectRoundTrip(cfg->model());
    ++n;
  }
  EXPECT_GE(n, 8);
}

TEST(HfConfig, ImportsSmolLm3StyleWithoutOurKeys) {
  // No longctx_* keys: the kinds come from no_rope_layers, the pattern is detected.
  nlohmann::json j = {{"model_type", "smollm3"},
                      {"vocab_size", 1000},
                      {"hidden_size", 64},
                      {"intermediate_size", 128},
                      {"num_hidden_layers", 8},
                      {"num_attention_heads", 4},
                      {"num_key_value_heads", 2},
                      {"rms_norm_eps", 1e-6},
                      {"no_rope_layers", {1, 1, 1, 0, 1, 1, 1, 0}}};
  auto c = ModelConfigFromHfJson(j);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->layer_pattern(), RNOPE_FULL);
  EXPECT_EQ(c->pattern_group(), 4);
  EXPECT_EQ(c->head_dim(), 16);
  EXPECT_EQ(c->num_kv_heads(), 2);
  EXPECT_FLOAT_EQ(c->rms_norm_eps(), 1e-6f);

  // With sliding layers where RoPE is used: RNOPE_SWA.
  j["layer_types"] = {"sliding_attention", "full_attention", "sliding_attention", "full_attention",
                      "sliding_attention", "full_attention", "sliding_attention", "full_attention"};
  j["no_rope_layers"] = {1, 0, 1, 0, 1, 0, 1, 0};
  j["sliding_window"] = 32;
  c = ModelConfigFromHfJson(j);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->layer_pattern(), RNOPE_SWA);
  EXPECT_EQ(c->pattern_group(), 2);
  EXPECT_EQ(c->sliding_window(), 32);
}

TEST(HfConfig, ImportErrorsNameTheKey) {
  nlohmann::json j = {{"vocab_size", 100}, {"hidden_size", 64}, {"intermediate_size", 128},
                      {"num_hidden_layers", 2}};
  auto c = ModelConfigFromHfJson(j);
  EXPECT_EQ(c.status().message(), "config.json: num_attention_heads: missing");
  j["num_attention_heads"] = "four";
  EXPECT_THAT(std::string(ModelConfigFromHfJson(j).status().message()),
              StartsWith("config.json: num_attention_heads: must be an integer"));
  j["num_attention_heads"] = 4;
  ASSERT_TRUE(ModelConfigFromHfJson(j).ok());
  j["num_key_value_heads"] = 3;
  EXPECT_EQ(ModelConfigFromHfJson(j).status().message(),
            "config.json: model.num_kv_heads: 3 does not divide model.num_heads 4");
  j["num_key_value_heads"] = 2;
  j["mlp_bias"] = true;
  EXPECT_THAT(std::string(ModelConfigFromHfJson(j).status().message()), HasSubstr("mlp_bias"));
  j["mlp_bias"] = false;
  j["rope_scaling"] = {{"rope_type", "llama3"}};
  EXPECT_THAT(std::string(ModelConfigFromHfJson(j).status().message()), HasSubstr("rope_scaling"));
  j["rope_scaling"] = nullptr;
  j["layer_types"] = {"sliding_attention", "full_attention"};  // sliding but no window
  EXPECT_EQ(ModelConfigFromHfJson(j).status().message(), "config.json: sliding_window: missing");
}

}  // namespace
}  // namespace longctx
