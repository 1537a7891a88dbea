// Why: `longctx analyze …` — the papers' offline analyses (train/analyze/,
// data/posfreq_analysis.h) — each with its own flags (command_table.h).
// analyze attention's defaults are the values its flags have always had
// (--needles 4, --format paper: the old flags were shared with probe), not
// AnalyzeAttentionOptions' member defaults.
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "train/analyze/analyze_attention.h"
#include "train/cli/command_table.h"
#include "train/cli/commands.h"

namespace longctx::cli {
namespace {

void AddAttention(CommandTable& table) {
  struct Args {
    AnalyzeAttentionOptions o;
    std::string ablate_heads, json_out;
  };
  auto a = std::make_shared<Args>();
  a->o.needles = 4;
  a->o.format = "paper";
  CLI::App* c = table.Add(
      {.path = "analyze attention",
       .summary = "Attention mass, entropy, RoPE pair contributions and head ablation on needle prompts",
       .run = [a](const std::vector<std::string>&) {
         absl::StatusOr<std::vector<std::pair<int, int>>> heads = ParseHeadList(a->ablate_heads);
         if (!heads.ok()) {
           std::fprintf(stderr, "longctx analyze attention: %s\n", std::string(heads.status().message()).c_str());
           return 1;
         }
         a->o.ablate_heads = *heads;
         return RunAnalyzeAttentionCommand(a->o, a->json_out);
       }});
  c->add_option("--checkpoint", a->o.checkpoint, "checkpoint directory");
  c->add_option("--data", a->o.data, "token file (default: the checkpoint's data.path)");
  c->add_option("--length", a->o.length, "prompt tokens (0 = the run's data.seq_len)");
  c->add_option("--samples", a->o.samples, "needle prompts to average over");
  c->add_option("--depth", a->o.depth, "needle depth (samples within +-0.05)");
  c->add_option("--needles", a->o.needles, "needles per prompt");
  c->add_option("--format", a->o.format, "needle format, paper or compact");
  c->add_option("--max_pairs", a->o.max_pairs, "(query, key) pairs sampled per layer for the RoPE-pair analysis");
  c->add_option("--positional_threshold", a->o.positional_threshold,
                "|Spearman(dominant pair, distance)| of a positional head");
  c->add_option("--seed", a->o.seed, "sample seed");
  c->add_option("--ablate_heads", a->ablate_heads,
                "LAYER:HEAD,... whose attention output is zeroed for the answer-loss comparison");
  c->add_option("--json_out", a->json_out, "JSON report to write");
}

void AddPosfreq(CommandTable& table) {
  struct Args {
    std::string data, png, json_out;
    int64_t seq_len = 2048, rows = 0;
    double min_pairs = 1;
  };
  auto a = std::make_shared<Args>();
  CLI::App* c = table.Add(
      {.path = "analyze posfreq",
       .summary = "Position frequency of a corpus (the STRING paper's Figure 1 cases), as a table, JSON and a plot",
       .run = [a](const std::vector<std::string>&) {
         return RunAnalyzePosfreqCommand(a->data, a->seq_len, a->rows, a->min_pairs, a->png, a->json_out);
       }});
  c->add_option("--data", a->data, "token file");
  c->add_option("--seq_len", a->seq_len, "training length L");
  c->add_option("--rows", a->rows, "packed rows of L tokens (0 = cover the corpus once)");
  c->add_option("--min_pairs", a->min_pairs, "report the largest i with at least this many pairs");
  c->add_option("--png", a->png, "PNG plot to write");
  c->add_option("--json_out", a->json_out, "JSON report to write");
}

}  // namespace

void RegisterAnalyzeCommands(CommandTable& table) {
  table.Add({.path = "analyze", .summary = "Offline analyses of checkpoints and corpora (longctx analyze SUBCOMMAND --help)"});
  AddAttention(table);
  AddPosfreq(table);
}

}  // namespace longctx::cli
