// Why: `longctx train` with data.sft is the SFT path end to end, at
// CI scale (512/4096-token rows at 3:1 instead of 8,192/65,536, the 53,792-
// parameter tiny-test model, 8,192 tokens a step): the response loss must
// fall; metrics.jsonl must record every step's row length in the schedule's
// 3:1 pattern with its rows and loss tokens; a run stopped in the middle of the
// schedule and resumed must continue bit-identically (losses and weights) to
// an uninterrupted one; the rows of a step must not depend on grad_accum or
// the number of ranks; and
// schedules that cannot work are refused with the field named.
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/support/test_util.h"

namespace longctx {
namespace {

using ::longctx::testing::LongctxBinary;
using ::longctx::testing::MetricsEvents;
using ::longctx::testing::ReadFile;
using ::longctx::testing::RunCommand;
using ::longctx::testing::SourcePath;
using ::longctx::testing::TempDir;
using ::longctx::testing::TrainLosses;
using ::longctx::testing::WriteFile;

// A learnable SFT set: "spell N" → the number in words, "reverse W" → W
// reversed, and a few long "count to N" examples (600–3,000 bytes) that fit
// only the 4,096-token rows. Deterministic.
std::string SftJsonl(int examples) {
  static const char* kWords[] = {"zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"};
  std::string out;
  uint64_t x = 12345;
  auto next = [&x] { x = x * 6364136223846793005ULL + 1442695040888963407ULL; return x >> 33; };
  for (int i = 0; i < examples; ++i) {
    nlohmann::json j;
    if (i % 17 == 16) {
      const int n = 100 + static_cast<int>(next() % 400);
      std::string body;
      for (int k = 1; k <= n; ++k) absl::StrAppend(&body, k, k == n ? "." : ", ");
      j = {{"prompt", absl::StrCat("count to ", n)}, {"response", body}};
    } else if (i % 2 == 0) {
      const int n = static_cast<int>(next() % 10000);
      std::string digits = std::to_string(n), words;
      for (char c : digits) absl::StrAppend(&words, words.empty() ? "" : " ", kWords[c - '0']);
      j = {{"prompt", absl::StrCat("spell ", digits)}, {"response", words}};
    } else {
      std::string w;
      const int len = 3 + static_cast<int>(next() % 12);
      for (int k = 0; k < len; ++k) w.push_back(static_cast<char>('a' + next() % 26));
      j = {{"prompt", absl::StrCat("reverse ", w)}, {"response", std::string(w.rbegin(), w.rend())}};
    }
    out += j.dump() + "\n";
  }
  return out;
}

class SftTrainTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = new TempDir();
    ASSERT_TRUE(::longctx::testing::WriteByteTokenCorpus(*tmp_ / "text", *tmp_ / "corpus.ltok", 60, 5).ok());
    WriteFile(*tmp_ / "sft.jsonl", SftJsonl(600));
    auto r = RunCommand(absl::StrCat(LongctxBinary(), " data sft --input ", *tmp_ / "sft.jsonl", " --out ",
                                     *tmp_ / "sft", " --tokenizer byte"));
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  static void TearDownTestSuite() {
    delete tmp_;
    tmp_ = nullptr;
  }

  // `extra` replaces any of these it gives again (WithFlags).
  static std::string Train(const std::string& out_dir, const std::string& extra) {
    return ::longctx::testing::WithFlags(
        absl::StrCat(LongctxBinary(), " train --config ", SourcePath("configs/tiny-test.textproto"),
                     " --data.path=", *tmp_ / "corpus.ltok", " --data.sft.path=", *tmp_ / "sft",
                     " --data.sft.seq_lens=512,4096 --data.sft.counts=3,1 --data.sft.tokens_per_batch=8192",
                     " --optim.warmup_steps=2 --optim.decay_steps=12 --optim.lr=5e-3 --grad_accum=2",
                     " --out_dir=", out_dir, " --threads=1 --log_every=1 --ckpt_every=100 --posfreq_every=4"),
        extra);
  }

  // Train without --data.path: the SFT examples alone.
  static std::string TrainWithoutCorpus(const std::string& out_dir, const std::string& extra) {
    std::string cmd = Train(out_dir, extra);
    const std::string path = absl::StrCat(" --data.path=", *tmp_ / "corpus.ltok");
    cmd.erase(cmd.find(path), path.size());
    return cmd;
  }

  static TempDir* tmp_;
};
TempDir* SftTrainTest::tmp_ = nullptr;

// An SFT run used to refuse to start without a pretraining corpus
// ("data.path: empty"). It needs one only to evaluate or probe on it: without
// data.path it trains the same steps (bit-identical losses: every batch comes
// from the schedule), skips the final eval, and resumes bit-identically.
TEST_F(SftTrainTest, NeedsNoPretrainingCorpusUnlessItEvaluatesOnOne) {
  const std::string with = *tmp_ / "with_corpus", without = *tmp_ / "without_corpus";
  auto r = RunCommand(Train(with, "--steps=4"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = RunCommand(TrainWithoutCorpus(without, "--steps=4"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("data.path is empty: SFT from data.sft.path alone"), std::string::npos) << r.output;
  const std::map<int, double> a = TrainLosses(with + "/metrics.jsonl"), b = TrainLosses(without + "/metrics.jsonl");
  ASSERT_EQ(a.size(), 4u);
  EXPECT_EQ(a, b);
  EXPECT_TRUE(MetricsEvents(without + "/metrics.jsonl", "eval").empty());
  // Killed after step 2 (a checkpoint there), resumed to 4: the same losses.
  const std::string part = *tmp_ / "without_corpus_resumed";
  r = RunCommand(TrainWithoutCorpus(part, "--steps=2 --ckpt_every=2"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = RunCommand(TrainWithoutCorpus(part, "--steps=4 --ckpt_every=2"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("resum"), std::string::npos) << r.output;
  EXPECT_EQ(TrainLosses(part + "/metrics.jsonl"), a);
  // What does need the corpus says so, naming the field.
  r = RunCommand(TrainWithoutCorpus(*tmp_ / "no_corpus_eval", "--steps=2 --eval_every=1"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("eval_every: 1 evaluates on data.path, which is empty"), std::string::npos) << r.output;
  r = RunCommand(TrainWithoutCorpus(*tmp_ / "no_corpus_probe", "--steps=2 --probe_every=1"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("probe_every: 1 draws the probe's haystacks from data.path"), std::string::npos) << r.output;
}

TEST_F(SftTrainTest, ResponseLossFallsEveryStepLengthLoggedResumeIsBitIdentical) {
  const std::string full = *tmp_ / "full";
  auto r = RunCommand(Train(full, "--steps=12"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("SFT: 512x3,4096x1 (8192 tokens per step)"), std::string::npos) << r.output;

  // Every step's length, 3:1, with the rows that make 8,192 tokens.
  const std::vector<nlohmann::json> train = MetricsEvents(full + "/metrics.jsonl", "train");
  ASSERT_EQ(train.size(), 12u);
  int64_t tokens_seen = 0;
  for (size_t i = 0; i < train.size(); ++i) {
    const int want = i % 4 == 3 ? 4096 : 512;
    EXPECT_EQ(train[i]["step"].get<int>(), static_cast<int>(i) + 1);
    EXPECT_EQ(train[i]["seq_len"].get<int>(), want) << "step " << i + 1;
    EXPECT_EQ(train[i]["rows"].get<int>(), 8192 / want) << "step " << i + 1;
    EXPECT_EQ(train[i]["tokens"].get<int>(), 8192);
    EXPECT_GT(train[i]["loss_tokens"].get<int>(), 0);
    EXPECT_LT(train[i]["loss_tokens"].get<int>(), 8192);  // prompts, headers and padding carry none
    tokens_seen += 8192;
    EXPECT_EQ(train[i]["tokens_seen"].get<int64_t>(), tokens_seen);
  }
  // The response loss falls: the last cycle (3 short + 1 long step) against the first.
  double first = 0, last = 0;
  for (int i = 0; i < 4; ++i) first += train[i]["loss"].get<double>(), last += train[8 + i]["loss"].get<double>();
  EXPECT_LT(last, first - 4 * 1.0) << "first cycle mean " << first / 4 << ", last " << last / 4;

  // Position-frequency counters see the SFT segments, up to the longest length.
  const std::vector<nlohmann::json> posfreq = MetricsEvents(full + "/metrics.jsonl", "posfreq");
  ASSERT_FALSE(posfreq.empty());
  EXPECT_EQ(posfreq.back()["max_len"].get<int>(), 4096);

  // `eval --batch=last_train` rebuilds the last step's first micro-batch from
  // the schedule cursor and recomputes the loss the trainer recorded.
  {
    const nlohmann::json st = nlohmann::json::parse(ReadFile(full + "/step-00000012/trainer_state.json"));
    auto e = RunCommand(absl::StrCat(LongctxBinary(), " eval --checkpoint ", full, "/step-00000012 --batch=last_train"));
    ASSERT_EQ(e.exit_code, 0) << e.output;
    const nlohmann::json j = nlohmann::json::parse(e.output.substr(e.output.rfind('{')));
    EXPECT_EQ(j["loss"].get<double>(), st["checkpoint_batch_loss"].get<double>()) << e.output;
    EXPECT_EQ(j["tokens"].get<int64_t>(), st["checkpoint_batch_tokens"].get<int64_t>()) << e.output;
  }

  // Stopped after step 6 (mid-cycle: step 7 is short, step 8 long), then resumed.
  const std::string split = *tmp_ / "split";
  r = RunCommand(Train(split, "--steps=6"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json state = nlohmann::json::parse(ReadFile(split + "/step-00000006/trainer_state.json"));
  ASSERT_TRUE(state.contains("sft_cursor")) << state.dump();
  EXPECT_EQ(state["sft_cursor"]["batches_emitted"].get<int>(), 6);
  r = RunCommand(Train(split, "--steps=12"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("resumed from"), std::string::npos) << r.output;
  const std::map<int, double> a = TrainLosses(full + "/metrics.jsonl"), b = TrainLosses(split + "/metrics.jsonl");
  ASSERT_EQ(b.size(), 12u);
  for (int s = 1; s <= 12; ++s) EXPECT_EQ(a.at(s), b.at(s)) << "step " << s;  // bit-identical
  const std::vector<nlohmann::json> resumed = MetricsEvents(split + "/metrics.jsonl", "train");
  for (const nlohmann::json& ev : resumed)
    EXPECT_EQ(ev["seq_len"].get<int>(), ev["step"].get<int>() % 4 == 0 ? 4096 : 512) << ev.dump();
  // Another schedule does not resume the run's cursor.
  r = RunCommand(Train(split, "--steps=14 --data.sft.counts=2,1"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("exact resume needs the same schedule"), std::string::npos) << r.output;
  const std::string wa = ReadFile(full + "/step-00000012/model.safetensors");
  const std::string wb = ReadFile(split + "/step-00000012/model.safetensors");
  ASSERT_FALSE(wa.empty());
  EXPECT_TRUE(wa == wb) << "final weights differ after stop-and-resume";
}

TEST_F(SftTrainTest, LogEveryFourStillListsEveryStepsLength) {
  // One "train" event per 4 steps; its window_seq_lens names each step's length.
  const std::string out = *tmp_ / "log4";
  auto r = RunCommand(Train(out, "--steps=8 --log_every=4"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::vector<nlohmann::json> train = MetricsEvents(out + "/metrics.jsonl", "train");
  ASSERT_EQ(train.size(), 2u);
  for (const nlohmann::json& ev : train) {
    EXPECT_EQ(ev["window_seq_lens"], nlohmann::json({512, 512, 512, 4096})) << ev.dump();
    EXPECT_EQ(ev["seq_len"].get<int>(), 4096);
  }
}

TEST_F(SftTrainTest, StepRowsDoNotDependOnGradAccum) {
  // The same 8,192-token steps as one micro-batch instead of two: the same
  // loss up to the order of the sums (one micro-batch sums in another order).
  const std::string one = *tmp_ / "accum1", two = *tmp_ / "accum2";
  auto r = RunCommand(Train(one, "--steps=4 --grad_accum=1"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = RunCommand(Train(two, "--steps=4"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::map<int, double> a = TrainLosses(one + "/metrics.jsonl"), b = TrainLosses(two + "/metrics.jsonl");
  ASSERT_EQ(a.size(), 4u);
  ASSERT_EQ(b.size(), 4u);
  // Step 1 is the same rows through the same weights: equal to float rounding.
  // Later steps follow updates from gradients summed in another order, which
  // AdamW's normalisation amplifies a little.
  EXPECT_NEAR(a.at(1), b.at(1), 1e-6 * a.at(1));
  for (int s = 2; s <= 4; ++s) EXPECT_NEAR(a.at(s), b.at(s), 2e-3 * a.at(s)) << "step " << s;
}

TEST_F(SftTrainTest, TwoRanksTrainTheSameStepsAsOneProcess) {
  // Data parallel: every rank packs every row of the step and takes its
  // share; 2 ranks x grad_accum 1 against 1 process x grad_accum 2 — the same
  // 8,192-token steps, the same losses and weights bit for bit (gradients are
  // summed per micro-batch in fp64 on and across ranks, train/parallel).
  if (RunCommand("command -v mpirun").exit_code != 0) GTEST_SKIP() << "no mpirun";
  const std::string one = *tmp_ / "np1", two = *tmp_ / "np2";
  auto r = RunCommand(Train(one, "--steps=4"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = RunCommand(absl::StrCat(
      "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun --allow-run-as-root --oversubscribe "
      "--bind-to none --mca mpi_yield_when_idle 1 -np 2 ",
      Train(two, "--steps=4 --grad_accum=1")));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::vector<nlohmann::json> a = MetricsEvents(one + "/metrics.jsonl", "train"),
                                    b = MetricsEvents(two + "/metrics.jsonl", "train");
  ASSERT_EQ(a.size(), 4u);
  ASSERT_EQ(b.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(a[i]["seq_len"], b[i]["seq_len"]);
    EXPECT_EQ(a[i]["loss_tokens"], b[i]["loss_tokens"]);
    EXPECT_EQ(a[i]["loss"].get<double>(), b[i]["loss"].get<double>()) << "step " << i + 1;
  }
  EXPECT_TRUE(ReadFile(one + "/step-00000004/model.safetensors") == ReadFile(two + "/step-00000004/model.safetensors"));
}

TEST_F(SftTrainTest, BadSchedulesAreRefusedNamingTheField) {
  // One 4,096-token row cannot be shared by two micro-batches.
  auto r = RunCommand(Train(*tmp_ / "bad1", "--steps=2 --data.sft.tokens_per_batch=4096"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("data.sft: a step of 4096-token rows has 1 rows"), std::string::npos) << r.output;
  // The long "count to N" examples do not fit 1,024-token rows: an error naming one (file:line) ...
  r = RunCommand(Train(*tmp_ / "bad2", "--steps=2 --data.sft.seq_lens=256,1024"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("sft.jsonl:"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("longer than the 1024-token rows"), std::string::npos) << r.output;
  // ... or dropped with a count, or split.
  r = RunCommand(Train(*tmp_ / "drop", "--steps=1 --data.sft.seq_lens=256,1024 --data.sft.long_examples=drop"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("data.sft: dropped "), std::string::npos) << r.output;
  r = RunCommand(Train(*tmp_ / "splitlong", "--steps=1 --data.sft.seq_lens=256,1024 --data.sft.long_examples=split"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  r = RunCommand(Train(*tmp_ / "bad3", "--steps=1 --data.sft.long_examples=truncate"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("data.sft.long_examples: \"truncate\""), std::string::npos) << r.output;
  r = RunCommand(Train(*tmp_ / "bad4", "--steps=1 --data.sft.counts=3"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("data.sft: 2 seq_lens"), std::string::npos) << r.output;
  // A pretraining checkpoint does not resume as SFT.
  r = RunCommand(absl::StrCat(LongctxBinary(), " train --config ", SourcePath("configs/tiny-test.textproto"),
                              " --data.path=", *tmp_ / "corpus.ltok", " --out_dir=", *tmp_ / "pre",
                              " --threads=1 --steps=2"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = RunCommand(Train(*tmp_ / "pre", "--steps=4"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("init_from"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace longctx
