// Why: the retrieval task and the periodic probe through the real CLI: a run
// with retrieval rows and probes, stopped and resumed across a curriculum
// stage, takes exactly the steps (losses, final weights) of an uninterrupted
// run without probes; `longctx eval --batch=last_train` rebuilds the mixed
// batch; the position-frequency counters equal a replay of the mixed batches;
// probes land in metrics.jsonl and out_dir/probe; `longctx probe` reproduces
// the trainer's probe of the same weights.
#include <filesystem>
#include <map>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "data/byte_tokenizer.h"
#include "data/position_frequency.h"
#include "data/text_corpus.h"
#include "gtest/gtest.h"
#include "tests/support/test_util.h"
#include "train/config_loader.h"
#include "train/setup/niah_probe_config.h"
#include "train/setup/backend_for_config.h"
#include "train/setup/config_options.h"
#include "train/trainer.h"

namespace longctx {
namespace {

using ::longctx::testing::LongctxBinary;
using ::longctx::testing::ReadFile;
using ::longctx::testing::RunCommand;
using ::longctx::testing::SourcePath;

class RetrievalProbeIntegrationTest : public ::longctx::testing::TinyCorpusTest {
 protected:
  RetrievalProbeIntegrationTest() : TinyCorpusTest(/*docs=*/120, /*seed=*/13) {}

  // tiny-test with 128-token rows, retrieval on half the rows (one needle,
  // then two from step 6), a fixed LR schedule so runs of different lengths agree.
  std::vector<std::string> Overrides(const std::string& out_dir) const {
    // Two training threads and a one-thread probe (probe_threads' default): the
    // count must come back exactly after every probe.
    return {"data.path=" + data_, "out_dir=" + out_dir, "threads=2", "data.seq_len=128", "model.max_position_embeddings=128",
            "data.eval_fraction=0.1", "data.retrieval_fraction=0.5", "data.retrieval_format=compact",
            "data.retrieval_curriculum=0:1:0,6:2:0", "optim.decay_steps=12", "log_every=1",
            "ckpt_every=3", "keep_checkpoints=10"};
  }
  std::string TrainCommand(const std::string& out_dir, const std::string& extra) const {
    std::string cmd = absl::StrCat(LongctxBinary(), " train --config ", SourcePath("configs/tiny-test.textproto"));
    for (const std::string& o : Overrides(out_dir)) absl::StrAppend(&cmd, " --", o);
    return ::longctx::testing::WithFlags(cmd, extra);  // extra replaces an override it gives again
  }
  static std::vector<nlohmann::json> Events(const std::string& metrics, const std::string& kind) {
    return ::longctx::testing::MetricsEvents(metrics, kind);
  }
  static std::map<int, double> Losses(const std::string& metrics) { return ::longctx::testing::TrainLosses(metrics); }

};

TEST_F(RetrievalProbeIntegrationTest, ResumedRunWithRetrievalAndProbesIsBitIdentical) {
  const std::string straight = tmp_ / "straight", resumed = tmp_ / "resumed";
  auto r = RunCommand(TrainCommand(straight, "--steps=12"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ASSERT_NE(r.output.find("retrieval rows: 50.0% of rows"), std::string::npos) << r.output;
  const std::string probe = "--probe_every=3 --probe_trials=2 --probe_min_len=128 --probe_max_len=256 "
                            "--probe_needles=1 --probe_format=compact";
  r = RunCommand(TrainCommand(resumed, "--steps=7 " + probe));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = RunCommand(TrainCommand(resumed, "--steps=12 " + probe));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ASSERT_NE(r.output.find("resumed from"), std::string::npos) << r.output;
  ASSERT_NE(r.output.find("probe  step 9 | eff len"), std::string::npos) << r.output;

  std::map<int, double> a = Losses(straight + "/metrics.jsonl"), b = Losses(resumed + "/metrics.jsonl");
  ASSERT_EQ(a.size(), 12u);
  for (int s = 1; s <= 12; ++s) EXPECT_EQ(a[s], b[s]) << "step " << s;
  EXPECT_EQ(ReadFile(straight + "/step-00000012/model.safetensors"),
            ReadFile(resumed + "/step-00000012/model.safetensors"));

  // Probes at steps 3, 6, (7: the stop, no probe), 9, 12: events and files.
  std::vector<nlohmann::json> probes = Events(resumed + "/metrics.jsonl", "probe");
  ASSERT_EQ(probes.size(), 4u);
  for (const nlohmann::json& p : probes) {
    const int step = p["step"].get<int>();
    EXPECT_EQ(step % 3, 0);
    EXPECT_TRUE(p.contains("effective_length"));
    ASSERT_EQ(p["lengths"].size(), 2u);  // 128 and 256
    EXPECT_TRUE(p["lengths"][0].contains("pass_rate") && p["lengths"][0].contains("answer_loss"));
    const std::string base = absl::StrFormat("%s/probe/step-%08d", resumed, step);
    EXPECT_TRUE(std::filesystem::exists(base + ".png")) << base;
    nlohmann::json j = nlohmann::json::parse(ReadFile(base + ".json"));
    EXPECT_EQ(j["effective_length"], p["effective_length"]);
    EXPECT_EQ(j["trials"].size(), 4u);
  }

  // eval --batch=last_train rebuilds the mixed last batch: the recorded loss to the bit.
  const std::string ckpt = resumed + "/step-00000012";
  nlohmann::json state = nlohmann::json::parse(ReadFile(ckpt + "/trainer_state.json"));
  auto ev = RunCommand(absl::StrCat(LongctxBinary(), " eval --checkpoint ", ckpt, " --batch=last_train"));
  ASSERT_EQ(ev.exit_code, 0) << ev.output;
  nlohmann::json e = nlohmann::json::parse(ev.output.substr(ev.output.find('{')));
  EXPECT_EQ(e["loss"].get<double>(), state["checkpoint_batch_loss"].get<double>()) << ev.output;

  // The counters saw the retrieval samples' segments: replay packer + mixer.
  absl::StatusOr<TrainConfig> config =
      LoadTrainConfig(SourcePath("configs/tiny-test.textproto"), Overrides(tmp_ / "unused"));
  ASSERT_TRUE(config.ok()) << config.status();
  absl::StatusOr<std::unique_ptr<TokenDataset>> tokens = OpenTrainingData(*config);
  ASSERT_TRUE(tokens.ok());
  absl::StatusOr<std::unique_ptr<Packer>> packer = MakeTrainPacker(*config, tokens->get());
  ASSERT_TRUE(packer.ok());
  PositionFrequency want(128);
  for (int step = 1; step <= 12; ++step) {
    const uint64_t first = (*packer)->cursor().rows_emitted;
    absl::StatusOr<PackedBatch> batch = (*packer)->Next();
    ASSERT_TRUE(batch.ok());
    ASSERT_TRUE(MixRetrievalRows(*config, tokens->get(), step, first, &*batch).ok());
    want.AddCuSeqlens(batch->cu_seqlens);
  }
  absl::StatusOr<PositionFrequency> got = PositionFrequency::FromJson(state["position_frequency"]);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->Counts(), want.Counts());

  // The standalone probe of the step-12 weights answers exactly as the trainer's probe did.
  const std::string out_json = tmp_ / "probe.json";
  auto pr = RunCommand(absl::StrCat(LongctxBinary(), " probe --checkpoint ", ckpt,
                                    " --min_len 128 --max_len 256 --trials 2 --needles 1 --format compact "
                                    "--json_out ", out_json, " --png ", tmp_ / "probe.png"));
  ASSERT_EQ(pr.exit_code, 0) << pr.output;
  nlohmann::json mine = nlohmann::json::parse(ReadFile(out_json));
  nlohmann::json trainer = nlohmann::json::parse(ReadFile(resumed + "/probe/step-00000012.json"));
  ASSERT_EQ(mine["trials"].size(), trainer["trials"].size());
  for (size_t i = 0; i < mine["trials"].size(); ++i) {
    EXPECT_EQ(mine["trials"][i]["numbers"], trainer["trials"][i]["numbers"]);
    EXPECT_EQ(mine["trials"][i]["generated"], trainer["trials"][i]["generated"]);
    EXPECT_EQ(mine["trials"][i]["answer_loss"], trainer["trials"][i]["answer_loss"]);
  }
  EXPECT_TRUE(std::filesystem::exists(tmp_ / "probe.png"));
}

TEST_F(RetrievalProbeIntegrationTest, BadRetrievalAndProbeSettingsNameTheField) {
  struct BadCase {
    std::string overrides, must_mention;
  };
  const std::vector<BadCase> cases = {
      {"--data.retrieval_format=paper", "compact"},  // 1 paper needle does not fit 128 tokens
      {"--data.retrieval_loss=some", "data.retrieval_loss"},
      {"--data.retrieval_curriculum=5:1:0", "data.retrieval_curriculum"},
      {"--probe_every=2 --probe_trials=0", "probe_trials"},
      {"--probe_every=2 --probe_format=pg", "probe_format"},
      {"--probe_every=2 --probe_threads=-1", "probe_threads"},
      {"--probe_every=2 --probe_teacher_forced=true --probe_tf_needles=1,x", "probe_tf_needles"},
      {"--probe_every=2 --probe_teacher_forced=true --probe_tf_trials=0", "probe_tf_trials"},
      {"--probe_every=2 --probe_max_len=100", "probe_max_len"},  // < probe_min_len 128
      {"--probe_every=2 --probe_max_len=200 --probe_needles=4", "probe_max_len"},  // 4 paper needles: 367
  };
  for (const BadCase& c : cases) {
    auto r = RunCommand(TrainCommand(tmp_ / "bad", "--steps=2 " + c.overrides));
    EXPECT_EQ(r.exit_code, 1) << c.overrides << "\n" << r.output;
    EXPECT_NE(r.output.find(c.must_mention), std::string::npos) << c.overrides << "\n" << r.output;
  }
}

}  // namespace
}  // namespace longctx
