// Why: the `longctx` command table (train/cli/command_table.h) through the real
// binary: every command answers `--help` with its own usage and exit 0 (and
// none has gone missing from the table); `--flag value` means `--flag=value`,
// also for TrainConfig overrides, down to identical training losses; a flag
// the command does not take, a stray argument and a misspelt override are
// errors that name the command and the flag; bench's own flags parse;
// `--version` names the release.
#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/version.h"
#include "gtest/gtest.h"
#include "tests/support/test_util.h"

namespace longctx {
namespace {

using ::longctx::testing::LongctxBinary;
using ::longctx::testing::RunCommand;
using ::longctx::testing::SourcePath;

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// The command paths `longctx --help` lists: "  longctx PATH<2+ spaces>summary" after "Commands:".
std::vector<std::string> ListedCommands(const std::string& help) {
  std::vector<std::string> paths;
  std::istringstream in(help.substr(std::min(help.size(), help.find("Commands:"))));
  std::string line;
  const std::string prefix = "  longctx ";
  while (std::getline(in, line)) {
    if (line.rfind(prefix, 0) != 0) continue;
    const std::string rest = line.substr(prefix.size());
    paths.push_back(rest.substr(0, rest.find("  ")));
  }
  return paths;
}

TEST(CliTest, EveryCommandPrintsItsOwnHelp) {
  const auto top = RunCommand(LongctxBinary() + " --help");
  ASSERT_EQ(top.exit_code, 0) << top.output;
  const std::vector<std::string> listed = ListedCommands(top.output);
  const std::set<std::string> expected = {"train",         "eval",         "generate",          "probe",
                                          "plan",          "bench",        "bench attention",   "data build",
                                          "data encode",   "data corpus",  "data tokenize",     "data merge",
                                          "analyze attention", "analyze posfreq",
                                          "checkpoint consolidate", "checkpoint verify", "plot",
                                          "convert", "data sft"};
  EXPECT_EQ(std::set<std::string>(listed.begin(), listed.end()), expected) << top.output;
  EXPECT_EQ(listed.size(), expected.size()) << top.output;
  for (const std::string& path : listed) {
    const auto r = RunCommand(absl::StrCat(LongctxBinary(), " ", path, " --help"));
    EXPECT_EQ(r.exit_code, 0) << path << ":\n" << r.output;
    EXPECT_TRUE(Contains(r.output, absl::StrCat("Usage: longctx ", path, " [OPTIONS]"))) << path << ":\n" << r.output;
    // Its own flags only: probe's --trials is not in train's help, nor train's --config in probe's.
    if (path == "train") {
      EXPECT_FALSE(Contains(r.output, "--trials")) << r.output;
    }
    if (path == "probe") {
      EXPECT_FALSE(Contains(r.output, "--config")) << r.output;
    }
  }
  // The groups list their subcommands.
  for (const std::string group : {"data", "analyze"}) {
    const auto r = RunCommand(absl::StrCat(LongctxBinary(), " ", group, " --help"));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_TRUE(Contains(r.output, absl::StrCat("Usage: longctx ", group))) << r.output;
  }
}

TEST(CliTest, NoCommandOrAnUnknownOneListsTheCommandsAndFails) {
  auto r = RunCommand(LongctxBinary());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(Contains(r.output, "longctx train")) << r.output;
  r = RunCommand(LongctxBinary() + " trian --config x");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(Contains(r.output, "unknown command 'trian'")) << r.output;
  EXPECT_TRUE(Contains(r.output, "longctx train")) << r.output;
  r = RunCommand(LongctxBinary() + " data");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(Contains(r.output, "tokenize")) << r.output;
}

// `longctx --version`: exit 0, "longctx VERSION (GIT)" first (the version of
// CMakeLists.txt's project(), as base/version.h has it), then the backends.
TEST(CliTest, VersionNamesTheReleaseTheCommitAndTheBackends) {
  const auto r = RunCommand(LongctxBinary() + " --version");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string first = r.output.substr(0, r.output.find('\n'));
  const std::string head = absl::StrCat("longctx ", LongctxVersion(), " (");
  EXPECT_EQ(first.rfind(head, 0), 0u) << first;
  EXPECT_GT(first.size(), head.size() + 1) << first;  // a description, or "unknown"
  EXPECT_EQ(first.back(), ')') << first;
  EXPECT_TRUE(Contains(r.output, "\nbackends: cpu")) << r.output;
  EXPECT_TRUE(Contains(RunCommand(LongctxBinary() + " --help").output, "--version")) << "--help lists no --version";
}

class CliTrainTest : public ::longctx::testing::TinyCorpusTest {
 protected:
  CliTrainTest() : TinyCorpusTest(/*docs=*/60, /*seed=*/5) {}
  // Space-separated flags on purpose (not TinyTrainCommand): both spellings parse.
  std::string Train(const std::string& out, const std::string& extra) {
    return ::longctx::testing::WithFlags(
        absl::StrCat(LongctxBinary(), " train --config ", SourcePath("configs/tiny-test.textproto"), " --data.path ",
                     data_, " --out_dir=", tmp_ / out, " --threads 1 --log_every=1"),
        extra);
  }
};

TEST_F(CliTrainTest, SpaceAndEqualsGiveTheSameRun) {
  auto r = RunCommand(Train("spaced", "--steps 4"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = RunCommand(Train("equals", "--steps=4"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::map<int, double> spaced = ::longctx::testing::TrainLosses(tmp_ / "spaced/metrics.jsonl");
  const std::map<int, double> equals = ::longctx::testing::TrainLosses(tmp_ / "equals/metrics.jsonl");
  ASSERT_EQ(spaced.size(), 4u);
  EXPECT_EQ(spaced, equals);
  // train's --seed is TrainConfig.seed (it used to be probe's flag, silently ignored here).
  r = RunCommand(Train("seeded", "--steps 4 --seed 5"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::map<int, double> seeded = ::longctx::testing::TrainLosses(tmp_ / "seeded/metrics.jsonl");
  ASSERT_EQ(seeded.size(), 4u);
  EXPECT_NE(seeded.at(1), spaced.at(1));
}

// model.recompute_every reaches the trainer's model: recomputing every layer
// (or every 2nd) trains bit-identically to storing every activation.
TEST_F(CliTrainTest, RecomputationTrainsBitIdentically) {
  auto r = RunCommand(Train("stored", "--steps 3"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::map<int, double> stored = ::longctx::testing::TrainLosses(tmp_ / "stored/metrics.jsonl");
  ASSERT_EQ(stored.size(), 3u);
  for (const char* k : {"1", "2"}) {
    const std::string name = absl::StrCat("recompute", k);
    r = RunCommand(Train(name, absl::StrCat("--steps 3 --model.recompute_every=", k)));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(::longctx::testing::TrainLosses(tmp_ / (name + "/metrics.jsonl")), stored) << "recompute_every " << k;
  }
}

TEST(CliTest, MisplacedFlagNamesTheCommandAndTheFlag) {
  const std::string config = SourcePath("configs/tiny-test.textproto");
  auto r = RunCommand(absl::StrCat(LongctxBinary(), " train --config ", config, " --prompt x"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(Contains(r.output, "longctx train: error: unknown flag --prompt")) << r.output;
  EXPECT_TRUE(Contains(r.output, "generate")) << r.output;  // where --prompt belongs
  r = RunCommand(absl::StrCat(LongctxBinary(), " probe --checkpoint x --steps=3"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(Contains(r.output, "longctx probe: error: unknown flag --steps")) << r.output;
  // A misspelt TrainConfig field is named with the section it is not in.
  r = RunCommand(absl::StrCat(LongctxBinary(), " plan --config ", config, " --model.hiden_size 64"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(Contains(r.output, "longctx plan: error: unknown flag --model.hiden_size")) << r.output;
  EXPECT_TRUE(Contains(r.output, "longctx.ModelConfig")) << r.output;
  // A bad value of a real field is named too.
  r = RunCommand(absl::StrCat(LongctxBinary(), " plan --config ", config, " --steps many"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(Contains(r.output, "--steps")) << r.output;
  // A typed flag of a command checks its value.
  r = RunCommand(absl::StrCat(LongctxBinary(), " probe --checkpoint x --trials many"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(Contains(r.output, "longctx probe: error:")) << r.output;
  EXPECT_TRUE(Contains(r.output, "--trials")) << r.output;
}

TEST(CliTest, StrayPositionalIsAnError) {
  auto r = RunCommand(absl::StrCat(LongctxBinary(), " train --config ", SourcePath("configs/tiny-test.textproto"),
                                   " --out_dir=/nonexistent/never extra"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(Contains(r.output, "longctx train: error: unexpected argument 'extra'")) << r.output;
  r = RunCommand(LongctxBinary() + " data merge --input a.ltok --out b.ltok c.ltok");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(Contains(r.output, "longctx data merge: error: unexpected argument 'c.ltok'")) << r.output;
}

// A flag given twice used to keep its last value without a word
// (`--data.sft.seq_lens=512 --data.sft.seq_lens=2048` planned one 2,048
// schedule): now an error naming the flag, and for a repeated field the way
// to give a list.
TEST(CliTest, AFlagGivenTwiceIsAnErrorNamingIt) {
  const std::string config = SourcePath("configs/tiny-test.textproto");
  auto r = RunCommand(absl::StrCat(LongctxBinary(), " plan --config ", config, " --steps=2 --steps 3"));
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_TRUE(Contains(r.output, "longctx plan: error: --steps given twice (--steps=2, then --steps=3)")) << r.output;
  r = RunCommand(absl::StrCat(LongctxBinary(), " plan --config ", config,
                              " --data.sft.seq_lens=512 --data.sft.seq_lens=2048"));
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_TRUE(Contains(r.output, "longctx plan: error: --data.sft.seq_lens given twice")) << r.output;
  EXPECT_TRUE(Contains(r.output, "--data.sft.seq_lens=512,2048")) << r.output;
  // The list form, and different fields, are fine.
  r = RunCommand(absl::StrCat(LongctxBinary(), " plan --config ", config,
                              " --data.sft.seq_lens=512,2048 --data.sft.counts=1,1 --steps=2"));
  EXPECT_FALSE(Contains(r.output, "given twice")) << r.output;
  // A command's own flag given twice: CLI11 refuses it, naming it.
  r = RunCommand(absl::StrCat(LongctxBinary(), " plan --config ", config, " --config ", config));
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_TRUE(Contains(r.output, "longctx plan: error: --config")) << r.output;
}

// Arguments after `--` were dropped without a word (`train ... --steps=2 --
// --steps=5 --bogus=1` trained 2 steps, exit 0).
TEST(CliTest, ArgumentsAfterDoubleDashAreRefused) {
  const std::string config = SourcePath("configs/tiny-test.textproto");
  auto r = RunCommand(absl::StrCat(LongctxBinary(), " plan --config ", config, " --steps=2 -- --steps=5 --bogus=1"));
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_TRUE(Contains(r.output, "longctx plan: error: arguments after '--' (--steps=5 --bogus=1)")) << r.output;
  r = RunCommand(absl::StrCat(LongctxBinary(), " train --config ", config,
                              " --out_dir=/nonexistent/never --steps=2 -- --steps=5"));
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_TRUE(Contains(r.output, "longctx train: error: arguments after '--' (--steps=5)")) << r.output;
}

TEST(CliTest, SpacePlanOverrideEqualsEqualsForm) {
  const std::string config = SourcePath("configs/tiny-test.textproto");
  const auto a = RunCommand(absl::StrCat(LongctxBinary(), " plan --json --config ", config, " --model.num_layers 2"));
  const auto b = RunCommand(absl::StrCat(LongctxBinary(), " plan --json --config=", config, " --model.num_layers=2"));
  const auto c = RunCommand(absl::StrCat(LongctxBinary(), " plan --json --config ", config));
  ASSERT_EQ(a.exit_code, 0) << a.output;
  ASSERT_EQ(b.exit_code, 0) << b.output;
  ASSERT_EQ(c.exit_code, 0) << c.output;
  EXPECT_EQ(a.output, b.output);
  EXPECT_NE(a.output, c.output);  // the override did something
}

TEST(CliTest, PlanContextParallel) {
  // `plan --world N --cp C` (model/context_plan.h): C = 1 is the plan without
  // --cp, byte for byte; C must divide the world and 2C the sequence length.
  const std::string config = SourcePath("configs/tiny-test.textproto");
  const std::string base = absl::StrCat(LongctxBinary(), " plan --config ", config, " --data.seq_len=64 --model.max_position_embeddings=64 --world 4");
  const auto none = RunCommand(base), one = RunCommand(base + " --cp 1"), two = RunCommand(base + " --cp 2");
  ASSERT_EQ(none.exit_code, 0) << none.output;
  ASSERT_EQ(one.exit_code, 0) << one.output;
  ASSERT_EQ(two.exit_code, 0) << two.output;
  EXPECT_EQ(none.output, one.output);
  EXPECT_TRUE(Contains(two.output, "context parallel: C = 2 of world 4 (data-parallel 2)")) << two.output;
  EXPECT_TRUE(Contains(two.output, "32 tokens per rank per row")) << two.output;
  const auto json = RunCommand(base + " --cp 2 --json");
  ASSERT_EQ(json.exit_code, 0) << json.output;
  EXPECT_TRUE(Contains(json.output, "\"context_parallel\"")) << json.output;
  auto r = RunCommand(base + " --cp 3");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(Contains(r.output, "--cp 3 must divide --world 4")) << r.output;
  r = RunCommand(absl::StrCat(LongctxBinary(), " plan --config ", config, " --data.seq_len=60 --model.max_position_embeddings=64 --world 4 --cp 4"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(Contains(r.output, "seq_len 60 is not divisible by 2 x cp = 8")) << r.output;
}

TEST(CliTest, BenchTakesItsOwnFlagsWithSpaces) {
  // docs/cli.md: `longctx bench --config configs/ref-b.textproto --steps 10 --warmup 2`. With a config
  // that does not exist the error must be about the file, not about a flag.
  const auto r = RunCommand(LongctxBinary() + " bench --config /nonexistent/ref-b.textproto --steps 1 --warmup 0");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(Contains(r.output, "cannot read config file \"/nonexistent/ref-b.textproto\"")) << r.output;
  EXPECT_FALSE(Contains(r.output, "flag")) << r.output;
  // A bench flag given before `attention` belongs to bench, not to bench attention: an error.
  const auto a = RunCommand(LongctxBinary() + " bench --config x attention");
  EXPECT_NE(a.exit_code, 0);
  EXPECT_TRUE(Contains(a.output, "longctx bench attention: error: --config")) << a.output;
}

}  // namespace
}  // namespace longctx
