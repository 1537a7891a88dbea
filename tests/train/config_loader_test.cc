// Why: the loader is the user's first contact with longctx. A typo must come
// back as one line pointing at file:line:col, every override form the docs
// promise (nested, enum, repeated) must work, and every shipped config in
// configs/ must load and validate — a broken preset is caught here, not on a GPU.
#include "train/config_loader.h"

#include <filesystem>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/config.h"

namespace longctx {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string WriteTemp(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

std::string Message(const absl::Status& s) { return std::string(s.message()); }

TEST(LoadTrainConfig, UnknownFieldIsOneLineWithFileLineColumn) {
  const std::string path = WriteTemp("typo.textproto",
                                     "# a comment\n"
                                     "model {\n"
                                     "  hidden_size: 64\n"
                                     "  hiden_size: 128\n"
                                     "}\n");
  auto c = LoadTrainConfig(path, {});
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string msg = Message(c.status());
  EXPECT_THAT(msg, StartsWith(path + ":4:3: "));
  EXPECT_THAT(msg, HasSubstr("hiden_size"));
  EXPECT_EQ(msg.find('\n'), std::string::npos);
}

TEST(LoadTrainConfig, BadEnumValueInFileNamesIt) {
  const std::string path = WriteTemp("enum.textproto", "model { layer_pattern: RNOPE_SWAP }\n");
  auto c = LoadTrainConfig(path, {});
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(Message(c.status()), StartsWith(path + ":1:"));
  EXPECT_THAT(Message(c.status()), HasSubstr("RNOPE_SWAP"));
}

TEST(LoadTrainConfig, MissingFileSaysSo) {
  auto c = LoadTrainConfig("/nonexistent/dir/x.textproto", {});
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Message(c.status()), HasSubstr("/nonexistent/dir/x.textproto"));
  EXPECT_THAT(Message(c.status()), HasSubstr("No such file"));
}

TEST(LoadTrainConfig, OverridesNestedEnumRepeatedAndTopLevel) {
  const std::string path = std::string(LONGCTX_SOURCE_DIR) + "/configs/tiny-test.textproto";
  auto c = LoadTrainConfig(path, {"model.hidden_size=64", "--optim.lr=1e-3", "steps=50", "data.path=/x",
                                  "model.layer_pattern=custom", "model.num_layers=3",
                                  "model.layer_kinds=ROPE_SWA, NOPE_FULL,ROPE_FULL", "data.document_mask=false",
                                  "seed=18446744073709551615"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->model().hidden_size(), 64);
  EXPECT_FLOAT_EQ(c->optim().lr(), 1e-3f);
  EXPECT_EQ(c->steps(), 50);
  EXPECT_EQ(c->data().path(), "/x");
  EXPECT_EQ(c->model().layer_pattern(), CUSTOM);
  ASSERT_EQ(c->model().layer_kinds_size(), 3);
  EXPECT_EQ(c->model().layer_kinds(0), ROPE_SWA);
  EXPECT_EQ(c->model().layer_kinds(1), NOPE_FULL);
  EXPECT_EQ(c->model().layer_kinds(2), ROPE_FULL);
  EXPECT_FALSE(c->data().document_mask());
  EXPECT_EQ(c->seed(), 18446744073709551615ull);
  // Untouched fields keep the file's values.
  EXPECT_EQ(c->data().seq_len(), 32);
}

TEST(ApplyOverride, RepeatedIsReplacedAndCanBeCleared) {
  ModelConfig m;
  ASSERT_TRUE(ApplyOverride(&m, "layer_kinds=ROPE_FULL,ROPE_FULL").ok());
  ASSERT_TRUE(ApplyOverride(&m, "layer_kinds=NOPE_FULL").ok());
  ASSERT_EQ(m.layer_kinds_size(), 1);
  EXPECT_EQ(m.layer_kinds(0), NOPE_FULL);
  // A bad element leaves the field as it was.
  const absl::Status s = ApplyOverride(&m, "layer_kinds=ROPE_FULL,WRONG");
  EXPECT_THAT(Message(s), StartsWith("--layer_kinds: bad value \"WRONG\""));
  ASSERT_EQ(m.layer_kinds_size(), 1);
  ASSERT_TRUE(ApplyOverride(&m, "layer_kinds=").ok());
  EXPECT_EQ(m.layer_kinds_size(), 0);
  // Enums by number too.
  ASSERT_TRUE(ApplyOverride(&m, "layer_pattern=3").ok());
  EXPECT_EQ(m.layer_pattern(), RNOPE_SWA);
}

TEST(ApplyOverride, UnknownPathsAndBadValuesNameTheField) {
  TrainConfig c;
  EXPECT_EQ(Message(ApplyOverride(&c, "--model.foo=1")), "--model.foo: no such field in longctx.ModelConfig");
  EXPECT_EQ(Message(ApplyOverride(&c, "stepz=1")), "--stepz: no such field in longctx.TrainConfig");
  EXPECT_EQ(Message(ApplyOverride(&c, "modle.hidden_size=1")),
            "--modle.hidden_size: no such field in longctx.TrainConfig");
  EXPECT_THAT(Message(ApplyOverride(&c, "steps.x=1")), StartsWith("--steps.x: longctx.TrainConfig.steps is not"));

  std::string msg = Message(ApplyOverride(&c, "model.hidden_size=abc"));
  EXPECT_THAT(msg, StartsWith("--model.hidden_size: bad value \"abc\""));
  EXPECT_THAT(msg, HasSubstr("int32"));
  EXPECT_THAT(Message(ApplyOverride(&c, "model.hidden_size=99999999999")), HasSubstr("99999999999"));
  EXPECT_THAT(Message(ApplyOverride(&c, "optim.lr=fast")), StartsWith("--optim.lr: bad value \"fast\""));
  EXPECT_THAT(Message(ApplyOverride(&c, "optim.lr=nan")), StartsWith("--optim.lr: bad value \"nan\""));
  EXPECT_THAT(Message(ApplyOverride(&c, "seed=-1")), StartsWith("--seed: bad value \"-1\""));
  EXPECT_THAT(Message(ApplyOverride(&c, "data.document_mask=maybe")),
              StartsWith("--data.document_mask: bad value \"maybe\""));
  msg = Message(ApplyOverride(&c, "model.layer_pattern=RNOPE"));
  EXPECT_THAT(msg, StartsWith("--model.layer_pattern: bad value \"RNOPE\""));
  EXPECT_THAT(msg, HasSubstr("RNOPE_SWA"));  // lists the choices
  EXPECT_THAT(Message(ApplyOverride(&c, "model=1")), StartsWith("--model: longctx.TrainConfig.model is a message"));
  EXPECT_THAT(Message(ApplyOverride(&c, "model.hidden_size")), StartsWith("--model.hidden_size: expected"));
  // Nothing above changed the message.
  EXPECT_FALSE(c.has_model());
  EXPECT_FALSE(c.has_seed());
}

TEST(LoadTrainConfig, ValidationErrorsNameTheField) {
  const std::string path = std::string(LONGCTX_SOURCE_DIR) + "/configs/tiny-test.textproto";
  struct Case {
    const char* override_;
    const char* message;
  } cases[] = {
      {"data.seq_len=0", "data.seq_len: must be > 0 (got 0)"},
      {"data.batch_size=-2", "data.batch_size: must be > 0 (got -2)"},
      {"steps=0", "steps: must be > 0 (got 0)"},
      {"grad_accum=0", "grad_accum: must be >= 1 (got 0)"},
      {"optim.lr=-1", "optim.lr: must be >= 0 (got -1)"},
      {"optim.warmup_steps=-1", "optim.warmup_steps: must be >= 0 (got -1)"},
      {"optim.beta1=1", "optim.beta1: must be in [0, 1) (got 1)"},
      {"optim.beta2=-0.5", "optim.beta2: must be in [0, 1) (got -0.5)"},
      {"optim.grad_clip=-1", "optim.grad_clip: must be >= 0 (got -1)"},
      {"data.join_fraction=1.5", "data.join_fraction: must be in [0, 1] (got 1.5)"},
      {"data.join_fraction=-0.25", "data.join_fraction: must be in [0, 1] (got -0.25)"},
      {"log_every=0", "log_every: must be > 0 (got 0)"},
      {"ckpt_every=-1", "ckpt_every: must be >= 0 (got -1)"},
      {"backend=tpu", "backend: must be \"cpu\" or \"cuda\" (got \"tpu\")"},
      {"model.num_kv_heads=3", "model.num_kv_heads: 3 does not divide model.num_heads 4"},
      {"model.sliding_window=0", "model.sliding_window: must be > 0 when a layer uses ROPE_SWA (got 0)"},
  };
  for (const Case& tc : cases) {
    auto c = LoadTrainConfig(path, {tc.override_});
    ASSERT_FALSE(c.ok()) << tc.override_;
    EXPECT_EQ(Message(c.status()), tc.message) << tc.override_;
  }
  auto unmasked_join = LoadTrainConfig(path, {"data.join_fraction=0.5", "data.document_mask=false"});
  ASSERT_FALSE(unmasked_join.ok());
  EXPECT_EQ(Message(unmasked_join.status()),
            "data.join_fraction: 0.5 needs data.document_mask: true (without masking every row is already one "
            "segment)");
  // Edge values that are allowed.
  EXPECT_TRUE(LoadTrainConfig(path, {"optim.lr=0", "optim.min_lr=0", "optim.beta1=0", "ckpt_every=0",
                                     "optim.grad_clip=0", "backend=cuda", "data.join_fraction=1"})
                  .ok());
}

// Context parallelism cuts each row into 2 C (balanced: 8 C) equal chunks.
TEST(LoadTrainConfig, ContextParallelNeedsRowsCutIntoEqualChunks) {
  const std::string path = std::string(LONGCTX_SOURCE_DIR) + "/configs/tiny-test.textproto";  // seq_len 32
  auto c = LoadTrainConfig(path, {"context_parallel=0"});
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(Message(c.status()), "context_parallel: must be >= 1 (got 0)");
  c = LoadTrainConfig(path, {"context_parallel=3", "context_parallel_balanced=false"});
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(Message(c.status()),
            "data.seq_len: 32 tokens cannot be cut into 2 x context_parallel = 6 equal chunks; use a multiple of 6 "
            "or another context_parallel");
  c = LoadTrainConfig(path, {"context_parallel=8"});  // balanced, the default: 8 C chunks
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(Message(c.status()), StartsWith("data.seq_len: 32 tokens cannot be cut into 8 x context_parallel = 64"));
  EXPECT_TRUE(LoadTrainConfig(path, {"context_parallel=16", "context_parallel_balanced=false"}).ok());
  EXPECT_TRUE(LoadTrainConfig(path, {"context_parallel=4"}).ok());
}

// Accepted silently before: rows longer than the positions the exported
// config.json records, and a minimum learning rate above the peak.
TEST(LoadTrainConfig, RunLimitsNameBothFieldsAndValues) {
  const std::string path = std::string(LONGCTX_SOURCE_DIR) + "/configs/tiny-test.textproto";  // seq_len 32, lr 3e-3
  auto c = LoadTrainConfig(path, {"model.max_position_embeddings=16"});
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(Message(c.status()), StartsWith("model.max_position_embeddings: 16 is smaller than data.seq_len 32"));
  c = LoadTrainConfig(path, {"data.seq_len=128"});
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(Message(c.status()), StartsWith("model.max_position_embeddings: 32 is smaller than data.seq_len 128"));
  c = LoadTrainConfig(path, {"optim.min_lr=1e-2"});
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(Message(c.status()), StartsWith("optim.min_lr: 0.01 is above optim.lr 0.003"));
  // The edges are allowed.
  EXPECT_TRUE(LoadTrainConfig(path, {"data.seq_len=64", "model.max_position_embeddings=64", "optim.min_lr=3e-3"}).ok());
  // A config a checkpoint saved is read without them, so old runs stay readable.
  const std::string saved = WriteTemp("saved.textproto", "model { max_position_embeddings: 16 }\n"
                                                         "data { seq_len: 32 }\noptim { lr: 1e-3 min_lr: 1e-2 }\n");
  EXPECT_TRUE(LoadSavedTrainConfig(saved).ok());
  EXPECT_FALSE(LoadTrainConfig(saved, {}).ok());
}

TEST(LoadTrainConfig, EveryShippedConfigLoadsAndValidates) {
  const std::filesystem::path dir = std::filesystem::path(LONGCTX_SOURCE_DIR) / "configs";
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() != ".textproto") continue;
    auto c = LoadTrainConfig(e.path().string(), {});
    EXPECT_TRUE(c.ok()) << e.path() << ": " << c.status();
    if (!c.ok()) continue;
    ++n;
    // Each is a full run description: all three sections written out.
    EXPECT_TRUE(c->has_model() && c->has_data() && c->has_optim()) << e.path();
    // A stage that starts from another run's checkpoint (init_from: SFT,
    // raised theta) keeps that model's name; every other config is named
    // after its file.
    if (c->init_from().empty()) {
      EXPECT_EQ(c->model().name() + ".textproto", e.path().filename().string()) << "name matches the file";
    }
    // A header comment says where the numbers come from.
    std::ifstream in(e.path());
    std::string first;
    std::getline(in, first);
    EXPECT_THAT(first, StartsWith("# ")) << e.path();
  }
  EXPECT_GE(n, 8);
}

TEST(LoadTrainConfig, PresetsUseTheTinyLlamaOptimizer) {
  for (const char* name : {"tinyllama-1.1b", "tinyllama-1.1b-rnope-swa", "tinyllama-1.3b",
                           "tinyllama-1.3b-rnope-swa", "rnope-swa-8b", "rope-8b"}) {
    auto c = LoadTrainConfig(std::string(LONGCTX_SOURCE_DIR) + "/configs/" + name + ".textproto", {});
    ASSERT_TRUE(c.ok()) << name << ": " << c.status();
    const OptimConfig& o = c->optim();
    EXPECT_FLOAT_EQ(o.lr(), 4e-4f) << name;
    EXPECT_FLOAT_EQ(o.min_lr(), 4e-5f) << name;
    EXPECT_EQ(o.warmup_steps(), 2000) << name;
    EXPECT_FLOAT_EQ(o.beta1(), 0.9f) << name;
    EXPECT_FLOAT_EQ(o.beta2(), 0.95f) << name;
    EXPECT_FLOAT_EQ(o.weight_decay(), 0.1f) << name;
    EXPECT_FLOAT_EQ(o.grad_clip(), 1.0f) << name;
  }
  auto demo = LoadTrainConfig(std::string(LONGCTX_SOURCE_DIR) + "/configs/demo.textproto", {});
  ASSERT_TRUE(demo.ok());
  auto dims = ResolveModelConfig(demo->model());
  ASSERT_TRUE(dims.ok());
  EXPECT_EQ(LayerKindsString(dims->kinds), "SSSN SSSN");
  EXPECT_EQ(dims->window, 64);
}

TEST(ToTextProto, RoundTripsAndCanWriteDefaults) {
  auto c = LoadTrainConfig(std::string(LONGCTX_SOURCE_DIR) + "/configs/demo.textproto", {"steps=7"});
  ASSERT_TRUE(c.ok()) << c.status();
  const std::string text = ToTextProto(*c);
  auto back = ParseTrainConfigText(text, "roundtrip");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->SerializeAsString(), c->SerializeAsString());
  EXPECT_THAT(text, HasSubstr("steps: 7"));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("keep_checkpoints")));  // unset, default

  const std::string full = ToTextProto(*c, /*include_defaults=*/true);
  EXPECT_THAT(full, HasSubstr("keep_checkpoints: 2"));
  EXPECT_THAT(full, HasSubstr("shuffle_seed: 1234"));
  auto full_back = ParseTrainConfigText(full, "full");
  ASSERT_TRUE(full_back.ok());
  // Same values everywhere, now explicit.
  EXPECT_EQ(full_back->keep_checkpoints(), c->keep_checkpoints());
  EXPECT_EQ(full_back->steps(), 7);
  EXPECT_TRUE(full_back->has_keep_checkpoints());
}

}  // namespace
}  // namespace longctx
