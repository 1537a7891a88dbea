// Why: `longctx generate` and `longctx eval --string` end to end through the
// real binary on a briefly trained tiny model (configs/tiny-test.textproto as
// a pure-RoPE model, so STRING changes its full-attention layers): generate
// prints a reproducible continuation in the run's tokenizer, sampling follows
// its seed, eval with STRING prints a finite loss that differs from the plain
// loss but equals it exactly when S is beyond every distance, and a missing or
// corrupt checkpoint or a bad flag gives a one-line error naming it.
#include <cmath>
#include <filesystem>
#include <string>

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
using ::longctx::testing::TempDir;

class GenerateCliTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = new TempDir();
    ASSERT_TRUE(::longctx::testing::WriteByteTokenCorpus(*tmp_ / "text", *tmp_ / "corpus.ltok", 120, 5).ok());
    const std::string cmd = ::longctx::testing::TinyTrainCommand(
        *tmp_ / "corpus.ltok", *tmp_ / "run", "--steps=40 --ckpt_every=40 --model.layer_pattern=ALL_ROPE_FULL");
    auto r = RunCommand(cmd);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    ckpt_ = *tmp_ / "run/step-00000040";
    ASSERT_TRUE(std::filesystem::exists(ckpt_ + "/COMPLETE"));
  }
  static void TearDownTestSuite() {
    delete tmp_;
    tmp_ = nullptr;
  }

  static std::string Generate(const std::string& flags) {
    return absl::StrCat(LongctxBinary(), " generate --checkpoint ", ckpt_, " ", flags);
  }
  static nlohmann::json LastJsonLine(const std::string& out) {
    const size_t at = out.rfind("\n{");
    return nlohmann::json::parse(out.substr(at == std::string::npos ? out.find('{') : at + 1));
  }

  static TempDir* tmp_;
  static std::string ckpt_;
};

TempDir* GenerateCliTest::tmp_ = nullptr;
std::string GenerateCliTest::ckpt_;

TEST_F(GenerateCliTest, GreedyGenerationPrintsAReproducibleContinuation) {
  auto a = RunCommand(Generate("--prompt 'The man said' --max_new_tokens 24 --json"));
  ASSERT_EQ(a.exit_code, 0) << a.output;
  const nlohmann::json j = LastJsonLine(a.output);
  EXPECT_EQ(j["prompt_tokens"], 12);  // byte tokenizer: one token per byte
  const auto tokens = j["tokens"].get<std::vector<int>>();
  EXPECT_FALSE(tokens.empty()) << a.output;
  EXPECT_LE(tokens.size(), 24u);
  if (!j["stopped_at_eos"].get<bool>()) {
    EXPECT_EQ(tokens.size(), 24u);
  }
  for (int t : tokens) {
    EXPECT_GE(t, 0);
    EXPECT_LT(t, 260);
  }
  // The text is the decoded tokens; plain mode prints exactly it.
  auto plain = RunCommand(Generate("--prompt 'The man said' --max_new_tokens 24"));
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  EXPECT_NE(plain.output.find(j["text"].get<std::string>()), std::string::npos) << plain.output;
  // Greedy is deterministic.
  auto again = RunCommand(Generate("--prompt 'The man said' --max_new_tokens 24 --json"));
  ASSERT_EQ(again.exit_code, 0);
  EXPECT_EQ(LastJsonLine(again.output)["tokens"], j["tokens"]);
}

// generate needs the model and its tokenizer, not the training data: with the
// token file moved away it prints the same continuation; eval, which reads
// the data, names the missing path.
TEST_F(GenerateCliTest, GenerateRunsWithoutTheTrainingData) {
  const std::string flags = "--prompt 'The man said' --max_new_tokens 16 --json";
  auto before = RunCommand(Generate(flags));
  ASSERT_EQ(before.exit_code, 0) << before.output;
  const std::string data = *tmp_ / "corpus.ltok", moved = *tmp_ / "corpus.ltok.moved";
  std::filesystem::rename(data, moved);
  auto after = RunCommand(Generate(flags));
  auto eval = RunCommand(absl::StrCat(LongctxBinary(), " eval --checkpoint ", ckpt_));
  std::filesystem::rename(moved, data);
  ASSERT_EQ(after.exit_code, 0) << after.output;
  EXPECT_EQ(LastJsonLine(after.output)["tokens"], LastJsonLine(before.output)["tokens"]);
  EXPECT_NE(eval.exit_code, 0);
  EXPECT_NE(eval.output.find("corpus.ltok"), std::string::npos) << eval.output;
}

TEST_F(GenerateCliTest, SamplingFollowsTheSeed) {
  auto run = [&](int seed) {
    auto r = RunCommand(Generate(absl::StrCat("--prompt 'It was' --max_new_tokens 30 --temperature 1.5 --top_k 40 "
                                              "--json --seed=", seed)));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return LastJsonLine(r.output)["tokens"];
  };
  EXPECT_EQ(run(3), run(3));
  EXPECT_NE(run(3), run(4));
}

// STRING must reach generation, not only its settings: sampling with one seed,
// STRING with S beyond every distance is the identity (the same tokens as
// plain generation), and STRING with S = 10 over a 32-byte prompt changes the
// logits and so the sampled tokens.
TEST_F(GenerateCliTest, GenerateWithStringChangesTheSampledTokens) {
  const std::string base =
      "--prompt 'In the beginning of the year the' --max_new_tokens 30 --temperature 1.5 --top_k 40 --seed=3 --json";
  auto run = [&](const std::string& extra) {
    auto r = RunCommand(Generate(base + extra));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return LastJsonLine(r.output);
  };
  const nlohmann::json plain = run(""), str = run(" --string --string_w 2 --string_rope_scale"),
                       far = run(" --string --string_s 1000");
  EXPECT_EQ(str["string"]["s"], 10);  // data.seq_len 32 / 3
  EXPECT_EQ(str["string"]["w"], 2);
  EXPECT_EQ(str["string"]["rope_scale"], true);
  EXPECT_EQ(far["tokens"], plain["tokens"]) << "STRING with S past every distance must be the identity";
  EXPECT_NE(str["tokens"], plain["tokens"]) << "STRING with S = 10 left a 32-byte prompt's sampling unchanged";
}

TEST_F(GenerateCliTest, EvalWithStringPrintsAFiniteLoss) {
  const std::string eval = absl::StrCat(LongctxBinary(), " eval --checkpoint ", ckpt_);
  auto plain = RunCommand(eval);
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  auto string = RunCommand(eval + " --string");
  ASSERT_EQ(string.exit_code, 0) << string.output;
  const nlohmann::json p = LastJsonLine(plain.output), s = LastJsonLine(string.output);
  const double lp = p["loss"].get<double>(), ls = s["loss"].get<double>();
  EXPECT_TRUE(std::isfinite(ls));
  EXPECT_EQ(s["string"]["s"], 10);
  EXPECT_EQ(s["string"]["w"], 128);
  EXPECT_EQ(s["tokens"], p["tokens"]);
  EXPECT_NE(ls, lp) << "STRING must change a RoPE model's loss when documents exceed S";
  EXPECT_LT(std::fabs(ls - lp), 2.0);  // a different, not a broken, model
  // With S beyond every distance STRING is the identity, to the last bit.
  auto far = RunCommand(eval + " --string --string_s 1000");
  ASSERT_EQ(far.exit_code, 0) << far.output;
  EXPECT_EQ(LastJsonLine(far.output)["loss"].get<double>(), lp);
}

TEST_F(GenerateCliTest, ClearOneLineErrors) {
  auto one_line = [](const std::string& out) { return std::count(out.begin(), out.end(), '\n') == 1; };
  const std::string missing = *tmp_ / "no-such-checkpoint";
  auto r = RunCommand(absl::StrCat(LongctxBinary(), " generate --checkpoint ", missing, " --prompt hi"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(one_line(r.output)) << r.output;
  EXPECT_NE(r.output.find("no-such-checkpoint"), std::string::npos) << r.output;

  // A corrupt copy: weights truncated.
  const std::string bad = *tmp_ / "corrupt";
  std::filesystem::copy(ckpt_, bad);
  const std::string weights = ReadFile(bad + "/model.safetensors");
  ::longctx::testing::WriteFile(bad + "/model.safetensors", weights.substr(0, weights.size() / 2));
  r = RunCommand(absl::StrCat(LongctxBinary(), " generate --checkpoint ", bad, " --prompt hi"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(one_line(r.output)) << r.output;
  EXPECT_NE(r.output.find("model.safetensors"), std::string::npos) << r.output;

  for (const auto& [flags, must_mention] :
       std::vector<std::pair<std::string, std::string>>{{"--prompt hi --temperature -1", "--temperature"},
                                                        {"--prompt hi --top_k -2", "--top_k"},
                                                        {"--prompt hi --max_new_tokens -1", "--max_new_tokens"},
                                                        {"--prompt hi --string --string_s -3", "--string_s"},
                                                        {"", "--prompt"}}) {
    r = RunCommand(Generate(flags));
    EXPECT_EQ(r.exit_code, 1) << flags << "\n" << r.output;
    EXPECT_TRUE(one_line(r.output)) << flags << "\n" << r.output;
    EXPECT_NE(r.output.find(must_mention), std::string::npos) << flags << "\n" << r.output;
  }
}

}  // namespace
}  // namespace longctx
