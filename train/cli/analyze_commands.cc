// Why: `longctx analyze …` — the papers' offline analyses (train/analyze/,
// data/posfreq_analysis.h) — each with its own flags (command_table.h);
// posfreq's body is here beside them, attention's is train/analyze/'s.
// analyze attention's defaults are the values its flags have always had
// (--needles 4, --format paper: the old flags were shared with probe), not
// AnalyzeAttentionOptions' member defaults.
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/command_status.h"
#include "data/posfreq_analysis.h"
#include "data/token_file.h"
#include "train/analyze/analyze_attention.h"
#include "train/cli/command_table.h"
#include "train/report/png_plot.h"

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

// `longctx analyze posfreq --data FILE --seq_len L [--rows N] [--min_pairs K] [--join_fraction P] [--png OUT]
// [--json_out OUT]`: the STRING paper's Figure 1 position-frequency cases for a corpus, and with P > 0 the
// packer's join mode beside them (data/posfreq_analysis.h).
int RunAnalyzePosfreqCommand(const std::string& data, int64_t seq_len, int64_t rows, double min_pairs,
                             double join_fraction, const std::string& png, const std::string& json_out) {
  if (data.empty()) return FailCommand(absl::InvalidArgumentError("--data: give the token file to analyze"));
  absl::StatusOr<TokenFileReader> tokens = TokenFileReader::Open(data);
  if (!tokens.ok()) return FailCommand(tokens.status());
  PosfreqOptions opts;
  opts.seq_len = seq_len;
  opts.rows = rows;
  opts.k = min_pairs;
  opts.join_fraction = join_fraction;
  absl::StatusOr<PosfreqReport> report = AnalyzePositionFrequency(*tokens, opts);
  if (!report.ok()) return FailCommand(report.status());
  std::printf("%s", FormatPosfreqTable(*report).c_str());
  if (!json_out.empty()) {
    std::ofstream f(json_out, std::ios::binary | std::ios::trunc);
    f << PosfreqReportToJson(*report).dump(1) << "\n";
    f.close();
    if (!f) return FailCommand(absl::InternalError("writing " + json_out + ": cannot write the JSON report"));
    std::printf("wrote %s\n", json_out.c_str());
  }
  if (!png.empty()) {
    // f(i)/Σf of the three cases on a log axis (the STRING paper's Figure 1),
    // with the L/2 and 3L/4 boundaries of the printed shares marked.
    const int64_t L = report->seq_len;
    LinePlotOptions po;
    po.width = 1000;
    po.height = 620;
    po.log_y = true;
    po.title = absl::StrFormat("Position frequency at L = %d: %s", L, data.substr(data.find_last_of('/') + 1));
    po.x_label = absl::StrFormat("relative position i (%d rows of %d tokens per case)", report->rows, L);
    po.y_label = "f(i) / sum f  (log scale)";
    po.x_min = 0;
    po.x_max = static_cast<double>(L);
    for (int k = 0; k <= 8; ++k) po.x_ticks.push_back(static_cast<double>(k * L) / 8);
    po.legend_corner = LegendCorner::kBottomLeft;
    LinePlot plot(po);
    std::vector<double> x(L);
    for (int64_t i = 0; i < L; ++i) x[i] = static_cast<double>(i);
    const char* const kLabels[] = {"(a) natural", "(b) uniform", "(c) concatenated"};
    for (size_t c = 0; c < report->cases.size(); ++c) {
      const PosfreqCase& pc = report->cases[c];
      const std::string label = c < 3 ? std::string(kLabels[c]) : absl::StrCat("(d) joined, p = ", join_fraction);
      plot.AddSeries(absl::StrFormat("%s: %.1f%% of pairs at i<=%d, %.2f%% at i>=%d", label,
                                     100 * pc.summary.share_le_half, PosfreqLowThreshold(L),
                                     100 * pc.summary.share_ge_three_quarters, PosfreqHighThreshold(L)),
                     x, NormalizedCounts(pc));
    }
    plot.AddMarker(static_cast<double>(PosfreqLowThreshold(L)), absl::StrCat("L/2 = ", PosfreqLowThreshold(L)));
    plot.AddMarker(static_cast<double>(PosfreqHighThreshold(L)), absl::StrCat("3L/4 = ", PosfreqHighThreshold(L)));
    absl::Status st = plot.WritePng(png);
    if (!st.ok()) return FailCommand(st);
    std::printf("wrote %s\n", png.c_str());
  }
  return 0;
}

void AddPosfreq(CommandTable& table) {
  struct Args {
    std::string data, png, json_out;
    int64_t seq_len = 2048, rows = 0;
    double min_pairs = 1, join_fraction = 0;
  };
  auto a = std::make_shared<Args>();
  CLI::App* c = table.Add(
      {.path = "analyze posfreq",
       .summary = "Position frequency of a corpus (the STRING paper's Figure 1 cases), as a table, JSON and a plot",
       .run = [a](const std::vector<std::string>&) {
         return RunAnalyzePosfreqCommand(a->data, a->seq_len, a->rows, a->min_pairs, a->join_fraction, a->png,
                                         a->json_out);
       }});
  c->add_option("--data", a->data, "token file");
  c->add_option("--seq_len", a->seq_len, "training length L");
  c->add_option("--rows", a->rows, "packed rows of L tokens (0 = cover the corpus once)");
  c->add_option("--min_pairs", a->min_pairs, "report the largest i with at least this many pairs");
  c->add_option("--join_fraction", a->join_fraction,
                "> 0: add the packer's join mode with this data.join_fraction as a fourth case");
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
