// Why: metrics.jsonl holds a run's numbers; `longctx plot --run DIR` turns
// them into PNGs a user can look at (train/report/run_plots.h): loss and eval
// loss, effective length against step, pass rate against probe length, and
// position frequency, written to DIR/plots/ (or --out) with their paths printed.
// `longctx plot --series FILE.jsonl --png OUT.png` draws any (series, x, y)
// points file as one line plot (train/report/series_plot.h): the figures of
// docs/BENCHMARKS.md.
#include "train/cli/plot_commands.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "train/checkpoint/checkpoint.h"
#include "train/report/run_plots.h"
#include "train/report/series_plot.h"

namespace longctx::cli {
namespace {

struct PlotArgs {
  std::string run, out;
  // --series mode
  std::string series, png, title, x_label, y_label;
  bool log_y = false, y_from_zero = false;
};

int RunSeriesPlot(const PlotArgs& a) {
  if (a.png.empty()) {
    std::fprintf(stderr, "longctx plot: --series needs --png OUT.png\n");
    return 1;
  }
  LinePlotOptions o;
  o.title = a.title;
  o.x_label = a.x_label;
  o.y_label = a.y_label;
  o.log_y = a.log_y;
  if (a.y_from_zero) o.y_min = 0;
  absl::StatusOr<std::string> png = RenderSeriesPlot(a.series, o);
  if (!png.ok()) {
    std::fprintf(stderr, "longctx plot: %s\n", std::string(png.status().message()).c_str());
    return 1;
  }
  FILE* f = std::fopen(a.png.c_str(), "wb");
  if (f == nullptr || std::fwrite(png->data(), 1, png->size(), f) != png->size() || std::fclose(f) != 0) {
    std::fprintf(stderr, "longctx plot: cannot write %s\n", a.png.c_str());
    return 1;
  }
  std::printf("plot: %s\n", a.png.c_str());
  return 0;
}

// The training length and model name from the newest checkpoint's config (0, "" if none).
void RunInfo(const std::string& run, int* train_len, std::string* name) {
  std::vector<std::string> steps;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(run, ec))
    if (e.is_directory() && e.path().filename().string().rfind("step-", 0) == 0) steps.push_back(e.path().string());
  std::sort(steps.begin(), steps.end());
  for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
    absl::StatusOr<TrainConfig> c = LoadCheckpointConfig(*it);
    if (!c.ok()) continue;
    *train_len = c->data().seq_len();
    *name = c->model().name();
    return;
  }
}

int RunPlot(const PlotArgs& a) {
  if (!a.series.empty() && !a.run.empty()) {
    std::fprintf(stderr, "longctx plot: give --run DIR or --series FILE, not both\n");
    return 1;
  }
  if (!a.series.empty()) return RunSeriesPlot(a);
  if (a.run.empty()) {
    std::fprintf(stderr, "longctx plot: give --run DIR (a run's out_dir) or --series FILE.jsonl --png OUT.png\n");
    return 1;
  }
  absl::StatusOr<std::vector<nlohmann::json>> events = ReadMetricsJsonl(a.run + "/metrics.jsonl");
  if (!events.ok()) {
    std::fprintf(stderr, "longctx plot: %s\n", std::string(events.status().message()).c_str());
    return 1;
  }
  int train_len = 0;
  std::string name;
  RunInfo(a.run, &train_len, &name);
  if (name.empty()) name = std::filesystem::path(a.run).filename().string();
  absl::StatusOr<std::vector<std::pair<std::string, std::string>>> plots = RenderRunPlots(*events, name, train_len);
  if (!plots.ok()) {
    std::fprintf(stderr, "longctx plot: %s/metrics.jsonl: %s\n", a.run.c_str(),
                 std::string(plots.status().message()).c_str());
    return 1;
  }
  // The numbers the plots show, as two lines (the main job ends with them).
  std::string eff, eval;
  for (const nlohmann::json& e : *events) {
    const std::string kind = e.value("kind", "");
    if (!e.contains("step") || !e["step"].is_number()) continue;
    const long long step = e["step"].get<long long>();
    if (kind == "probe" && e.contains("effective_length") && e["effective_length"].is_number())
      eff += " " + std::to_string(step) + ": " + std::to_string(e["effective_length"].get<long long>()) + " |";
    if (kind == "eval" && e.contains("loss") && e["loss"].is_number()) {
      char buf[64];
      std::snprintf(buf, sizeof(buf), " %lld: %.4f |", step, e["loss"].get<double>());
      eval += buf;
    }
  }
  if (!eff.empty()) {
    const std::string len = train_len > 0 ? " (training length " + std::to_string(train_len) + ")" : "";
    std::printf("effective length by step%s:%s\n", len.c_str(), eff.c_str());
  }
  if (!eval.empty()) std::printf("eval loss by step:%s\n", eval.c_str());
  const std::string out = a.out.empty() ? a.run + "/plots" : a.out;
  std::error_code ec;
  std::filesystem::create_directories(out, ec);
  if (ec) {
    std::fprintf(stderr, "longctx plot: cannot create %s: %s\n", out.c_str(), ec.message().c_str());
    return 1;
  }
  for (const auto& [file, png] : *plots) {
    const std::string path = out + "/" + file;
    FILE* f = std::fopen(path.c_str(), "wb");
    if (f == nullptr || std::fwrite(png.data(), 1, png.size(), f) != png.size() || std::fclose(f) != 0) {
      std::fprintf(stderr, "longctx plot: cannot write %s\n", path.c_str());
      return 1;
    }
    std::printf("plot: %s\n", path.c_str());
  }
  return 0;
}

}  // namespace

void RegisterPlotCommands(CommandTable& table) {
  auto a = std::make_shared<PlotArgs>();
  CLI::App* c = table.Add(
      {.path = "plot",
       .summary = "PNG plots of a run's metrics.jsonl: loss, eval loss, effective length, pass rate, position frequency",
       .notes = "Example: longctx plot --run runs/main   (writes runs/main/plots/*.png and prints their paths)\n"
                "         longctx plot --series points.jsonl --png out.png --title T --x_label X --y_label Y\n"
                "         (one point a line: {\"series\": \"name\", \"x\": 1, \"y\": 2})",
       .run = [a](const std::vector<std::string>&) { return RunPlot(*a); }});
  c->add_option("--run", a->run, "run directory (its out_dir, holding metrics.jsonl)");
  c->add_option("--out", a->out, "directory for the PNGs (default: RUN/plots)");
  c->add_option("--series", a->series, "a JSONL file of {series, x, y} points (instead of --run)");
  c->add_option("--png", a->png, "with --series: the PNG to write");
  c->add_option("--title", a->title, "with --series: the plot title");
  c->add_option("--x_label", a->x_label, "with --series: the x-axis title");
  c->add_option("--y_label", a->y_label, "with --series: the y-axis title");
  c->add_flag("--log_y", a->log_y, "with --series: log10 y axis");
  c->add_flag("--y_from_zero", a->y_from_zero, "with --series: the y axis starts at 0");
}

}  // namespace longctx::cli
