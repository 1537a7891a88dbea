// Why: `longctx analyze attention` end to end on a real (tiny) checkpoint: the
// report has a mass row per layer that sums to 1, per-kind summaries matching
// the layer pattern, one pair-contribution row per RoPE head, and an ablation
// that really changes the answer loss; bad arguments are one-line errors.
#include <cmath>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "data/byte_tokenizer.h"
#include "data/text_corpus.h"
#include "gtest/gtest.h"
#include "tests/support/test_util.h"

namespace longctx {
namespace {

using ::longctx::testing::LongctxBinary;
using ::longctx::testing::ReadFile;
using ::longctx::testing::RunCommand;

class AnalyzeAttentionTest : public ::longctx::testing::TinyCorpusTest {
 protected:
  void SetUp() override {
    TinyCorpusTest::SetUp();
    if (HasFatalFailure()) return;
    // tiny-test is RNoPE-SWA: layers 0-2 RoPE (window 8), layer 3 NoPE; 4 heads.
    auto r = RunCommand(::longctx::testing::TinyTrainCommand(data_, run_,
                                                             "--steps=20 --ckpt_every=20 --data.eval_fraction=0.2"));
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }

  std::string Analyze(const std::string& extra) {
    return absl::StrCat(LongctxBinary(), " analyze attention --checkpoint ", run_,
                        "/step-00000020 --length 128 --samples 2 --needles 1 --format compact ", extra);
  }

  std::string run_ = tmp_ / "run";
};

TEST_F(AnalyzeAttentionTest, ReportIsConsistentAndAblationChangesTheLoss) {
  const std::string json = tmp_ / "attention.json";
  auto r = RunCommand(Analyze(absl::StrCat("--ablate_heads 3:0,3:1,3:2,3:3 --json_out ", json)));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("nope layers 1:"), std::string::npos) << r.output;
  nlohmann::json j = nlohmann::json::parse(ReadFile(json));
  ASSERT_EQ(j["mass"]["layers"].size(), 4u);
  for (const auto& l : j["mass"]["layers"]) {
    const auto& m = l["mass"];
    EXPECT_NEAR(m["begin"].get<double>() + m["needle"].get<double>() + m["context"].get<double>() +
                    m["qc"].get<double>(),
                1.0, 1e-9);
    EXPECT_GT(l["entropy"].get<double>(), 0.0);
    // The window-8 RoPE layers cannot see the needle from the question; the full NoPE layer can.
    if (l["kind"] == "rope_swa") EXPECT_EQ(m["needle"].get<double>(), 0.0);
    else EXPECT_GT(m["needle"].get<double>(), 0.0);
  }
  EXPECT_EQ(j["mass"]["layers"][3]["kind"], "nope_full");
  ASSERT_EQ(j["mass"]["summary"].size(), 3u);
  EXPECT_EQ(j["mass"]["summary"][0]["group"], "rope");
  EXPECT_EQ(j["mass"]["summary"][0]["layers"], 3);
  EXPECT_EQ(j["rope_pairs"]["heads"].size(), 12u);  // 3 RoPE layers x 4 heads
  for (const auto& h : j["rope_pairs"]["heads"]) {
    double total = 0;
    for (double s : h["share"]) total += s;
    EXPECT_NEAR(total, 1.0, 1e-9);  // head_dim 8 = rotary_dim: 4 pairs, no extra bucket
    EXPECT_EQ(h["share"].size(), 4u);
  }
  const double intact = j["ablation"]["answer_nll_intact"].get<double>();
  const double ablated = j["ablation"]["answer_nll"].get<double>();
  EXPECT_TRUE(std::isfinite(intact) && std::isfinite(ablated));
  EXPECT_NE(intact, ablated);
  EXPECT_EQ(j["answer_nll"].get<double>(), intact);
  EXPECT_EQ(j["haystack"], "eval split");

  // Deterministic: the same command gives the same report.
  auto r2 = RunCommand(Analyze(absl::StrCat("--ablate_heads 3:0,3:1,3:2,3:3 --json_out ", json, "2")));
  ASSERT_EQ(r2.exit_code, 0) << r2.output;
  EXPECT_EQ(ReadFile(json), ReadFile(json + "2"));
}

TEST_F(AnalyzeAttentionTest, BadArgumentsAreOneLineErrors) {
  auto r = RunCommand(Analyze("--ablate_heads 3-1"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("--ablate_heads: '3-1' is not LAYER:HEAD"), std::string::npos) << r.output;
  r = RunCommand(Analyze("--ablate_heads 9:0"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("9:0 is outside 4 layers x 4 heads"), std::string::npos) << r.output;
  r = RunCommand(Analyze("--depth 1.5"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("--depth"), std::string::npos) << r.output;
  r = RunCommand(absl::StrCat(LongctxBinary(), " analyze attention --checkpoint ", tmp_ / "nope"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find(tmp_ / "nope"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace longctx
