// Why: the trainer end to end, through the real CLI binary where it matters:
// the loss falls; `longctx eval` reproduces the loss the trainer recorded for
// the saved weights; a run killed with SIGKILL resumes from its last complete
// checkpoint and then takes exactly the steps an uninterrupted run takes;
// bad configs give one-line errors naming the field.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <thread>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "data/byte_tokenizer.h"
#include "data/packer.h"
#include "data/position_frequency.h"
#include "data/token_file.h"
#include "data/text_corpus.h"
#include "gtest/gtest.h"
#include "tests/support/test_util.h"

namespace longctx {
namespace {

using ::longctx::testing::LongctxBinary;
using ::longctx::testing::ReadFile;
using ::longctx::testing::RunCommand;
using ::longctx::testing::SourcePath;

class TrainIntegrationTest : public ::longctx::testing::TinyCorpusTest {
 protected:
  // `longctx train` on the tiny test config with extra overrides.
  std::string TrainCommand(const std::string& out_dir, const std::string& extra) {
    return ::longctx::testing::TinyTrainCommand(data_, out_dir, extra);
  }

  static std::map<int, double> Losses(const std::string& metrics_path) {
    return ::longctx::testing::TrainLosses(metrics_path);
  }
};

TEST_F(TrainIntegrationTest, LossFallsAndEvalReproducesCheckpointLoss) {
  const std::string out = tmp_ / "run";
  auto r = RunCommand(TrainCommand(out, "--steps=80 --log_every=1 --ckpt_every=40 --optim.lr=3e-3 "
                                        "--optim.warmup_steps=5"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::map<int, double> losses = Losses(out + "/metrics.jsonl");
  ASSERT_EQ(losses.size(), 80u);
  // Byte-level loss starts near ln(260) = 5.56 and must fall clearly.
  EXPECT_GT(losses[1], 5.0);
  EXPECT_LT(losses[80], losses[1] - 1.5) << r.output;

  const std::string ckpt = out + "/step-00000080";
  ASSERT_TRUE(std::filesystem::exists(ckpt + "/model.safetensors"));
  ASSERT_TRUE(std::filesystem::exists(ckpt + "/config.json"));
  nlohmann::json state = nlohmann::json::parse(ReadFile(ckpt + "/trainer_state.json"));
  auto ev = RunCommand(absl::StrCat(LongctxBinary(), " eval --checkpoint ", ckpt, " --batch=last_train"));
  ASSERT_EQ(ev.exit_code, 0) << ev.output;
  nlohmann::json j = nlohmann::json::parse(ev.output.substr(ev.output.find('{')));
  // Same weights, same batch, same code: identical to the last bit.
  EXPECT_EQ(j["loss"].get<double>(), state["checkpoint_batch_loss"].get<double>()) << ev.output;
  // And that loss is close to the last training losses (weights moved one step).
  EXPECT_NEAR(j["loss"].get<double>(), losses[80], 0.3);
}

// The trainer's live counters equal Eq. 2 recomputed from the batches it
// trained on (replayed by a fresh packer), are logged, and survive a resume.
TEST_F(TrainIntegrationTest, PositionFrequencyCountsTheTrainedSegments) {
  const std::string out = tmp_ / "pf";
  auto r = RunCommand(TrainCommand(out, "--steps=6 --grad_accum=2 --ckpt_every=3 --posfreq_every=2"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = RunCommand(TrainCommand(out, "--steps=9 --grad_accum=2 --ckpt_every=3 --posfreq_every=2"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  nlohmann::json state = nlohmann::json::parse(ReadFile(out + "/step-00000009/trainer_state.json"));
  absl::StatusOr<PositionFrequency> pf = PositionFrequency::FromJson(state["position_frequency"]);
  ASSERT_TRUE(pf.ok()) << pf.status();

  absl::StatusOr<TokenFileReader> reader = TokenFileReader::Open(data_);
  ASSERT_TRUE(reader.ok());
  PackerOptions o;
  o.seq_len = 32;  // configs/tiny-test.textproto
  o.batch_size = 2;
  o.shuffle_seed = 1234;
  o.eval_fraction = 0.02;
  o.split = PackerSplit::kTrain;
  absl::StatusOr<Packer> packer = Packer::Create(&*reader, o);
  ASSERT_TRUE(packer.ok());
  PositionFrequency want(32);
  for (int b = 0; b < 9 * 2; ++b) {
    absl::StatusOr<PackedBatch> batch = packer->Next();
    ASSERT_TRUE(batch.ok());
    for (size_t i = 1; i < batch->cu_seqlens.size(); ++i) {
      const int64_t s = batch->cu_seqlens[i] - batch->cu_seqlens[i - 1];
      want.AddSegment(s);
    }
  }
  EXPECT_EQ(pf->Counts(), want.Counts());
  EXPECT_EQ(pf->Counts(8), want.Counts(8));  // tiny-test: window 8
  // Logged as metrics events with both layer kinds of the RNoPE-SWA model.
  int events = 0;
  for (absl::string_view line : absl::StrSplit(ReadFile(out + "/metrics.jsonl"), '\n', absl::SkipEmpty())) {
    nlohmann::json j = nlohmann::json::parse(line);
    if (j["kind"] != "posfreq") continue;
    ++events;
    EXPECT_TRUE(j.contains("full") && j.contains("sliding")) << line;
    EXPECT_EQ(j["sliding"]["largest_i_with_k"].get<int>(), 7) << line;  // i < w = 8
  }
  EXPECT_GE(events, 4);
}

TEST_F(TrainIntegrationTest, KilledRunResumesWithIdenticalNextSteps) {
  // Bigger than tiny-test so that steps take milliseconds and the kill lands mid-run.
  const std::string model = "--model.hidden_size=96 --model.ffn_hidden_size=256 --data.seq_len=96 --model.max_position_embeddings=96 ";
  const std::string common = model + "--steps=60 --log_every=1 --ckpt_every=5 --keep_checkpoints=3";
  const std::string full = tmp_ / "full", killed = tmp_ / "killed";
  auto r = RunCommand(TrainCommand(full, common));
  ASSERT_EQ(r.exit_code, 0) << r.output;

  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const std::string cmd = TrainCommand(killed, common) + " > " + (tmp_ / "killed.log");
    execl("/bin/sh", "sh", "-c", ("exec " + cmd).c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  const std::string marker = killed + "/step-00000010/COMPLETE";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (!std::filesystem::exists(marker) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status)) << "the run finished before it could be killed; make it slower";
  ASSERT_FALSE(std::filesystem::exists(killed + "/step-00000060")) << "killed run must not have finished";

  auto resumed = RunCommand(TrainCommand(killed, common));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  ASSERT_NE(resumed.output.find("resumed from"), std::string::npos) << resumed.output;
  std::map<int, double> a = Losses(full + "/metrics.jsonl"), b = Losses(killed + "/metrics.jsonl");
  ASSERT_EQ(a.size(), 60u);
  ASSERT_EQ(b.size(), 60u);
  for (int s = 1; s <= 60; ++s) EXPECT_EQ(a[s], b[s]) << "step " << s;
  // Final weights identical too.
  EXPECT_EQ(ReadFile(full + "/step-00000060/model.safetensors"), ReadFile(killed + "/step-00000060/model.safetensors"));
}

// A diverging run stops at the first non-finite loss with an error naming the
// step, and leaves the checkpoints written before it complete and loadable.
TEST_F(TrainIntegrationTest, NonFiniteLossStopsWithAClearErrorAndKeepsCheckpoints) {
  const std::string out = tmp_ / "nan";
  auto r = RunCommand(TrainCommand(out, "--steps=20 --ckpt_every=1 --keep_checkpoints=50 --optim.lr=1e30 "
                                        "--optim.warmup_steps=0 --optim.grad_clip=0"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("training loss is"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("stopping without updating or saving"), std::string::npos) << r.output;
  // Every checkpoint present is complete and evaluates.
  int complete = 0;
  for (const auto& e : std::filesystem::directory_iterator(out)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("step-", 0) != 0) continue;
    ASSERT_TRUE(std::filesystem::exists(e.path() / "COMPLETE")) << name;
    ++complete;
  }
  ASSERT_GE(complete, 1) << r.output;
  ASSERT_FALSE(std::filesystem::exists(out + "/step-00000020"));
}

TEST_F(TrainIntegrationTest, BadConfigsGiveOneLineErrorsNamingTheField) {
  struct BadCase {
    std::string overrides;
    std::string must_mention;
  };
  const std::vector<BadCase> cases = {
      {"--model.num_heads=5", "model.num_heads"},
      {"--model.sliding_window=0 --model.layer_pattern=RNOPE_SWA", "model.sliding_window"},
      {"--model.sliding_window=-4 --model.layer_pattern=RNOPE_SWA", "model.sliding_window"},
      {"--model.hiden_size=64", "hiden_size"},
      {"--model.num_kv_heads=3", "model.num_kv_heads"},
      {"--data.seq_len=0", "data.seq_len"},
  };
  for (const BadCase& c : cases) {
    auto r = RunCommand(TrainCommand(tmp_ / "bad", c.overrides));
    EXPECT_EQ(r.exit_code, 1) << c.overrides << "\n" << r.output;
    EXPECT_NE(r.output.find(c.must_mention), std::string::npos) << c.overrides << "\n" << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << c.overrides << "\n" << r.output;
  }
  // An unknown field inside the file: file:line:col and the field name.
  std::string text = ReadFile(SourcePath("configs/tiny-test.textproto"));
  ASSERT_NE(text.find("model {"), std::string::npos);
  text.replace(text.find("model {"), 7, "model {\n  hiden_size: 3");
  ::longctx::testing::WriteFile(tmp_ / "bad.textproto", text);
  auto r = RunCommand(absl::StrCat(LongctxBinary(), " train --config ", tmp_ / "bad.textproto"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("hiden_size"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("bad.textproto:"), std::string::npos) << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
}

}  // namespace
}  // namespace longctx
