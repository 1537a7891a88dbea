// Why: the ablations change settings between training stages (the RoPE
// baseline raises theta 10k → 2M for fine-tuning, SPECS.md "SFT recipe"), so a
// run must be able to start from another run's weights with a new config:
// `init_from` loads the weights, and the optimizer, step and data start fresh.
// This checks the weights really carry over (stage 2 starts near stage 1's
// final loss, far below a fresh model's), that a changed theta takes effect,
// and that a bad path or an incompatible shape is a one-line error.
#include <map>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "data/byte_tokenizer.h"
#include "data/text_corpus.h"
#include "gtest/gtest.h"
#include "tests/support/test_util.h"

namespace longctx {
namespace {

using ::longctx::testing::ReadFile;
using ::longctx::testing::RunCommand;

class StagesTest : public ::longctx::testing::TinyCorpusTest {
 protected:
  std::string Train(const std::string& out_dir, const std::string& extra) {
    return ::longctx::testing::TinyTrainCommand(data_, out_dir, "--log_every=1 " + extra);
  }

  static std::map<int, double> Losses(const std::string& metrics_path) {
    return ::longctx::testing::TrainLosses(metrics_path);
  }
};

TEST_F(StagesTest, SecondStageStartsFromFirstStageWeightsWithNewTheta) {
  const std::string s1 = tmp_ / "stage1";
  auto r1 = RunCommand(Train(s1, "--steps=60 --ckpt_every=60"));
  ASSERT_EQ(r1.exit_code, 0) << r1.output;
  std::map<int, double> l1 = Losses(s1 + "/metrics.jsonl");
  ASSERT_EQ(l1.size(), 60u);
  ASSERT_LT(l1[60], l1[1] - 1.0);  // stage 1 learned something

  const std::string ckpt = s1 + "/step-00000060";
  // Same theta: stage 2's first loss (before its first update) is stage 1's level.
  const std::string s2 = tmp_ / "stage2";
  auto r2 = RunCommand(Train(s2, absl::StrCat("--steps=3 --init_from=", ckpt)));
  ASSERT_EQ(r2.exit_code, 0) << r2.output;
  EXPECT_NE(r2.output.find("initialised weights from"), std::string::npos) << r2.output;
  std::map<int, double> l2 = Losses(s2 + "/metrics.jsonl");
  ASSERT_EQ(l2.size(), 3u);
  EXPECT_NEAR(l2[1], l1[60], 0.5);
  EXPECT_LT(l2[1], l1[1] - 1.0);

  // Raised theta (10k → 2M, the RoPE baseline's SFT stage): the weights still
  // carry over, and the positions now mean something else, so the loss moves.
  const std::string s3 = tmp_ / "stage3";
  auto r3 = RunCommand(Train(s3, absl::StrCat("--steps=3 --model.rope_theta=2000000 --init_from=", ckpt)));
  ASSERT_EQ(r3.exit_code, 0) << r3.output;
  std::map<int, double> l3 = Losses(s3 + "/metrics.jsonl");
  ASSERT_EQ(l3.size(), 3u);
  EXPECT_LT(l3[1], l1[1] - 0.5);
  EXPECT_NE(l3[1], l2[1]);
  EXPECT_NE(ReadFile(s3 + "/step-00000003/longctx_config.textproto").find("rope_theta: 2e+06"),
            std::string::npos);
}

TEST_F(StagesTest, BadInitFromIsAOneLineError) {
  auto r = RunCommand(Train(tmp_ / "bad", "--steps=2 --init_from=/nonexistent/ckpt"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("init_from: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("/nonexistent/ckpt"), std::string::npos) << r.output;

  // A checkpoint of another shape cannot initialise this model.
  const std::string s1 = tmp_ / "small";
  ASSERT_EQ(RunCommand(Train(s1, "--steps=2 --ckpt_every=2")).exit_code, 0);
  auto r2 = RunCommand(Train(tmp_ / "wide", absl::StrCat("--steps=2 --model.hidden_size=64 --init_from=", s1,
                                                          "/step-00000002")));
  EXPECT_EQ(r2.exit_code, 1) << r2.output;
  EXPECT_NE(r2.output.find("init_from: "), std::string::npos) << r2.output;
}

}  // namespace
}  // namespace longctx
