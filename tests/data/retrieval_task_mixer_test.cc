// Why: retrieval rows replace packed rows deterministically from (seed, row
// index), keep every packed-batch invariant, carry loss only where the loss
// mode says, and follow the curriculum (data/retrieval_task_mixer.h).
#include "data/retrieval_task_mixer.h"

#include "data/byte_tokenizer.h"
#include "gtest/gtest.h"
#include "tests/support/memory_documents.h"

namespace longctx {
namespace {

using ::longctx::testing::MakeProseDocuments;
using ::longctx::testing::MemoryDocuments;

class RetrievalMixerTest : public ::testing::Test {
 protected:
  RetrievalMixerTest() : docs_(MakeProseDocuments(tok_, 120, 5)) {}

  Packer MakePacker() {
    PackerOptions o;
    o.seq_len = 256;
    o.batch_size = 8;
    absl::StatusOr<Packer> p = Packer::Create(&docs_, o);
    EXPECT_TRUE(p.ok()) << p.status();
    return std::move(*p);
  }

  std::unique_ptr<RetrievalMixer> MakeMixer(double fraction, const std::string& curriculum, RetrievalLoss loss,
                                            const NeedleFormat& format = CompactNeedleFormat()) {
    RetrievalMixOptions o;
    o.fraction = fraction;
    o.seed = 99;
    o.format = format;
    o.loss = loss;
    absl::StatusOr<std::vector<RetrievalStage>> stages = ParseRetrievalCurriculum(curriculum, 1, "data.retrieval_curriculum");
    EXPECT_TRUE(stages.ok()) << stages.status();
    o.stages = *stages;
    absl::StatusOr<std::unique_ptr<RetrievalMixer>> m =
        RetrievalMixer::Create(o, &docs_, SplitDocuments(docs_, 0.02, false), &tok_, 256);
    EXPECT_TRUE(m.ok()) << m.status();
    return m.ok() ? std::move(*m) : nullptr;
  }

  ByteTokenizer tok_;
  MemoryDocuments docs_;
};

TEST_F(RetrievalMixerTest, ParsesCurricula) {
  absl::StatusOr<std::vector<RetrievalStage>> s = ParseRetrievalCurriculum("0:1:128, 300:2:256,600:4:0", 4, "f");
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->size(), 3u);
  EXPECT_EQ((*s)[1].from_step, 300);
  EXPECT_EQ((*s)[1].needles, 2);
  EXPECT_EQ((*s)[1].sample_len, 256);
  s = ParseRetrievalCurriculum("", 4, "f");
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(s->size(), 1u);
  EXPECT_EQ((*s)[0].needles, 4);
  for (const char* bad : {"1:1:128", "0:1:128,0:2:128", "0:0:128", "0:1", "0:a:3", "0:1:-5"}) {
    absl::StatusOr<std::vector<RetrievalStage>> b = ParseRetrievalCurriculum(bad, 4, "data.retrieval_curriculum");
    ASSERT_FALSE(b.ok()) << bad;
    EXPECT_NE(b.status().message().find("data.retrieval_curriculum"), std::string::npos) << b.status();
  }
}

TEST_F(RetrievalMixerTest, RejectsStagesWhoseSamplesCannotHoldTheNeedles) {
  RetrievalMixOptions o;
  o.fraction = 0.5;
  o.format = PaperNeedleFormat();
  o.stages = {{0, 4, 0}};
  absl::StatusOr<std::unique_ptr<RetrievalMixer>> m =
      RetrievalMixer::Create(o, &docs_, SplitDocuments(docs_, 0.02, false), &tok_, 256);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("compact"), std::string::npos) << m.status();
  o.fraction = 1.5;
  o.format = CompactNeedleFormat();
  m = RetrievalMixer::Create(o, &docs_, SplitDocuments(docs_, 0.02, false), &tok_, 256);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("data.retrieval_fraction"), std::string::npos) << m.status();
}

TEST_F(RetrievalMixerTest, ReplacesAFractionOfRowsAndKeepsTheOthers) {
  std::unique_ptr<RetrievalMixer> mixer = MakeMixer(0.25, "", RetrievalLoss::kAnswer);
  ASSERT_NE(mixer, nullptr);
  Packer packer = MakePacker();
  int replaced = 0, rows = 0;
  for (int step = 1; step <= 25; ++step) {
    const uint64_t first = packer.cursor().rows_emitted;
    absl::StatusOr<PackedBatch> natural = packer.Next();
    ASSERT_TRUE(natural.ok());
    PackedBatch mixed = *natural;
    ASSERT_TRUE(mixer->Apply(step, first, &mixed).ok());
    ASSERT_TRUE(ValidatePackedBatch(mixed).ok()) << ValidatePackedBatch(mixed);
    for (int b = 0; b < 8; ++b, ++rows) {
      const bool r = mixer->IsRetrievalRow(first + b);
      replaced += r;
      const auto row = [&](const std::vector<int32_t>& v) {
        return std::vector<int32_t>(v.begin() + b * 256, v.begin() + (b + 1) * 256);
      };
      if (!r) {
        EXPECT_EQ(row(mixed.inputs), row(natural->inputs));
        EXPECT_EQ(row(mixed.targets), row(natural->targets));
        EXPECT_EQ(row(mixed.positions), row(natural->positions));
        EXPECT_EQ(SegmentsOfRow(mixed, b), SegmentsOfRow(*natural, b));
        continue;
      }
      // One sample per row: one segment, loss on the answer and the EOS only.
      ASSERT_EQ(SegmentsOfRow(mixed, b).size(), 1u);
      const std::vector<int32_t> in = row(mixed.inputs), tg = row(mixed.targets);
      std::vector<int32_t> kept;
      for (int t = 0; t < 256; ++t) {
        if (tg[t] < 0) continue;
        kept.push_back(tg[t]);
        if (t + 1 < 256) {
          EXPECT_EQ(tg[t], in[t + 1]);
        }
      }
      ASSERT_FALSE(kept.empty());
      EXPECT_EQ(kept.back(), tok_.eos_id());
      kept.pop_back();
      const std::string answer = tok_.Decode(kept);
      // " NNNNNN." and that number is the needle in the prompt.
      ASSERT_EQ(answer.size(), 8u) << answer;
      const std::string prompt = tok_.Decode(in);
      EXPECT_NE(prompt.find("One of the magic numbers is " + answer.substr(1, 6) + "."), std::string::npos);
      EXPECT_NE(prompt.find("\nThe magic numbers are" + answer), std::string::npos);
    }
  }
  EXPECT_GT(replaced, rows / 8);
  EXPECT_LT(replaced, rows / 2);
}

TEST_F(RetrievalMixerTest, AllTokensLossAndShortSamplesFollowTheCurriculum) {
  std::unique_ptr<RetrievalMixer> mixer = MakeMixer(1.0, "0:1:100,10:2:0", RetrievalLoss::kAll);
  ASSERT_NE(mixer, nullptr);
  EXPECT_EQ(mixer->StageAt(9).sample_len, 100);
  EXPECT_EQ(mixer->StageAt(10).needles, 2);
  Packer packer = MakePacker();
  for (int step : {1, 10}) {
    const uint64_t first = packer.cursor().rows_emitted;
    absl::StatusOr<PackedBatch> batch = packer.Next();
    ASSERT_TRUE(batch.ok());
    ASSERT_TRUE(mixer->Apply(step, first, &*batch).ok());
    ASSERT_TRUE(ValidatePackedBatch(*batch).ok()) << ValidatePackedBatch(*batch);
    for (int b = 0; b < 8; ++b) {
      const auto segs = SegmentsOfRow(*batch, b);
      if (step == 1) {
        // 256 = 100 + 156: two samples, the last one longer.
        ASSERT_EQ(segs.size(), 2u);
        EXPECT_EQ(segs[0].second, 100);
        EXPECT_EQ(segs[1].second, 156);
      } else {
        ASSERT_EQ(segs.size(), 1u);
      }
      for (const auto& [start, len] : segs) {
        // Every target up to the EOS is kept; the EOS input's target is not.
        const int32_t* tg = batch->targets.data() + b * 256 + start;
        const int32_t* in = batch->inputs.data() + b * 256 + start;
        int eos_at = -1;
        for (int t = 0; t < len; ++t)
          if (in[t] == tok_.eos_id()) eos_at = t;
        ASSERT_GT(eos_at, 0);
        for (int t = 0; t < len; ++t) EXPECT_EQ(tg[t] >= 0, t < eos_at) << t;
        const std::string text = tok_.Decode(absl::MakeConstSpan(in, eos_at));
        const size_t q = text.rfind("\nThe magic numbers are ");
        ASSERT_NE(q, std::string::npos) << text;
        const std::string answer = text.substr(q + 22);
        EXPECT_EQ(answer.size(), step == 1 ? 8u : 16u) << answer;
      }
    }
  }
}

TEST_F(RetrievalMixerTest, RowsAreAPureFunctionOfSeedAndRowIndex) {
  std::unique_ptr<RetrievalMixer> a = MakeMixer(0.5, "0:2:0", RetrievalLoss::kAnswer);
  std::unique_ptr<RetrievalMixer> b = MakeMixer(0.5, "0:2:0", RetrievalLoss::kAnswer);
  ASSERT_TRUE(a && b);
  // The same rows from a packer that skipped ahead (as a resumed run does).
  Packer p1 = MakePacker(), p2 = MakePacker();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(p1.Next().ok());
  PackerCursor c = p1.cursor();
  ASSERT_TRUE(p2.Seek(c).ok());
  absl::StatusOr<PackedBatch> x = p1.Next(), y = p2.Next();
  ASSERT_TRUE(x.ok() && y.ok());
  ASSERT_TRUE(a->Apply(4, c.rows_emitted, &*x).ok());
  ASSERT_TRUE(b->Apply(4, c.rows_emitted, &*y).ok());
  EXPECT_EQ(x->inputs, y->inputs);
  EXPECT_EQ(x->targets, y->targets);
  EXPECT_EQ(x->cu_seqlens, y->cu_seqlens);
  int picked = 0;
  for (uint64_t r = 0; r < 2000; ++r) picked += a->IsRetrievalRow(r);
  EXPECT_NEAR(picked / 2000.0, 0.5, 0.05);
}

}  // namespace
}  // namespace longctx
