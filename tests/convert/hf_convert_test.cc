// Why: `longctx convert` is only worth having if the other side computes the
// same model. These tests check (1) longctx -> HF -> longctx in fp32 is
// bitwise for every tensor and gives back the same ModelDims, for every
// architecture export picks; (2) bf16 export is F32ToBF16 (round to nearest
// even) of every weight and its loss stays within a stated tolerance of
// fp32's; (3) an export read the way transformers reads it (config.json +
// safetensors only) by an independent PyTorch implementation
// (bench/hf_reference.py) gives longctx's loss to 1e-5 — SmolLM3 (RNoPE-SWA),
// Llama (all RoPE), Mistral (all SWA); (4) a checkpoint that script writes
// from random weights (sharded, bf16, with an index) imports and gives the
// same loss in longctx and in the script; (5) the Meta q/k layout both ways;
// (6) each error names the field or tensor. Without python3-torch the PyTorch
// checks fail naming the package (scripts/setup.sh installs it): never skipped.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <tuple>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "data/make_tokenizer.h"
#include "gtest/gtest.h"
#include "data/packer.h"
#include "data/tokenizer.h"
#include "kernels/backend.h"
#include "kernels/backend_registry.h"
#include "model/config.h"
#include "model/hf_config.h"
#include "model/param_layout.h"
#include "model/transformer.h"
#include "tests/support/test_util.h"
#include "train/checkpoint/checkpoint.h"
#include "train/checkpoint/safetensors.h"
#include "train/config_loader.h"
#include "train/convert/hf_convert.h"
#include "train/device_batch.h"

namespace longctx {
namespace {

using ::longctx::testing::LongctxBinary;
using ::longctx::testing::ReadFile;
using ::longctx::testing::RunCommand;
using ::longctx::testing::SourcePath;
using ::longctx::testing::TempDir;
using ::longctx::testing::WriteFile;
using json = nlohmann::json;

constexpr char kPython[] = "/usr/bin/python3";

#define REQUIRE_TORCH()                                                                                  \
  if (RunCommand(absl::StrCat(kPython, " -c 'import torch'")).exit_code != 0)                            \
  GTEST_FAIL() << kPython << " cannot import torch: install Debian's python3-torch (bash scripts/setup.sh)"

// A tiny-test model (hidden 32, 4 layers, GQA 4/2, window 8) with random
// weights (norms away from 1), saved as a longctx checkpoint in `dir`.
TrainConfig WriteCheckpoint(const std::string& dir, const std::vector<std::string>& overrides, uint64_t seed = 7) {
  absl::StatusOr<TrainConfig> c = LoadTrainConfig(SourcePath("configs/tiny-test.textproto"), overrides);
  EXPECT_TRUE(c.ok()) << c.status();
  absl::StatusOr<ModelDims> dims = ResolveModelConfig(c->model());
  EXPECT_TRUE(dims.ok()) << dims.status();
  absl::StatusOr<std::unique_ptr<Backend>> be = MakeBackend("cpu");
  Transformer model(*dims, be->get(), DType::kF32);
  model.InitParams(seed);
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::normal_distribution<float> noise(0.f, 0.05f);
  std::vector<SafetensorsEntry> entries;
  for (int b = 0; b < model.layout().num_buffers(); ++b) {
    float* p = model.params().buffer(b).as<float>();
    for (int64_t i = 0; i < model.layout().buffer_size(b); ++i) p[i] += noise(rng);
  }
  for (const ParamSlice& sl : model.layout().slices()) {
    SafetensorsEntry e;
    e.name = sl.name;
    e.shape = sl.shape;
    e.data = model.params().buffer(sl.buffer).as<float>() + sl.offset;
    entries.push_back(e);
  }
  std::filesystem::create_directories(dir);
  EXPECT_TRUE(WriteSafetensors(dir + "/model.safetensors", entries, {}).ok());
  WriteFile(dir + "/longctx_config.textproto", ToTextProto(*c, true));
  WriteFile(dir + "/config.json", HfConfigJson(*dims, c->model(), 1, 2).dump(2));
  return *c;
}

// B = 2 rows of T = 20 random tokens (T > window 8), one causal segment each.
struct Tokens {
  PackedBatch batch;
  std::string json_path;
};

Tokens MakeTokens(const std::string& dir, int vocab, uint32_t seed) {
  Tokens t;
  const int B = 2, T = 20;
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> id(0, vocab - 1);
  json ids = json::array(), targets = json::array();
  t.batch.batch_size = B;
  t.batch.seq_len = T;
  for (int r = 0; r < B; ++r) {
    json ir = json::array(), tr = json::array();
    for (int p = 0; p < T; ++p) {
      t.batch.inputs.push_back(id(rng));
      t.batch.targets.push_back(id(rng));
      t.batch.positions.push_back(p);
      ir.push_back(t.batch.inputs.back());
      tr.push_back(t.batch.targets.back());
    }
    ids.push_back(ir);
    targets.push_back(tr);
    t.batch.cu_seqlens.push_back(r * T);
  }
  t.batch.cu_seqlens.push_back(B * T);
  t.batch.max_seqlen = T;
  t.batch.num_target_tokens = B * T;
  t.json_path = dir + "/tokens.json";
  WriteFile(t.json_path, json{{"ids", ids}, {"targets", targets}}.dump());
  return t;
}

// longctx's mean loss of a longctx checkpoint on the batch (F32 weights, CPU).
double LongctxLoss(const std::string& checkpoint, const PackedBatch& batch) {
  absl::StatusOr<TrainConfig> c = LoadCheckpointConfig(checkpoint);
  EXPECT_TRUE(c.ok()) << c.status();
  absl::StatusOr<ModelDims> dims = ResolveModelConfig(c->model());
  EXPECT_TRUE(dims.ok()) << dims.status();
  absl::StatusOr<std::unique_ptr<Backend>> be = MakeBackend("cpu");
  Transformer model(*dims, be->get(), DType::kF32);
  absl::Status st = LoadModelWeights(checkpoint, &model);
  EXPECT_TRUE(st.ok()) << st;
  DeviceBatch db(be->get());
  const double n = static_cast<double>(batch.num_target_tokens);
  return model.ForwardBackward(db.Upload(batch), 1.0 / n, /*backward=*/false) / n;
}

double ReferenceLoss(const std::string& hf_dir, const std::string& tokens_json) {
  const auto r = RunCommand(absl::StrCat(kPython, " ", SourcePath("bench/hf_reference.py"), " loss --model ", hf_dir,
                                         " --tokens ", tokens_json));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  const size_t brace = r.output.rfind('{');
  if (brace == std::string::npos) return NAN;
  const json j = json::parse(r.output.substr(brace), nullptr, false);
  return j.is_object() ? j.value("loss", NAN) : NAN;
}

absl::StatusOr<HfExportResult> Export(const std::string& ckpt, const std::string& out, DType dtype = DType::kF32,
                                      uint64_t shard = 5'000'000'000, QkLayout layout = QkLayout::kHf) {
  HfExportOptions o;
  o.checkpoint = ckpt;
  o.out = out;
  o.dtype = dtype;
  o.max_shard_bytes = shard;
  o.layout = layout;
  return ExportToHf(o);
}

absl::StatusOr<HfImportResult> Import(const std::string& hf, const std::string& out, QkLayout layout = QkLayout::kHf) {
  HfImportOptions o;
  o.hf = hf;
  o.out = out;
  o.layout = layout;
  return ImportFromHf(o);
}

// Every tensor of a's model.safetensors equals b's, byte for byte.
void ExpectSameWeights(const std::string& a, const std::string& b) {
  auto ra = SafetensorsReader::Open(a + "/model.safetensors");
  auto rb = SafetensorsReader::Open(b + "/model.safetensors");
  ASSERT_TRUE(ra.ok() && rb.ok());
  ASSERT_EQ(ra->names(), rb->names());
  for (const std::string& n : ra->names()) {
    EXPECT_EQ(rb->Info(n)->dtype_name, "F32") << n;
    EXPECT_TRUE(*ra->ReadRaw(n) == *rb->ReadRaw(n)) << n << " differs after the round trip";
  }
}

struct Case {
  const char* label;
  std::vector<std::string> overrides;
  const char* architecture;
};

const std::vector<Case>& Cases() {
  static const std::vector<Case> cases = {
      {"rnope_swa", {}, "SmolLM3ForCausalLM"},
      {"rnope_full_tied", {"model.layer_pattern=RNOPE_FULL", "model.tie_embeddings=true"}, "SmolLM3ForCausalLM"},
      {"all_nope", {"model.layer_pattern=ALL_NOPE_FULL"}, "SmolLM3ForCausalLM"},
      {"all_rope", {"model.layer_pattern=ALL_ROPE_FULL"}, "LlamaForCausalLM"},
      {"all_swa",
       {"model.layer_pattern=CUSTOM", "model.layer_kinds=ROPE_SWA,ROPE_SWA,ROPE_SWA,ROPE_SWA"},
       "MistralForCausalLM"},
  };
  return cases;
}

TEST(HfConvertTest, RoundTripFp32IsBitwiseForEveryArchitecture) {
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.label);
    TempDir tmp;
    const TrainConfig config = WriteCheckpoint(tmp / "ckpt", c.overrides);
    auto ex = Export(tmp / "ckpt", tmp / "hf");
    ASSERT_TRUE(ex.ok()) << ex.status();
    EXPECT_EQ(ex->architecture, c.architecture);
    const json cfg = json::parse(ReadFile(tmp / "hf/config.json"));
    EXPECT_EQ(cfg["architectures"][0], c.architecture);
    EXPECT_EQ(cfg["torch_dtype"], "float32");
    auto im = Import(tmp / "hf", tmp / "back");
    ASSERT_TRUE(im.ok()) << im.status();
    EXPECT_EQ(im->architecture, c.architecture);
    ExpectSameWeights(tmp / "ckpt", tmp / "back");
    auto back = LoadCheckpointConfig(tmp / "back");
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*ResolveModelConfig(back->model()), *ResolveModelConfig(config.model()));
  }
}

TEST(HfConvertTest, SmolLM3ConfigFields) {
  TempDir tmp;
  WriteCheckpoint(tmp / "ckpt", {});
  ASSERT_TRUE(Export(tmp / "ckpt", tmp / "hf").ok());
  const json cfg = json::parse(ReadFile(tmp / "hf/config.json"));
  EXPECT_EQ(cfg["model_type"], "smollm3");
  EXPECT_EQ(cfg["no_rope_layers"], json({1, 1, 1, 0}));  // 1 = RoPE, layer 3 NoPE
  EXPECT_EQ(cfg["layer_types"],
            json({"sliding_attention", "sliding_attention", "sliding_attention", "full_attention"}));
  EXPECT_EQ(cfg["use_sliding_window"], true);
  EXPECT_EQ(cfg["sliding_window"], 8);
  EXPECT_FALSE(cfg.contains("longctx_attention_kinds"));
  const json gen = json::parse(ReadFile(tmp / "hf/generation_config.json"));
  EXPECT_EQ(gen["bos_token_id"], 1);
  EXPECT_EQ(gen["eos_token_id"], 2);
}

TEST(HfConvertTest, ExportMatchesIndependentPyTorchReading) {
  REQUIRE_TORCH();
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.label);
    TempDir tmp;
    WriteCheckpoint(tmp / "ckpt", c.overrides);
    ASSERT_TRUE(Export(tmp / "ckpt", tmp / "hf").ok());
    const Tokens t = MakeTokens(tmp.path(), 260, 3);
    const double ours = LongctxLoss(tmp / "ckpt", t.batch), ref = ReferenceLoss(tmp / "hf", t.json_path);
    std::printf("%-16s %-20s longctx %.8f reference %.8f diff %.2e\n", c.label, c.architecture, ours, ref,
                std::fabs(ours - ref));
    EXPECT_GT(ours, 1.0);
    EXPECT_NEAR(ours, ref, 1e-5);
  }
}

TEST(HfConvertTest, Bf16ExportRoundsToNearestEvenAndKeepsTheLoss) {
  TempDir tmp;
  WriteCheckpoint(tmp / "ckpt", {});
  auto ex = Export(tmp / "ckpt", tmp / "hf16", DType::kBF16);
  ASSERT_TRUE(ex.ok()) << ex.status();
  EXPECT_EQ(json::parse(ReadFile(tmp / "hf16/config.json"))["torch_dtype"], "bfloat16");
  auto src = SafetensorsReader::Open(tmp / "ckpt/model.safetensors");
  auto dst = SafetensorsReader::Open(tmp / "hf16/model.safetensors");
  ASSERT_TRUE(src.ok() && dst.ok());
  for (const std::string& n : src->names()) {
    EXPECT_EQ(dst->Info(n)->dtype_name, "BF16") << n;
    const auto a = *src->ReadRaw(n), b = *dst->ReadRaw(n);
    ASSERT_EQ(a.size(), 2 * b.size()) << n;
    for (size_t i = 0; i < b.size() / 2; ++i) {
      float f;
      uint16_t h;
      std::memcpy(&f, a.data() + 4 * i, 4);
      std::memcpy(&h, b.data() + 2 * i, 2);
      ASSERT_EQ(h, F32ToBF16Bits(f)) << n << "[" << i << "]";
    }
  }
  ASSERT_TRUE(Import(tmp / "hf16", tmp / "back16").ok());
  const Tokens t = MakeTokens(tmp.path(), 260, 4);
  const double fp32 = LongctxLoss(tmp / "ckpt", t.batch), bf16 = LongctxLoss(tmp / "back16", t.batch);
  std::printf("eval loss fp32 %.7f bf16 export %.7f diff %.2e\n", fp32, bf16, std::fabs(fp32 - bf16));
  EXPECT_NE(fp32, bf16);  // the rounding happened
  EXPECT_LT(std::fabs(fp32 - bf16), 1e-2 * fp32);  // stated tolerance: 1 % of the loss
}

TEST(HfConvertTest, ShardedExportWritesAnIndexAndImportsBitwise) {
  TempDir tmp;
  WriteCheckpoint(tmp / "ckpt", {});
  auto ex = Export(tmp / "ckpt", tmp / "hf", DType::kF32, 40'000);
  ASSERT_TRUE(ex.ok()) << ex.status();
  EXPECT_GT(ex->num_shards, 2);
  const json index = json::parse(ReadFile(tmp / "hf/model.safetensors.index.json"));
  uint64_t total = 0;
  for (int k = 1; k <= ex->num_shards; ++k) {
    char file[64];
    std::snprintf(file, sizeof file, "model-%05d-of-%05d.safetensors", k, ex->num_shards);
    const std::string path = tmp / (std::string("hf/") + file);
    auto r = SafetensorsReader::Open(path);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_LE(std::filesystem::file_size(path) - 8 - r->header_bytes(), 40'000u) << file;
    for (const std::string& n : r->names()) {
      EXPECT_EQ(index["weight_map"][n], file) << n;
      total += r->Info(n)->nbytes;
    }
  }
  EXPECT_EQ(index["metadata"]["total_size"].get<uint64_t>(), total);
  EXPECT_EQ(total, 4u * 53792);
  EXPECT_FALSE(std::filesystem::exists(tmp / "hf/model.safetensors"));
  ASSERT_TRUE(Import(tmp / "hf", tmp / "back").ok());
  ExpectSameWeights(tmp / "ckpt", tmp / "back");
}

TEST(HfConvertTest, PythonWrittenShardedBf16CheckpointsImportWithTheSameLoss) {
  REQUIRE_TORCH();
  for (const char* arch : {"smollm3", "llama", "mistral"}) {
    for (bool tied : {false, true}) {
      SCOPED_TRACE(absl::StrCat(arch, tied ? " tied" : " untied"));
      TempDir tmp;
      const auto w = RunCommand(absl::StrCat(kPython, " ", SourcePath("bench/hf_reference.py"), " make --out ",
                                             tmp / "hf", " --arch ", arch, " --dtype bf16 --shards 3 --seed 5",
                                             tied ? " --tied" : ""));
      ASSERT_EQ(w.exit_code, 0) << w.output;
      ASSERT_TRUE(std::filesystem::exists(tmp / "hf/model.safetensors.index.json"));
      auto im = Import(tmp / "hf", tmp / "ckpt");
      ASSERT_TRUE(im.ok()) << im.status();
      EXPECT_EQ(im->shards, 3);
      const Tokens t = MakeTokens(tmp.path(), 260, 6);
      const double ours = LongctxLoss(tmp / "ckpt", t.batch), ref = ReferenceLoss(tmp / "hf", t.json_path);
      std::printf("%-8s %-6s imported: longctx %.8f reference %.8f diff %.2e\n", arch, tied ? "tied" : "untied",
                  ours, ref, std::fabs(ours - ref));
      EXPECT_GT(ours, 1.0);
      EXPECT_NEAR(ours, ref, 1e-5);
    }
  }
}

TEST(HfConvertTest, F16CheckpointImports) {
  REQUIRE_TORCH();
  TempDir tmp;
  ASSERT_EQ(RunCommand(absl::StrCat(kPython, " ", SourcePath("bench/hf_reference.py"), " make --out ", tmp / "hf",
                                    " --arch llama --dtype f16"))
                .exit_code,
            0);
  auto im = Import(tmp / "hf", tmp / "ckpt");
  ASSERT_TRUE(im.ok()) << im.status();
  const Tokens t = MakeTokens(tmp.path(), 260, 8);
  EXPECT_NEAR(LongctxLoss(tmp / "ckpt", t.batch), ReferenceLoss(tmp / "hf", t.json_path), 1e-5);
}

TEST(HfConvertTest, MetaLayoutPermutesQkRowsBothWays) {
  // The permutation itself: meta row 2j + i holds HF row i * hd/2 + j.
  const int heads = 2, hd = 8, cols = 3;
  std::vector<float> w(heads * hd * cols);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i);
  std::vector<float> meta = w;
  PermuteQkRows(meta.data(), heads, hd, cols, /*to_meta=*/true);
  for (int h = 0; h < heads; ++h)
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < hd / 2; ++j)
        for (int c = 0; c < cols; ++c)
          ASSERT_EQ(meta[(h * hd + 2 * j + i) * cols + c], w[(h * hd + i * hd / 2 + j) * cols + c]);
  EXPECT_NE(meta, w);
  PermuteQkRows(meta.data(), heads, hd, cols, /*to_meta=*/false);
  EXPECT_EQ(meta, w);

  // Through export and import: the files differ in q/k only, and come back bitwise.
  TempDir tmp;
  WriteCheckpoint(tmp / "ckpt", {});
  ASSERT_TRUE(Export(tmp / "ckpt", tmp / "hf").ok());
  ASSERT_TRUE(Export(tmp / "ckpt", tmp / "meta", DType::kF32, 5'000'000'000, QkLayout::kMeta).ok());
  auto a = SafetensorsReader::Open(tmp / "hf/model.safetensors");
  auto b = SafetensorsReader::Open(tmp / "meta/model.safetensors");
  int differing = 0;
  for (const std::string& n : a->names()) {
    const bool qk = n.find("q_proj") != std::string::npos || n.find("k_proj") != std::string::npos;
    const bool same = *a->ReadRaw(n) == *b->ReadRaw(n);
    EXPECT_EQ(same, !qk) << n;
    differing += !same;
  }
  EXPECT_EQ(differing, 8);
  ASSERT_TRUE(Import(tmp / "meta", tmp / "back", QkLayout::kMeta).ok());
  ExpectSameWeights(tmp / "ckpt", tmp / "back");
  // Read as HF layout, the Meta file is a different (wrong) model.
  ASSERT_TRUE(Import(tmp / "meta", tmp / "wrong").ok());
  const Tokens t = MakeTokens(tmp.path(), 260, 9);
  // The loss tests above hold the HF loss to 1e-5; the wrong layout must move
  // the loss by at least 100 times that, so no tolerance could hide it.
  const double wrong = LongctxLoss(tmp / "wrong", t.batch), right = LongctxLoss(tmp / "ckpt", t.batch);
  std::printf("q/k read in the wrong layout: loss %.6f against %.6f (|change| %.3g)\n", wrong, right,
              std::fabs(wrong - right));
  EXPECT_GT(std::fabs(wrong - right), 100 * 1e-5);
}

std::string ExportError(const std::vector<std::string>& overrides) {
  TempDir tmp;
  WriteCheckpoint(tmp / "ckpt", overrides);
  auto ex = Export(tmp / "ckpt", tmp / "hf");
  return ex.ok() ? "ok" : std::string(ex.status().message());
}

TEST(HfConvertTest, ExportRefusesWhatStockTransformersCannotExpress) {
  EXPECT_NE(ExportError({"model.qk_norm=true"}).find("model.qk_norm is true"), std::string::npos);
  EXPECT_NE(ExportError({"model.roper=true"}).find("model.roper is true"), std::string::npos);
  EXPECT_NE(ExportError({"model.rope_dim=4"}).find("model.rope_dim 4 != head_dim 8"), std::string::npos);
}

TEST(HfConvertTest, ImportErrorsNameTheTensorOrField) {
  TempDir tmp;
  WriteCheckpoint(tmp / "ckpt", {});
  ASSERT_TRUE(Export(tmp / "ckpt", tmp / "hf").ok());
  const json cfg = json::parse(ReadFile(tmp / "hf/config.json"));
  auto import_error = [&](const std::string& dir) {
    auto r = Import(dir, tmp / ("out-" + std::filesystem::path(dir).filename().string()));
    return r.ok() ? std::string("ok") : std::string(r.status().message());
  };
  auto variant = [&](const std::string& name, const json& c, bool drop_k0) {
    const std::string d = tmp / name;
    std::filesystem::create_directories(d);
    WriteFile(d + "/config.json", c.dump());
    auto r = SafetensorsReader::Open(tmp / "hf/model.safetensors");
    std::vector<std::vector<uint8_t>> keep;
    std::vector<SafetensorsEntry> entries;
    for (const std::string& n : r->names()) {
      if (drop_k0 && n == "model.layers.0.self_attn.k_proj.weight") continue;
      keep.push_back(*r->ReadRaw(n));
      SafetensorsEntry e;
      e.name = n;
      e.shape = r->Info(n)->shape;
      e.data = keep.back().data();
      entries.push_back(e);
    }
    EXPECT_TRUE(WriteSafetensors(d + "/model.safetensors", entries, {}).ok());
    return import_error(d);
  };
  json c = cfg;
  c["architectures"] = {"GPT2LMHeadModel"};
  EXPECT_NE(variant("arch", c, false).find("unknown architecture 'GPT2LMHeadModel'"), std::string::npos);
  EXPECT_NE(variant("missing", cfg, true).find("tensor 'model.layers.0.self_attn.k_proj.weight' is missing"),
            std::string::npos);
  c = cfg;
  c["intermediate_size"] = 48;
  const std::string shape = variant("shape", c, false);
  EXPECT_NE(shape.find("tensor 'model.layers.0.mlp.gate_proj.weight'"), std::string::npos) << shape;
  EXPECT_NE(shape.find("has shape [64, 32] but config.json"), std::string::npos) << shape;
  EXPECT_NE(shape.find("implies [48, 32]"), std::string::npos) << shape;
  c = cfg;
  c.erase("num_attention_heads");
  EXPECT_NE(variant("field", c, false).find("num_attention_heads: missing"), std::string::npos);
  c = cfg;
  c["use_sliding_window"] = false;
  EXPECT_NE(variant("sw", c, false).find("use_sliding_window"), std::string::npos);
  c = cfg;
  c["model_type"] = "llama";
  EXPECT_NE(variant("type", c, false).find("model_type"), std::string::npos);
  c = cfg;
  c["num_key_value_heads"] = 4;  // k_proj would be [32, 32]
  EXPECT_NE(variant("kv", c, false).find("tensor 'model.layers.0.self_attn.k_proj.weight'"), std::string::npos);
  // A longctx checkpoint's own config.json is labelled by its layers (SmolLM3 for RNoPE-SWA), so reading it
  // the way transformers does gives the same layer kinds; one relabelled Llama is refused, not read as all-RoPE.
  {
    auto own = Import(tmp / "ckpt", tmp / "out-own");
    ASSERT_TRUE(own.ok()) << own.status();
    EXPECT_EQ(own->architecture, "SmolLM3ForCausalLM");
    auto want = ResolveModelConfig(LoadCheckpointConfig(tmp / "ckpt")->model());
    auto got = ResolveModelConfig(own->model);
    ASSERT_TRUE(want.ok() && got.ok());
    EXPECT_EQ(got->kinds, want->kinds);
    json relabelled = json::parse(ReadFile(tmp / "ckpt/config.json"));
    relabelled["architectures"] = json::array({"LlamaForCausalLM"});
    relabelled["model_type"] = "llama";
    std::filesystem::create_directories(tmp / "llama-label");
    for (const auto& e : std::filesystem::directory_iterator(tmp / "ckpt"))
      if (e.is_regular_file()) std::filesystem::copy_file(e.path(), std::filesystem::path(tmp / "llama-label") / e.path().filename());
    WriteFile(tmp / "llama-label/config.json", relabelled.dump(2));
    auto r = Import(tmp / "llama-label", tmp / "out-llama");
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("longctx_attention_kinds"), std::string::npos) << r.status();
  }
  // The error path for the messages as printed, for the record.
  std::printf("shape error: %s\n", shape.c_str());
}

// Copies SRC's F32 tensors into DST (a new safetensors file), letting `edit`
// change values, drop tensors or add them first.
using TensorMap = std::map<std::string, std::pair<std::vector<int64_t>, std::vector<float>>>;
void RewriteSafetensors(const std::string& src, const std::string& dst, const std::function<void(TensorMap&)>& edit) {
  auto r = SafetensorsReader::Open(src);
  ASSERT_TRUE(r.ok()) << r.status();
  TensorMap t;
  for (const std::string& n : r->names()) {
    auto info = r->Info(n);
    ASSERT_EQ(info->dtype_name, "F32") << n;
    std::vector<float> v(static_cast<size_t>(info->numel()));
    ASSERT_TRUE(r->ReadInto(n, v.data(), DType::kF32, info->shape).ok()) << n;
    t[n] = {info->shape, std::move(v)};
  }
  edit(t);
  std::vector<SafetensorsEntry> entries;
  for (auto& [n, sv] : t) {
    SafetensorsEntry e;
    e.name = n;
    e.shape = sv.first;
    e.data = sv.second.data();
    entries.push_back(e);
  }
  std::filesystem::create_directories(std::filesystem::path(dst).parent_path());
  ASSERT_TRUE(WriteSafetensors(dst, entries, {}).ok());
}

void CopyDir(const std::string& from, const std::string& to) {
  std::filesystem::create_directories(to);
  for (const auto& e : std::filesystem::directory_iterator(from))
    if (e.is_regular_file()) std::filesystem::copy_file(e.path(), std::filesystem::path(to) / e.path().filename());
}

// Issue 47's bad-input findings for import: NaN/Inf weights, a tensor in two
// shards, tie_word_embeddings with a different lm_head.weight were imported
// (rc 0), and a fresh import had no manifest (loading warned "written before
// checksums"). Each is now refused naming the tensor (and the files), and an
// import verifies.
TEST(HfConvertTest, ImportRefusesNonFiniteDuplicateAndConflictingTiedWeightsAndWritesAManifest) {
  TempDir tmp;
  WriteCheckpoint(tmp / "ckpt", {});
  ASSERT_TRUE(Export(tmp / "ckpt", tmp / "hf").ok());
  auto error_of = [&](const std::string& dir) {
    auto r = Import(dir, tmp / ("out-" + std::filesystem::path(dir).filename().string()));
    return r.ok() ? std::string("ok (imported)") : std::string(r.status().message());
  };
  // NaN in one embedding row, +Inf in the final norm.
  for (const auto& [label, tensor, index, value] :
       std::vector<std::tuple<std::string, std::string, int64_t, float>>{
           {"nan", "model.embed_tokens.weight", 37, std::nanf("")},
           {"inf", "model.norm.weight", 5, INFINITY}}) {
    const std::string d = tmp / label;
    CopyDir(tmp / "hf", d);
    RewriteSafetensors(tmp / "hf/model.safetensors", d + "/model.safetensors",
                       [&](TensorMap& t) { t.at(tensor).second[index] = value; });
    const std::string e = error_of(d);
    std::printf("%s: %s\n", label.c_str(), e.c_str());
    EXPECT_NE(e.find(absl::StrCat("tensor '", tensor, "' in ", d, "/model.safetensors has a non-finite value")),
              std::string::npos) << e;
    EXPECT_NE(e.find(absl::StrCat("at element ", index, " ")), std::string::npos) << e;
  }
  {  // A tensor in two shards: the index maps it to one, the other holds a copy too.
    ASSERT_TRUE(Export(tmp / "ckpt", tmp / "hf-sharded", DType::kF32, 40'000).ok());
    const json index = json::parse(ReadFile(tmp / "hf-sharded/model.safetensors.index.json"));
    const std::string name = "model.norm.weight", home = index["weight_map"][name];
    std::string other;
    for (const auto& f : index["weight_map"])
      if (f != home) other = f.get<std::string>();
    ASSERT_FALSE(other.empty()) << "the sharded export has one shard";
    ASSERT_TRUE(std::filesystem::exists(tmp / ("hf-sharded/" + other))) << other;
    CopyDir(tmp / "hf-sharded", tmp / "dup");
    auto src = SafetensorsReader::Open(tmp / ("hf-sharded/" + home));
    ASSERT_TRUE(src.ok());
    std::vector<float> v(static_cast<size_t>(src->Info(name)->numel()));
    ASSERT_TRUE(src->ReadInto(name, v.data(), DType::kF32, src->Info(name)->shape).ok());
    RewriteSafetensors(tmp / ("hf-sharded/" + other), tmp / ("dup/" + other), [&](TensorMap& t) {
      v[0] += 1.0f;  // a different copy: importing either silently changes the model
      t[name] = {src->Info(name)->shape, v};
    });
    const std::string e = error_of(tmp / "dup");
    std::printf("duplicate: %s\n", e.c_str());
    EXPECT_NE(e.find("tensor '" + name + "' is in two shards"), std::string::npos) << e;
    EXPECT_NE(e.find(tmp / ("dup/" + home)), std::string::npos) << e;
    EXPECT_NE(e.find(tmp / ("dup/" + other)), std::string::npos) << e;
  }
  {  // tie_word_embeddings true with an lm_head.weight: refused unless equal to the embedding.
    WriteCheckpoint(tmp / "ckpt-tied", {"model.layer_pattern=RNOPE_FULL", "model.tie_embeddings=true"});
    ASSERT_TRUE(Export(tmp / "ckpt-tied", tmp / "hf-tied").ok());
    ASSERT_TRUE(json::parse(ReadFile(tmp / "hf-tied/config.json"))["tie_word_embeddings"].get<bool>());
    for (const bool equal : {false, true}) {
      const std::string d = tmp / (equal ? "tied-same" : "tied-differs");
      CopyDir(tmp / "hf-tied", d);
      RewriteSafetensors(tmp / "hf-tied/model.safetensors", d + "/model.safetensors", [&](TensorMap& t) {
        ASSERT_FALSE(t.count("lm_head.weight"));
        t["lm_head.weight"] = t.at("model.embed_tokens.weight");
        if (!equal) t["lm_head.weight"].second[3] += 0.5f;
      });
      const std::string e = error_of(d);
      std::printf("tied, lm_head %s: %s\n", equal ? "equal" : "different", e.c_str());
      if (equal) {
        EXPECT_EQ(e, "ok (imported)");
      } else {
        EXPECT_NE(e.find("tie_word_embeddings is true, but lm_head.weight in " + d + "/model.safetensors differs "
                         "from model.embed_tokens.weight (first at element 3"),
                  std::string::npos) << e;
      }
    }
  }
  {  // A fresh import has a manifest: it verifies, and loading it does not warn.
    ASSERT_TRUE(Import(tmp / "hf", tmp / "fresh").ok());
    EXPECT_TRUE(std::filesystem::exists(tmp / "fresh/manifest.json"));
    absl::Status st = VerifyCheckpointFiles(tmp / "fresh");
    EXPECT_TRUE(st.ok()) << st;
    ASSERT_TRUE(::longctx::testing::WriteByteTokenCorpus(tmp / "text", tmp / "tokens.ltok", 20, 1).ok());
    auto r = RunCommand(absl::StrCat(LongctxBinary(), " eval --checkpoint ", tmp / "fresh", " --data ",
                                     tmp / "tokens.ltok", " 2>&1"));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(r.output.find("no manifest.json"), std::string::npos) << r.output;
    r = RunCommand(absl::StrCat(LongctxBinary(), " checkpoint verify --checkpoint ", tmp / "fresh", " 2>&1"));
    EXPECT_EQ(r.exit_code, 0) << r.output;
  }
}

TEST(HfConvertTest, CommandLineBothWaysThenEvalAndInitFrom) {
  TempDir tmp;
  WriteCheckpoint(tmp / "ckpt", {});
  auto r = RunCommand(absl::StrCat(LongctxBinary(), " convert --to hf --checkpoint ", tmp / "ckpt", " --out ",
                                   tmp / "hf", " --dtype bf16 --max_shard_size 50KB"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("\"architecture\":\"SmolLM3ForCausalLM\""), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("model.safetensors.index.json"), std::string::npos) << r.output;
  r = RunCommand(absl::StrCat(LongctxBinary(), " convert --from hf --hf ", tmp / "hf", " --out ", tmp / "back"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("\"layer_pattern\":\"RNOPE_SWA\""), std::string::npos) << r.output;
  // Eval and train --init_from run on the imported checkpoint.
  ASSERT_TRUE(::longctx::testing::WriteByteTokenCorpus(tmp / "text", tmp / "tokens.ltok", 20, 1).ok());
  r = RunCommand(absl::StrCat(LongctxBinary(), " eval --checkpoint ", tmp / "back", " --data ", tmp / "tokens.ltok"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("loss"), std::string::npos) << r.output;
  r = RunCommand(absl::StrCat(LongctxBinary(), " train --config ", SourcePath("configs/tiny-test.textproto"),
                              " --data.path=", tmp / "tokens.ltok", " --out_dir=", tmp / "run",
                              " --steps=1 --init_from=", tmp / "back"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("initialised weights from"), std::string::npos) << r.output;
  // Errors from the command line.
  r = RunCommand(absl::StrCat(LongctxBinary(), " convert --to hf --checkpoint ", tmp / "ckpt", " --out ",
                              tmp / "x", " --dtype f16"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--dtype: must be f32 or bf16"), std::string::npos) << r.output;
  r = RunCommand(absl::StrCat(LongctxBinary(), " convert --to hf --checkpoint ", tmp / "ckpt", " --out ", tmp / "hf"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("not empty"), std::string::npos) << r.output;
}

// Tokenizer files: llama3's tokenizer.json encodes as longctx's llama3; the
// llama2 conversion's merges, applied as Hugging Face's BPE applies them
// (lowest merge rank first, over the "▁"-normalized text), give longctx's
// SentencePiece ids; tokenizer_config.json has the special tokens and a chat
// template.
std::vector<int32_t> HfBpeEncode(const json& tok, const std::string& text) {
  std::string s = "\xe2\x96\x81";  // Prepend "▁", Replace " " -> "▁"
  for (char ch : text) s += ch == ' ' ? std::string("\xe2\x96\x81") : std::string(1, ch);
  std::map<std::pair<std::string, std::string>, size_t> rank;
  const json& merges = tok["model"]["merges"];
  for (size_t i = 0; i < merges.size(); ++i) rank[{merges[i][0], merges[i][1]}] = i;
  std::vector<std::string> parts;
  for (size_t i = 0; i < s.size();) {
    size_t n = 1;
    while (i + n < s.size() && (static_cast<unsigned char>(s[i + n]) & 0xC0) == 0x80) ++n;
    parts.push_back(s.substr(i, n));
    i += n;
  }
  while (true) {
    size_t best = SIZE_MAX, at = 0;
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      auto it = rank.find({parts[i], parts[i + 1]});
      if (it != rank.end() && it->second < best) best = it->second, at = i;
    }
    if (best == SIZE_MAX) break;
    parts[at] += parts[at + 1];
    parts.erase(parts.begin() + at + 1);
  }
  std::vector<int32_t> ids;
  for (const std::string& p : parts) {
    auto it = tok["model"]["vocab"].find(p);
    if (it != tok["model"]["vocab"].end()) {
      ids.push_back(it->get<int32_t>());
    } else {
      for (unsigned char b : p) {
        char hex[16];
        std::snprintf(hex, sizeof hex, "<0x%02X>", b);
        ids.push_back(tok["model"]["vocab"][hex].get<int32_t>());
      }
    }
  }
  return ids;
}

TEST(HfConvertTest, TokenizerFilesForLlama3AndLlama2) {
  const std::string text = "Hello world, long-context models read 12345 tokens: caf\xc3\xa9 na\xc3\xafve!";
  {
    TempDir tmp;
    WriteCheckpoint(tmp / "ckpt", {"data.tokenizer=llama3"});
    auto ex = Export(tmp / "ckpt", tmp / "hf");
    ASSERT_TRUE(ex.ok()) << ex.status();
    const json cfg = json::parse(ReadFile(tmp / "hf/tokenizer_config.json"));
    EXPECT_EQ(cfg["bos_token"], "<|begin_of_text|>");
    EXPECT_EQ(cfg["eos_token"], "<|end_of_text|>");
    EXPECT_NE(cfg["chat_template"].get<std::string>().find("<|start_header_id|>"), std::string::npos);
    auto ours = MakeTokenizer("llama3");
    auto theirs = MakeTokenizer(tmp / "hf/tokenizer.json");
    ASSERT_TRUE(ours.ok()) << ours.status();
    ASSERT_TRUE(theirs.ok()) << theirs.status();
    EXPECT_EQ((*theirs)->Encode(text), (*ours)->Encode(text));
    EXPECT_EQ(json::parse(ReadFile(tmp / "hf/tokenizer.json"))["post_processor"]["single"][0]["SpecialToken"]["id"],
              "<|begin_of_text|>");
  }
  {
    TempDir tmp;
    WriteCheckpoint(tmp / "ckpt", {"data.tokenizer=llama2"});
    ASSERT_TRUE(Export(tmp / "ckpt", tmp / "hf").ok());
    const json tok = json::parse(ReadFile(tmp / "hf/tokenizer.json"));
    EXPECT_EQ(tok["model"]["vocab"].size(), 32000u);
    EXPECT_EQ(tok["model"]["byte_fallback"], true);
    EXPECT_EQ(tok["added_tokens"][1]["content"], "<s>");
    const json cfg = json::parse(ReadFile(tmp / "hf/tokenizer_config.json"));
    EXPECT_EQ(cfg["bos_token"], "<s>");
    EXPECT_EQ(cfg["eos_token"], "</s>");
    EXPECT_NE(cfg["chat_template"].get<std::string>().find("[INST]"), std::string::npos);
    auto ours = MakeTokenizer("llama2");
    ASSERT_TRUE(ours.ok()) << ours.status();
    std::vector<int32_t> want = (*ours)->Encode(text);
    if (!want.empty() && want[0] == (*ours)->bos_id()) want.erase(want.begin());
    EXPECT_EQ(HfBpeEncode(tok, text), want);
  }
  {
    TempDir tmp;  // byte: no Hugging Face tokenizer, no files
    WriteCheckpoint(tmp / "ckpt", {});
    auto ex = Export(tmp / "ckpt", tmp / "hf");
    ASSERT_TRUE(ex.ok());
    EXPECT_FALSE(std::filesystem::exists(tmp / "hf/tokenizer.json"));
  }
}

}  // namespace
}  // namespace longctx
