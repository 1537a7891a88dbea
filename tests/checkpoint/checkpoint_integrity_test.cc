// Why: the checkpoint findings (corruption, races, partial writes), each as a regression test that fails on
// the code before the fix: corrupt weight bytes loaded silently (now every
// file has a size + XXH64 in manifest.json that loading checks, and `train`
// falls back to the previous checkpoint), a bad trainer_state.json crashed or
// was accepted, a step directory without COMPLETE was ignored silently, a
// finished run was rewritten by running `train` again, NaN weights were saved,
// and a resume with another grad_accum was refused although the global batch
// was the same.
#include <sys/mount.h>

#include <filesystem>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/backend.h"
#include "kernels/backend_registry.h"
#include "model/config.h"
#include "model/transformer.h"
#include "tests/support/test_util.h"
#include "train/checkpoint/checkpoint.h"
#include "train/checkpoint/manifest.h"
#include "train/checkpoint/checkpoint_dir.h"
#include "train/config_loader.h"

namespace longctx {
namespace {

using ::longctx::testing::LongctxBinary;
using ::longctx::testing::ReadFile;
using ::longctx::testing::RunCommand;
using ::longctx::testing::SourcePath;
using ::longctx::testing::WriteFile;

namespace fs = std::filesystem;

class CheckpointIntegrityTest : public ::longctx::testing::TinyCorpusTest {
 protected:
  CheckpointIntegrityTest() : TinyCorpusTest(/*docs=*/60, /*seed=*/5) {}

  std::string Train(const std::string& out_dir, const std::string& extra) {
    return ::longctx::testing::TinyTrainCommand(data_, out_dir, absl::StrCat("--log_every=1 ", extra, " 2>&1"));
  }
  std::string Eval(const std::string& ckpt, const std::string& extra = "") {
    return absl::StrCat(LongctxBinary(), " eval --checkpoint ", ckpt, " ", extra, " 2>&1");
  }
  // Trains `steps` steps with a checkpoint every step (keep 3) into a new out_dir.
  std::string TrainedRun(const std::string& name, int steps) {
    const std::string out = tmp_ / name;
    auto r = RunCommand(Train(out, absl::StrCat("--steps=", steps, " --ckpt_every=1 --keep_checkpoints=3")));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return out;
  }
  static void FlipByte(const std::string& path, int64_t offset) {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(offset);
    char c = 0;
    f.read(&c, 1);
    c = static_cast<char>(c ^ 0x10);
    f.seekp(offset);
    f.write(&c, 1);
  }
};

TEST_F(CheckpointIntegrityTest, ManifestListsEveryFileAndLatestPointsAtNewest) {
  const std::string out = TrainedRun("run", 2);
  const std::string ckpt = out + "/step-00000002";
  nlohmann::json m = nlohmann::json::parse(ReadFile(ckpt + "/manifest.json"));
  EXPECT_EQ(m["step"], 2);
  EXPECT_EQ(m["world_size"], 1);
  EXPECT_EQ(m["mode"], "DDP");
  for (const char* f : {kModelFile, kOptimizerFile, kHfConfigFile, kTrainConfigFile, kTrainerStateFile}) {
    ASSERT_TRUE(m["files"].contains(f)) << f;
    EXPECT_EQ(m["files"][f]["size"].get<int64_t>(), static_cast<int64_t>(fs::file_size(ckpt + "/" + f))) << f;
  }
  EXPECT_EQ(ReadFile(out + "/latest"), "step-00000002\n");
  EXPECT_TRUE(VerifyCheckpointFiles(ckpt).ok());
}

// The probe's 62 corruptions of model.safetensors data bytes: every one is now
// an error naming the file (before: all 62 loaded).
TEST_F(CheckpointIntegrityTest, EveryCorruptWeightByteIsAnErrorNamingTheFile) {
  const std::string out = TrainedRun("run", 1);
  const std::string ckpt = out + "/step-00000001";
  const std::string model = ckpt + "/" + kModelFile;
  absl::StatusOr<TrainConfig> config = LoadCheckpointConfig(ckpt);
  ASSERT_TRUE(config.ok());
  absl::StatusOr<ModelDims> dims = ResolveModelConfig(config->model());
  ASSERT_TRUE(dims.ok());
  absl::StatusOr<std::unique_ptr<Backend>> be = MakeBackend("cpu", BackendSettings{});
  ASSERT_TRUE(be.ok());
  Transformer t(*dims, be->get(), DType::kF32);
  ASSERT_TRUE(LoadModelWeights(ckpt, &t).ok());
  const int64_t size = static_cast<int64_t>(fs::file_size(model));
  const std::string pristine = ReadFile(model);
  int errors = 0;
  for (int i = 0; i < 62; ++i) {
    const int64_t offset = size - 1 - (i * 7919) % (size / 2);  // spread over the data half of the file
    FlipByte(model, offset);
    absl::Status st = LoadModelWeights(ckpt, &t);
    if (!st.ok() && st.code() == absl::StatusCode::kDataLoss &&
        std::string(st.message()).find(model) != std::string::npos)
      ++errors;
    else
      ADD_FAILURE() << "offset " << offset << ": " << st;
    WriteFile(model, pristine);
  }
  EXPECT_EQ(errors, 62);
  // Through the CLI: eval refuses and names the file.
  FlipByte(model, size - 3);
  auto r = RunCommand(Eval(ckpt));
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("model.safetensors: corrupt checkpoint file"), std::string::npos) << r.output;
}

TEST_F(CheckpointIntegrityTest, TrainFallsBackFromACorruptCheckpointNamingBoth) {
  const std::string out = TrainedRun("run", 2);
  const std::string bad = out + "/step-00000002";
  FlipByte(bad + "/" + kOptimizerFile, static_cast<int64_t>(fs::file_size(bad + "/" + kOptimizerFile)) - 5);
  auto r = RunCommand(Train(out, "--steps=3 --ckpt_every=1 --keep_checkpoints=3"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("checkpoint " + bad + " is corrupt"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("optimizer.safetensors: corrupt checkpoint file"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("falling back to the previous complete checkpoint " + out + "/step-00000001"),
            std::string::npos)
      << r.output;
  // It resumed at step 1: steps 2 and 3 were retrained, step 2 rewritten whole.
  EXPECT_TRUE(VerifyCheckpointFiles(bad).ok());
  EXPECT_TRUE(fs::exists(out + "/step-00000003/COMPLETE"));

  // With nothing to fall back to: a refusal, not a silent restart from step 0.
  const std::string lone = TrainedRun("lone", 1);
  FlipByte(lone + "/step-00000001/" + kModelFile, 100);
  r = RunCommand(Train(lone, "--steps=2 --ckpt_every=1"));
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("no older complete checkpoint"), std::string::npos) << r.output;
}

TEST_F(CheckpointIntegrityTest, BadTrainerStateStepIsAnErrorNamingFileAndField) {
  const std::string out = TrainedRun("run", 1);
  const std::string ckpt = out + "/step-00000001";
  const std::string state_path = ckpt + "/" + kTrainerStateFile;
  const nlohmann::json good = nlohmann::json::parse(ReadFile(state_path));
  struct Case {
    nlohmann::json step;
    const char* says;
  };
  const std::vector<Case> cases = {{"abc", "not an integer"},
                                   {-5, "outside [0, 2^53]"},
                                   {int64_t{1} << 62, "outside [0, 2^53]"},
                                   {1.5, "not an integer"}};
  for (const Case& c : cases) {
    nlohmann::json s = good;
    s["step"] = c.step;
    WriteFile(state_path, s.dump());
    const std::string want = absl::StrCat(state_path, ": field \"step\" is ", c.step.dump(), ", ", c.says);
    // Direct, then through eval (was: uncaught nlohmann type_error) and train
    // (was: Check failed in AdamW / exit 0 without training). The manifest's
    // checksum of trainer_state.json no longer matches; train reports that.
    absl::StatusOr<nlohmann::json> loaded = LoadTrainerState(ckpt);
    ASSERT_FALSE(loaded.ok());
    EXPECT_EQ(loaded.status().message(), want);
    auto r = RunCommand(Eval(ckpt, "--batch=last_train"));
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_NE(r.output.find(want), std::string::npos) << c.step.dump() << ": " << r.output;
  }
  // A trainer_state that passes its checksum but contradicts itself (step
  // vs tokens_seen): train refuses, naming the file and both fields.
  nlohmann::json s = good;
  s["step"] = 1000;
  WriteFile(state_path, s.dump());
  {  // The manifest vouches for the edited file (resume needs a manifest).
    nlohmann::json m = nlohmann::json::parse(ReadFile(ckpt + "/" + kManifestFile));
    absl::StatusOr<FileDigest> d = HashFile(state_path);
    ASSERT_TRUE(d.ok()) << d.status();
    m["files"][kTrainerStateFile] = {{"size", d->size}, {"xxh64", Hex64(d->xxh64)}};
    WriteFile(ckpt + "/" + kManifestFile, m.dump(2));
  }
  auto r = RunCommand(Train(out, "--steps=3"));
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(absl::StrCat(state_path, ": field \"step\" (1000) and \"tokens_seen\"")), std::string::npos)
      << r.output;
}

TEST_F(CheckpointIntegrityTest, StepDirectoryWithoutCompleteIsNamed) {
  const std::string out = TrainedRun("run", 2);
  fs::remove(out + "/step-00000002/COMPLETE");
  auto r = RunCommand(Train(out, "--steps=3 --ckpt_every=1"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(out + "/step-00000002 has no COMPLETE marker"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("resuming from " + out + "/step-00000001"), std::string::npos) << r.output;
}

TEST_F(CheckpointIntegrityTest, FinishedRunStaysAsItWas) {
  const std::string out = TrainedRun("run", 2);
  const std::string ckpt = out + "/step-00000002";
  const std::string state = ReadFile(ckpt + "/" + kTrainerStateFile);
  const std::string metrics = ReadFile(out + "/metrics.jsonl");
  const auto mtime = fs::last_write_time(ckpt + "/" + kModelFile);
  auto r = RunCommand(Train(out, "--steps=2 --ckpt_every=1 --keep_checkpoints=3"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("already at step 2"), std::string::npos) << r.output;
  EXPECT_EQ(ReadFile(ckpt + "/" + kTrainerStateFile), state);
  EXPECT_EQ(ReadFile(out + "/metrics.jsonl"), metrics);
  EXPECT_EQ(fs::last_write_time(ckpt + "/" + kModelFile), mtime);
  EXPECT_NE(nlohmann::json::parse(state).value("checkpoint_batch_loss", 0.0), 0.0);
}

TEST_F(CheckpointIntegrityTest, NonFiniteWeightsAreNeverSaved) {
  absl::StatusOr<TrainConfig> config = LoadTrainConfig(SourcePath("configs/tiny-test.textproto"), {});
  ASSERT_TRUE(config.ok());
  absl::StatusOr<ModelDims> dims = ResolveModelConfig(config->model());
  ASSERT_TRUE(dims.ok());
  absl::StatusOr<std::unique_ptr<Backend>> be = MakeBackend("cpu", BackendSettings{});
  ASSERT_TRUE(be.ok());
  Transformer t(*dims, be->get(), DType::kF32);
  t.InitParams(1);
  ParamStore& p = t.params();
  std::vector<float> host(p.layout().buffer_size(1));
  p.CopyToHost(1, host.data());
  host[3] = std::numeric_limits<float>::quiet_NaN();
  p.CopyFromHost(1, host.data());
  const std::string out = tmp_ / "nan";
  absl::StatusOr<std::string> saved = SaveCheckpoint(out, 7, *config, t, nullptr, nlohmann::json{{"step", 7}}, 2, 1, 2);
  ASSERT_FALSE(saved.ok());
  EXPECT_NE(std::string(saved.status().message()).find("checkpoint at step 7"), std::string::npos) << saved.status();
  EXPECT_NE(std::string(saved.status().message()).find("non-finite"), std::string::npos) << saved.status();
  absl::StatusOr<std::optional<std::string>> latest = FindLatestCheckpoint(out);
  ASSERT_TRUE(latest.ok());
  EXPECT_FALSE(latest->has_value());
}

// eval on NaN weights (here: a checkpoint from before manifests whose data
// bytes were overwritten) prints valid JSON with a null loss and an error, and
// exits 1 (was `{"loss": nan}` and exit 0).
TEST_F(CheckpointIntegrityTest, EvalOfNonFiniteLossPrintsValidJsonAndFails) {
  const std::string out = TrainedRun("run", 1);
  const std::string ckpt = out + "/step-00000001";
  const std::string model = ckpt + "/" + kModelFile;
  std::string bytes = ReadFile(model);
  uint64_t header = 0;
  std::memcpy(&header, bytes.data(), 8);
  const uint32_t nan_bits = 0x7fc00000u;
  for (size_t i = 8 + header; i + 4 <= bytes.size(); i += 4) std::memcpy(&bytes[i], &nan_bits, 4);
  WriteFile(model, bytes);
  fs::remove(ckpt + "/" + kManifestFile);
  auto r = RunCommand(absl::StrCat(LongctxBinary(), " eval --checkpoint ", ckpt, " --batch=eval 2>/dev/null"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  // stdout's line (RunCommand captures stderr's "longctx: error: ..." too).
  const size_t brace = r.output.find('{');
  ASSERT_NE(brace, std::string::npos) << r.output;
  const std::string line = r.output.substr(brace, r.output.find('\n', brace) - brace);
  nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(j.is_discarded()) << r.output;
  EXPECT_TRUE(j["loss"].is_null()) << r.output;
  EXPECT_NE(j.value("error", std::string()).find("non-finite loss"), std::string::npos) << r.output;
}

// The global batch, not grad_accum, must match: 2 x 2 x 1 = 2 x 1 x 2 rows.
TEST_F(CheckpointIntegrityTest, ResumeKeepsTheGlobalBatchNotGradAccum) {
  const std::string out = tmp_ / "run";
  auto r = RunCommand(Train(out, "--steps=2 --ckpt_every=1 --grad_accum=2"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = RunCommand(Train(out, "--steps=3 --ckpt_every=1 --grad_accum=3"));
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("global batch is 4 rows per step"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("use --grad_accum=2 on 1 ranks"), std::string::npos) << r.output;
}

// `checkpoint consolidate`: eval and generate read the output and print what
// they print for the checkpoint itself.
TEST_F(CheckpointIntegrityTest, ConsolidatedCheckpointEvaluatesLikeTheOriginal) {
  const std::string out = TrainedRun("run", 2);
  const std::string ckpt = out + "/step-00000002";
  const std::string hf = tmp_ / "hf";
  auto r = RunCommand(absl::StrCat(LongctxBinary(), " checkpoint consolidate --checkpoint ", ckpt, " --out ", hf, " 2>&1"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(fs::exists(hf + "/model.safetensors"));
  EXPECT_TRUE(fs::exists(hf + "/config.json"));
  EXPECT_FALSE(fs::exists(hf + "/optimizer.safetensors"));
  EXPECT_TRUE(VerifyCheckpointFiles(hf).ok());
  for (const char* batch : {"eval", "last_train"}) {
    auto a = RunCommand(absl::StrCat(LongctxBinary(), " eval --checkpoint ", ckpt, " --batch=", batch, " 2>/dev/null"));
    auto b = RunCommand(absl::StrCat(LongctxBinary(), " eval --checkpoint ", hf, " --batch=", batch, " 2>/dev/null"));
    ASSERT_EQ(a.exit_code, 0) << a.output;
    ASSERT_EQ(b.exit_code, 0) << b.output;
    nlohmann::json ja = nlohmann::json::parse(a.output), jb = nlohmann::json::parse(b.output);
    EXPECT_EQ(ja["loss"].get<double>(), jb["loss"].get<double>()) << batch;
    EXPECT_EQ(ja["tokens"], jb["tokens"]) << batch;
  }
  const std::string gen = " --prompt 'The cat' --max_new_tokens 8 2>/dev/null";
  auto ga = RunCommand(absl::StrCat(LongctxBinary(), " generate --checkpoint ", ckpt, gen));
  auto gb = RunCommand(absl::StrCat(LongctxBinary(), " generate --checkpoint ", hf, gen));
  ASSERT_EQ(ga.exit_code, 0) << ga.output;
  EXPECT_EQ(ga.output, gb.output);
  // Refuses to overwrite, and a corrupt source is an error naming the file.
  r = RunCommand(absl::StrCat(LongctxBinary(), " checkpoint consolidate --checkpoint ", ckpt, " --out ", hf, " 2>&1"));
  EXPECT_NE(r.exit_code, 0) << r.output;
  FlipByte(ckpt + "/" + kModelFile, 200);
  r = RunCommand(absl::StrCat(LongctxBinary(), " checkpoint consolidate --checkpoint ", ckpt, " --out ", tmp_ / "hf2",
                              " 2>&1"));
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(ckpt + "/model.safetensors: corrupt checkpoint file"), std::string::npos) << r.output;
}

// A full disk during a save: a clear error, the previous checkpoint intact and
// loadable, no temporary directory left. out_dir is a 1.2 MB tmpfs (root only):
// one checkpoint of the tiny model (~0.65 MB) fits, the second does not.
TEST_F(CheckpointIntegrityTest, FullDiskDuringSaveKeepsThePreviousCheckpoint) {
  const std::string out = tmp_ / "small";
  fs::create_directories(out);
  if (mount("tmpfs", out.c_str(), "tmpfs", 0, "size=1200k") != 0)
    GTEST_SKIP() << "cannot mount a tmpfs at " << out << " (needs root): " << std::strerror(errno);
  struct Unmount {
    std::string p;
    ~Unmount() { umount2(p.c_str(), MNT_DETACH); }
  } unmount{out};
  auto r = RunCommand(Train(out, "--steps=4 --ckpt_every=1 --keep_checkpoints=2"));
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("No space left on device"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("the previous checkpoint " + out + "/step-00000001 is intact"), std::string::npos)
      << r.output;
  EXPECT_TRUE(VerifyCheckpointFiles(out + "/step-00000001").ok());
  absl::StatusOr<std::optional<std::string>> latest = FindLatestCheckpoint(out);
  ASSERT_TRUE(latest.ok());
  EXPECT_EQ(latest->value_or(""), out + "/step-00000001");
  for (const auto& e : fs::directory_iterator(out))
    EXPECT_NE(e.path().filename().string().rfind(".tmp-", 0), 0u) << e.path();
}

}  // namespace
}  // namespace longctx
