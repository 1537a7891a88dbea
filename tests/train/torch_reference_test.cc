// Why: a speed ratio against PyTorch is only meaningful if the PyTorch model
// is the same model. These tests build bench/torch_reference.py's model from
// the spec longctx hands it and require the same parameter count as
// `longctx plan` (ref-b, its RNoPE-SWA twin, and tiny-test with qk-norm and
// tied embeddings, which take other branches of the script), and run
// `longctx bench --peer=pytorch` end to end on the tiny model: three JSON
// lines, the same parameter count, consistent ratios. Without Debian's
// python3-torch they are skipped with a message saying so, never passed. No
// timing thresholds.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "model/config.h"
#include "model/plan.h"
#include "tests/support/test_util.h"
#include "train/bench.h"
#include "train/config_loader.h"

namespace longctx {
namespace {

using ::longctx::testing::LongctxBinary;
using ::longctx::testing::RunCommand;
using ::longctx::testing::SourcePath;

constexpr char kPython[] = "/usr/bin/python3";

bool TorchAvailable() { return RunCommand(absl::StrCat(kPython, " -c 'import torch'")).exit_code == 0; }

#define SKIP_WITHOUT_TORCH()                                                                           \
  if (!TorchAvailable())                                                                               \
  GTEST_SKIP() << kPython << " cannot import torch: install Debian's python3-torch "                   \
               << "(bash scripts/setup_bench.sh) to run the PyTorch reference checks"

// Total parameters `longctx plan --json` reports for a config.
int64_t PlanParams(const std::string& config, const std::string& extra) {
  const auto r = RunCommand(absl::StrCat(LongctxBinary(), " plan --json --config ", config, " ", extra));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json j = nlohmann::json::parse(r.output, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return -1;
  return j["params"]["total"].get<int64_t>();
}

int64_t TorchParams(const std::string& config, const std::vector<std::string>& overrides) {
  absl::StatusOr<TrainConfig> c = LoadTrainConfig(config, overrides);
  EXPECT_TRUE(c.ok()) << c.status();
  absl::StatusOr<ModelDims> dims = ResolveModelConfig(c->model());
  EXPECT_TRUE(dims.ok()) << dims.status();
  const nlohmann::json spec = TorchPeerSpec(*c, *dims, /*threads=*/1, /*steps=*/1, /*warmup=*/0, 1.0);
  absl::StatusOr<nlohmann::json> r = RunTorchPeer(spec, PeerOptions{}, /*count_params_only=*/true);
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return -1;
  return r->value("params", int64_t{-1});
}

TEST(TorchReferenceTest, SameParameterCountAsPlan) {
  SKIP_WITHOUT_TORCH();
  const std::string ref_b = SourcePath("configs/ref-b.textproto");
  EXPECT_EQ(PlanParams(ref_b, ""), 56369664);
  EXPECT_EQ(TorchParams(ref_b, {}), 56369664);
  const std::string swa = SourcePath("configs/ref-b-rnope-swa.textproto");
  EXPECT_EQ(TorchParams(swa, {}), PlanParams(swa, ""));
  const std::string tiny = SourcePath("configs/tiny-test.textproto");
  EXPECT_EQ(TorchParams(tiny, {"model.qk_norm=true", "model.tie_embeddings=true"}),
            PlanParams(tiny, "--model.qk_norm=true --model.tie_embeddings=true"));
}

std::vector<nlohmann::json> JsonLines(const std::string& output) {
  std::vector<nlohmann::json> out;
  for (absl::string_view line : absl::StrSplit(output, '\n', absl::SkipWhitespace())) {
    if (line.empty() || line[0] != '{') continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_object()) out.push_back(j);
  }
  return out;
}

TEST(TorchReferenceTest, BenchWithPeerPrintsBothSystemsAndRatios) {
  SKIP_WITHOUT_TORCH();
  const auto r = RunCommand(absl::StrCat(LongctxBinary(), " bench --config ", SourcePath("configs/tiny-test.textproto"),
                                         " --steps=1 --warmup=0 --threads=1 --peer=pytorch"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::vector<nlohmann::json> lines = JsonLines(r.output);
  ASSERT_EQ(lines.size(), 3u) << r.output;
  const nlohmann::json &ours = lines[0], &peer = lines[1], &cmp = lines[2];
  EXPECT_EQ(ours.value("system", ""), "longctx");
  EXPECT_EQ(peer.value("system", ""), "pytorch");
  EXPECT_EQ(cmp.value("system", ""), "comparison");
  EXPECT_EQ(peer.value("params", 0), ours.value("params", 0));
  EXPECT_EQ(peer.value("tokens_per_step", 0), ours.value("tokens_per_step", 0));
  EXPECT_EQ(peer.value("threads", 0), 1);
  EXPECT_EQ(peer.value("precision", ""), "fp32");
  // Same FLOPs per token credited to both.
  EXPECT_DOUBLE_EQ(peer.value("flops_per_token", 0.0), ours.value("flops_per_token", -1.0));
  const double ratio = cmp.value("tokens_per_s_ratio", 0.0);
  EXPECT_NEAR(ratio, ours.value("tokens_per_s", 0.0) / peer.value("tokens_per_s", 1.0), 1e-9 * ratio);
  EXPECT_NEAR(cmp.value("pytorch_fraction_of_peak", 0.0),
              peer.value("gflops", 0.0) / ours.value("peak_gflops", 1.0), 1e-12);
  // Both start from random weights on random tokens: loss near ln(vocab 260).
  EXPECT_NEAR(peer.value("last_loss", 0.0), 5.56, 0.5);
  EXPECT_NEAR(ours.value("last_loss", 0.0), 5.56, 0.5);
}

TEST(TorchReferenceTest, MissingTorchNamesTheDebianPackage) {
  // An interpreter that cannot import torch (`false` exits 1 for anything).
  const auto r = RunCommand(absl::StrCat(LongctxBinary(), " bench --config ", SourcePath("configs/tiny-test.textproto"),
                                         " --steps=1 --warmup=0 --threads=1 --peer=pytorch --python=/bin/false"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("python3-torch"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace longctx
