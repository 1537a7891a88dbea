// Why: SFT rows must keep examples apart (document masks), carry loss only on
// response tokens all the way into the model's loss, never truncate an example
// silently, and — with a sequence length that changes per batch — resume
// bit-identically mid-schedule. These tests check each of those.
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/packer.h"
#include "data/sft_packer.h"
#include "data/sft_schedule.h"
#include "data/sft_token_file.h"
#include "gtest/gtest.h"
#include "kernels/backend.h"
#include "kernels/cpu/cpu_backend.h"
#include "model/config.h"
#include "model/transformer.h"
#include "tests/support/test_util.h"
#include "train/config_loader.h"
#include "train/device_batch.h"
#include "train/evaluate.h"

namespace longctx {
namespace {

// Example i: 1 prompt token (id 250 = "BOS") + p prompt tokens + r response
// tokens + an end token 251 with loss; ids depend on i.
SftDataset MakeData(const std::vector<std::pair<int, int>>& shapes) {
  SftDataset d(256, "test");
  for (size_t i = 0; i < shapes.size(); ++i) {
    std::vector<int32_t> t = {250};
    std::vector<uint8_t> l = {0};
    for (int k = 0; k < shapes[i].first; ++k) {
      t.push_back(static_cast<int32_t>((i * 7 + k) % 100));
      l.push_back(0);
    }
    for (int k = 0; k < shapes[i].second; ++k) {
      t.push_back(static_cast<int32_t>(100 + (i * 5 + k) % 100));
      l.push_back(1);
    }
    t.push_back(251);
    l.push_back(1);
    EXPECT_TRUE(d.Add(t, l, "ex.jsonl:" + std::to_string(i + 1)).ok());
  }
  return d;
}

TEST(SftPackerTest, WholeExamplesPerSegmentLossOnlyOnResponses) {
  const SftDataset d = MakeData({{5, 3}, {10, 4}, {2, 2}, {20, 8}, {7, 7}});
  SftPackerOptions o;
  o.seq_len = 32;
  o.batch_size = 4;
  o.pad_id = 255;
  absl::StatusOr<SftPacker> p = SftPacker::Create(&d, o);
  ASSERT_TRUE(p.ok()) << p.status();
  absl::StatusOr<PackedBatch> b = p->Next();
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE(ValidatePackedBatch(*b).ok()) << ValidatePackedBatch(*b);
  const std::vector<std::pair<int, int>> shapes = {{5, 3}, {10, 4}, {2, 2}, {20, 8}, {7, 7}};
  int64_t loss_targets = 0;
  int examples_seen = 0;
  for (size_t s = 0; s + 1 < b->cu_seqlens.size(); ++s) {
    const int32_t a = b->cu_seqlens[s], e = b->cu_seqlens[s + 1];
    if (b->inputs[a] == 255) {  // padding: no loss anywhere
      for (int32_t i = a; i < e; ++i) EXPECT_EQ(b->targets[i], -1);
      continue;
    }
    EXPECT_EQ(b->inputs[a], 250) << "every segment starts an example";
    EXPECT_EQ(b->targets[e - 1], -1) << "no target across examples";
    // Which example: its first prompt token is 7·i.
    const int ex = b->inputs[a + 1] / 7;
    ASSERT_LT(ex, 5);
    EXPECT_EQ(e - a, 1 + shapes[ex].first + shapes[ex].second + 1) << "whole example, never cut";
    int64_t here = 0;
    for (int32_t i = a; i < e; ++i) {
      if (b->targets[i] < 0) continue;
      ++here;
      EXPECT_TRUE(b->targets[i] >= 100) << "only response tokens and the end token are targets";
      EXPECT_EQ(b->targets[i], b->inputs[i + 1]);
    }
    EXPECT_EQ(here, shapes[ex].second + 1) << "every response token and the end token carry loss";
    loss_targets += here;
    ++examples_seen;
  }
  EXPECT_EQ(loss_targets, b->num_target_tokens);
  EXPECT_GE(examples_seen, 5);
}

TEST(SftPackerTest, LongExampleIsAnErrorNamingItOrIsSplit) {
  const SftDataset d = MakeData({{3, 3}, {40, 30}, {2, 2}});
  SftPackerOptions o;
  o.seq_len = 32;
  o.batch_size = 2;
  absl::StatusOr<SftPacker> bad = SftPacker::Create(&d, o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("ex.jsonl:2 has 72 tokens"), std::string::npos) << bad.status();
  o.long_examples = SftLongExamples::kSplit;
  o.shuffle = false;
  o.batch_size = 5;
  absl::StatusOr<SftPacker> p = SftPacker::Create(&d, o);
  ASSERT_TRUE(p.ok());
  absl::StatusOr<PackedBatch> b = p->Next();
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE(ValidatePackedBatch(*b).ok());
  // Row 0: example 1 (8 tokens) + padding; rows 1–3: example 2 in chunks 32, 32, 8
  // followed by example 3; every token of example 2 is an input exactly once.
  std::vector<int32_t> ex2;
  for (int r = 1; r <= 3; ++r) {
    const int32_t start = r * 32;
    const int32_t len = r < 3 ? 32 : 8;
    EXPECT_EQ(b->positions[start], 0);
    for (int32_t i = 0; i < len; ++i) ex2.push_back(b->inputs[start + i]);
  }
  std::vector<int32_t> want(d.tokens(1).begin(), d.tokens(1).end());
  EXPECT_EQ(ex2, want);
}

TEST(SftPackerTest, SeekContinuesBitIdentically) {
  const SftDataset d = MakeData({{5, 3}, {10, 4}, {2, 2}, {20, 8}, {7, 7}, {1, 1}, {12, 3}});
  SftPackerOptions o;
  o.seq_len = 32;
  o.batch_size = 3;
  absl::StatusOr<SftPacker> a = SftPacker::Create(&d, o);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(a->Next().ok());
  const SftCursor saved = a->cursor();
  absl::StatusOr<SftCursor> round = SftCursorFromJson(nlohmann::json::parse(SftCursorToJson(saved).dump()));
  ASSERT_TRUE(round.ok());
  std::vector<PackedBatch> first;
  for (int i = 0; i < 5; ++i) first.push_back(*a->Next());  // crosses epochs
  absl::StatusOr<SftPacker> b = SftPacker::Create(&d, o);
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE(b->Seek(*round).ok());
  for (int i = 0; i < 5; ++i) {
    PackedBatch x = *b->Next();
    EXPECT_EQ(x.inputs, first[i].inputs) << i;
    EXPECT_EQ(x.targets, first[i].targets) << i;
    EXPECT_EQ(x.cu_seqlens, first[i].cu_seqlens) << i;
  }
  EXPECT_EQ(a->cursor(), b->cursor());
  SftCursor out_of_range = saved;
  out_of_range.example_in_epoch = 99;
  EXPECT_FALSE(b->Seek(out_of_range).ok());
}

TEST(SftScheduleTest, InterleavesLengthsThreeToOneAndResumes) {
  // Short examples (≤ 32 tokens) and long ones (≤ 128).
  const SftDataset d = MakeData({{5, 3}, {60, 30}, {10, 4}, {2, 2}, {50, 40}, {7, 7}, {12, 3}});
  SftScheduleOptions o;
  o.seq_lens = {32, 128};
  o.counts = {3, 1};
  o.tokens_per_batch = 256;
  absl::StatusOr<SftSchedule> s = SftSchedule::Create(&d, o);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->packer(0).examples().size(), 5u);  // the long two are left to the 128-token rows
  EXPECT_EQ(s->packer(1).examples().size(), 7u);
  std::vector<PackedBatch> seen;
  SftScheduleCursor mid;
  for (int k = 0; k < 12; ++k) {
    if (k == 6) mid = s->cursor();
    PackedBatch b;
    ASSERT_TRUE(s->NextInto(&b).ok());
    EXPECT_EQ(b.seq_len, k % 4 == 3 ? 128 : 32) << k;
    EXPECT_EQ(static_cast<int64_t>(b.batch_size) * b.seq_len, 256) << "the same tokens per batch";
    ASSERT_TRUE(ValidatePackedBatch(b).ok());
    seen.push_back(std::move(b));
  }
  absl::StatusOr<SftScheduleCursor> round =
      SftScheduleCursorFromJson(nlohmann::json::parse(SftScheduleCursorToJson(mid).dump()));
  ASSERT_TRUE(round.ok());
  absl::StatusOr<SftSchedule> r = SftSchedule::Create(&d, o);
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(r->Seek(*round).ok());
  for (int k = 6; k < 12; ++k) {
    PackedBatch b;
    ASSERT_TRUE(r->NextInto(&b).ok());
    EXPECT_EQ(b.seq_len, seen[k].seq_len);
    EXPECT_EQ(b.inputs, seen[k].inputs) << k;
    EXPECT_EQ(b.targets, seen[k].targets) << k;
  }
  o.seq_lens = {128, 32};
  EXPECT_FALSE(SftSchedule::Create(&d, o).ok());
}

// The model's loss sees only response targets: changing the target of a prompt
// token (in the example's data, repacked) leaves the loss bit-identical,
// changing a response token's target changes it.
TEST(SftLossTest, PromptTargetsDoNotMatterResponseTargetsDo) {
  absl::StatusOr<TrainConfig> config = LoadTrainConfig(testing::SourcePath("configs/tiny-test.textproto"), {});
  ASSERT_TRUE(config.ok()) << config.status();
  absl::StatusOr<ModelDims> dims = ResolveModelConfig(config->model());
  ASSERT_TRUE(dims.ok()) << dims.status();
  ASSERT_GE(dims->vocab, 256);
  std::unique_ptr<Backend> backend = MakeCpuBackend();
  Transformer model(*dims, backend.get(), DType::kF32);
  model.InitParams(3);
  DeviceBatch device(backend.get());

  const std::vector<std::pair<int, int>> shapes = {{6, 4}, {9, 5}, {3, 6}};
  SftPackerOptions o;
  o.seq_len = 32;
  o.batch_size = 2;
  o.shuffle = false;
  auto loss_with_targets_of = [&](const SftDataset& targets_from) {
    // Inputs always from the original data; targets from targets_from.
    const SftDataset base = MakeData(shapes);
    PackedBatch in = *SftPacker::Create(&base, o)->Next();
    const PackedBatch tg = *SftPacker::Create(&targets_from, o)->Next();
    in.targets = tg.targets;
    return EvaluateBatch(model, in, device).loss_sum;
  };
  auto with_token = [&](int example, int token, int32_t id) {
    SftDataset orig = MakeData(shapes);
    SftDataset d(256, "test");
    for (int i = 0; i < orig.n_examples(); ++i) {
      std::vector<int32_t> t(orig.tokens(i).begin(), orig.tokens(i).end());
      std::vector<uint8_t> l(orig.loss(i).begin(), orig.loss(i).end());
      if (i == example) t[token] = id;
      EXPECT_TRUE(d.Add(t, l, orig.source(i)).ok());
    }
    return d;
  };
  const double base = loss_with_targets_of(MakeData(shapes));
  EXPECT_GT(base, 0);
  // Example 1: token 3 is a prompt token, token 12 a response token.
  EXPECT_EQ(loss_with_targets_of(with_token(1, 3, 42)), base);
  EXPECT_NE(loss_with_targets_of(with_token(1, 12, 42)), base);
}

}  // namespace
}  // namespace longctx
