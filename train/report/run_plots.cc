// Why: see run_plots.h.
#include "train/report/run_plots.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "train/report/png_plot.h"

namespace longctx {
namespace {

using Json = nlohmann::json;

// step -> value, the last event of a step winning (a resumed run appends).
using Curve = std::map<int64_t, double>;

void Split(const Curve& c, std::vector<double>& x, std::vector<double>& y) {
  for (const auto& [s, v] : c) x.push_back(static_cast<double>(s)), y.push_back(v);
}

absl::StatusOr<std::string> Png(const LinePlot& plot) {
  absl::StatusOr<RenderedPlot> r = plot.Render();
  if (!r.ok()) return r.status();
  return EncodePng(r->canvas);
}

bool IsNumber(const Json& j, const char* key) { return j.contains(key) && j[key].is_number(); }

}  // namespace

absl::StatusOr<std::vector<Json>> ReadMetricsJsonl(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::vector<Json> out;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    Json j = Json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) return absl::DataLossError(absl::StrCat(path, ":", n, ": not a JSON object"));
    out.push_back(std::move(j));
  }
  return out;
}

absl::StatusOr<std::string> PosfreqPlotPng(const Json& ev, const std::string& title) {
  LinePlotOptions o;
  o.title = title;
  o.x_label = "relative distance i (query - key)";
  o.y_label = "pairs per layer per distance (bin mean)";
  o.log_y = true;
  LinePlot plot(o);
  for (const char* kind : {"full", "sliding"}) {
    if (!ev.contains(kind) || !ev[kind].contains("bins")) continue;
    std::vector<double> x, y;
    for (const Json& b : ev[kind]["bins"]) {
      const double lo = b[0].get<double>(), hi = b[1].get<double>(), sum = b[2].get<double>();
      if (hi <= lo) continue;
      x.push_back(lo);
      y.push_back(sum / (hi - lo));
    }
    plot.AddSeries(absl::StrCat(kind, " layers"), std::move(x), std::move(y));
  }
  return Png(plot);
}

absl::StatusOr<std::string> LossByPositionPlotPng(const std::vector<const Json*>& events, const std::string& title) {
  LinePlotOptions o;
  o.title = title;
  o.x_label = "position in the document (bucket middle)";
  o.y_label = "mean next-token loss (nats)";
  LinePlot plot(o);
  int64_t train_len = 0;
  bool any = false;
  for (const Json* e : events) {
    std::vector<double> x, y;
    for (const Json& b : e->value("buckets", Json::array())) {
      if (!IsNumber(b, "lo") || !IsNumber(b, "hi") || !IsNumber(b, "loss")) continue;
      x.push_back(0.5 * (b["lo"].get<double>() + b["hi"].get<double>()));
      y.push_back(b["loss"].get<double>());
    }
    if (x.empty()) continue;
    any = true;
    if (IsNumber(*e, "train_len")) train_len = (*e)["train_len"].get<int64_t>();
    plot.AddSeries(absl::StrCat("step ", e->value("step", int64_t{0})), std::move(x), std::move(y));
  }
  if (!any) return absl::NotFoundError("no loss_by_position event with a measured bucket");
  if (train_len > 0) plot.AddMarker(static_cast<double>(train_len), absl::StrCat("L = ", train_len));
  return Png(plot);
}

std::set<int64_t> PassRateStepsToPlot(const std::map<int64_t, std::map<int64_t, double>>& pass_rate) {
  std::vector<int64_t> steps;
  for (const auto& [step, c] : pass_rate) steps.push_back(step);
  if (steps.size() <= 10) return std::set<int64_t>(steps.begin(), steps.end());
  std::set<int64_t> shown;
  for (size_t i = 0; i < 7; ++i) shown.insert(steps[i * (steps.size() - 1) / 6]);
  for (size_t i = 0; i < steps.size(); ++i) {
    const std::map<int64_t, double>& c = pass_rate.at(steps[i]);
    if (std::any_of(c.begin(), c.end(), [](const auto& kv) { return kv.second >= 0.5; })) {
      shown.insert(steps[i]);
      if (i > 0) shown.insert(steps[i - 1]);
      break;
    }
  }
  return shown;
}

absl::StatusOr<std::vector<std::pair<std::string, std::string>>> RenderRunPlots(const std::vector<Json>& events,
                                                                                const std::string& run_name,
                                                                                int train_len) {
  Curve train_loss, eval_loss, eff_len;
  std::map<int64_t, Curve> pass_rate;  // probe step -> length -> pass rate
  std::map<int64_t, Curve> pass_low, pass_high;  // its Wilson interval, where the events have it
  Curve eff_low, eff_high;
  std::map<std::pair<int, int64_t>, Curve> recall;  // (needles, length) -> step -> teacher-forced log-prob
  const Json* last_posfreq = nullptr;
  std::map<int64_t, const Json*> loss_by_position;  // step -> its last event
  for (const Json& e : events) {
    const std::string kind = e.value("kind", "");
    if (!IsNumber(e, "step")) continue;
    const int64_t step = e["step"].get<int64_t>();
    if (kind == "train" && IsNumber(e, "loss")) train_loss[step] = e["loss"].get<double>();
    if (kind == "eval" && IsNumber(e, "loss")) eval_loss[step] = e["loss"].get<double>();
    if (kind == "probe") {
      if (IsNumber(e, "effective_length")) eff_len[step] = e["effective_length"].get<double>();
      if (IsNumber(e, "effective_length_low") && IsNumber(e, "effective_length_high")) {
        eff_low[step] = e["effective_length_low"].get<double>();
        eff_high[step] = e["effective_length_high"].get<double>();
      }
      Curve& c = pass_rate[step];
      c.clear();
      pass_low.erase(step), pass_high.erase(step);
      for (const Json& l : e.value("lengths", Json::array())) {
        if (!IsNumber(l, "pass_rate") || !IsNumber(l, "length")) continue;
        const int64_t len = l["length"].get<int64_t>();
        c[len] = l["pass_rate"].get<double>();
        if (IsNumber(l, "pass_low") && IsNumber(l, "pass_high"))
          pass_low[step][len] = l["pass_low"].get<double>(), pass_high[step][len] = l["pass_high"].get<double>();
      }
      if (c.empty()) pass_rate.erase(step);
      for (const Json& rc : e.value("teacher_forced", Json::array())) {
        if (!IsNumber(rc, "needles")) continue;
        for (const Json& l : rc.value("lengths", Json::array()))
          if (IsNumber(l, "length") && IsNumber(l, "logprob"))
            recall[{rc["needles"].get<int>(), l["length"].get<int64_t>()}][step] = l["logprob"].get<double>();
      }
    }
    if (kind == "posfreq") last_posfreq = &e;
    if (kind == "loss_by_position") loss_by_position[step] = &e;
  }
  if (train_loss.empty()) return absl::NotFoundError("no \"train\" event in the metrics");
  std::vector<std::pair<std::string, std::string>> out;
  {
    LinePlotOptions o;
    o.title = absl::StrCat(run_name, ": loss");
    o.x_label = "step";
    o.y_label = "loss (nats per token)";
    LinePlot plot(o);
    std::vector<double> x, y;
    Split(train_loss, x, y);
    plot.AddSeries("train loss", std::move(x), std::move(y));
    if (!eval_loss.empty()) {
      std::vector<double> ex, ey;
      Split(eval_loss, ex, ey);
      PlotSeries s{.name = "eval loss", .x = std::move(ex), .y = std::move(ey), .thickness = 3};
      plot.AddSeries(std::move(s));
    }
    absl::StatusOr<std::string> png = Png(plot);
    if (!png.ok()) return png.status();
    out.emplace_back("loss.png", std::move(*png));
  }
  if (!eff_len.empty()) {
    LinePlotOptions o;
    o.title = absl::StrCat(run_name, ": NIAH effective length");
    o.x_label = "step";
    o.y_label = "effective length (tokens)";
    o.legend_corner = LegendCorner::kBottomRight;
    double top = 0;
    for (const auto& [s, v] : eff_len) top = std::max(top, v);
    for (const auto& [s, v] : eff_high) top = std::max(top, v);
    if (train_len > 0) top = std::max<double>(top, train_len);
    o.y_max = std::max(1.0, top * 1.15);
    o.y_min = -0.04 * o.y_max;  // a 0 effective length drawn above the axis, not on it
    LinePlot plot(o);
    std::vector<double> x, y;
    Split(eff_len, x, y);
    plot.AddSeries("effective length", x, std::move(y));
    if (!eff_low.empty()) {
      // The effective length at the pass-rate intervals' lower / upper bounds.
      std::vector<double> lx, ly, hx, hy;
      Split(eff_low, lx, ly);
      Split(eff_high, hx, hy);
      plot.AddSeries(PlotSeries{.name = "at the 95% lower bounds", .x = std::move(lx), .y = std::move(ly),
                                .color = Rgb{120, 160, 220}, .auto_color = false, .thickness = 1});
      plot.AddSeries(PlotSeries{.name = "at the 95% upper bounds", .x = std::move(hx), .y = std::move(hy),
                                .color = Rgb{230, 150, 90}, .auto_color = false, .thickness = 1});
    }
    if (train_len > 0 && x.size() >= 1) {
      const double x0 = std::min(0.0, x.front()), x1 = std::max(x.back(), x0 + 1);
      plot.AddSeries(PlotSeries{.name = absl::StrCat("training length ", train_len),
                                .x = {x0, x1},
                                .y = {static_cast<double>(train_len), static_cast<double>(train_len)},
                                .color = Rgb{110, 110, 110},
                                .auto_color = false,
                                .thickness = 1});
    }
    absl::StatusOr<std::string> png = Png(plot);
    if (!png.ok()) return png.status();
    out.emplace_back("effective_length.png", std::move(*png));
  }
  if (!pass_rate.empty()) {
    LinePlotOptions o;
    o.title = absl::StrCat(run_name, ": NIAH pass rate by prompt length");
    o.x_label = "prompt length (tokens)";
    o.y_label = "pass rate";
    o.y_min = -0.05;  // pass rate 0 visible above the axis
    o.y_max = 1.05;
    o.legend_corner = LegendCorner::kBottomLeft;
    const std::set<int64_t> shown = PassRateStepsToPlot(pass_rate);
    if (shown.size() < pass_rate.size())
      o.title += absl::StrCat(" (", shown.size(), " of ", pass_rate.size(), " probes)");
    LinePlot plot(o);
    for (const auto& [step, c] : pass_rate) {
      if (shown.count(step) == 0) continue;
      std::vector<double> x, y;
      Split(c, x, y);
      PlotSeries series{.name = absl::StrCat("step ", step), .x = std::move(x), .y = std::move(y)};
      // Wilson 95 % error bars when every point of this probe has its interval.
      if (pass_low.count(step) && pass_low[step].size() == c.size()) {
        std::vector<double> ix;
        Split(pass_low[step], ix, series.y_low);
        Split(pass_high[step], ix, series.y_high);
      }
      plot.AddSeries(std::move(series));
    }
    absl::StatusOr<std::string> png = Png(plot);
    if (!png.ok()) return png.status();
    out.emplace_back("pass_rate.png", std::move(*png));
  }
  if (!recall.empty()) {
    LinePlotOptions o;
    o.title = absl::StrCat(run_name, ": teacher-forced needle recall");
    o.x_label = "step";
    o.y_label = "answer-digit log-prob (nats per token)";
    o.legend_corner = LegendCorner::kBottomRight;
    LinePlot plot(o);
    for (const auto& [key, c] : recall) {
      std::vector<double> x, y;
      Split(c, x, y);
      plot.AddSeries(absl::StrCat(key.first, key.first == 1 ? " needle, " : " needles, ", key.second, " tokens"),
                     std::move(x), std::move(y));
    }
    absl::StatusOr<std::string> png = Png(plot);
    if (!png.ok()) return png.status();
    out.emplace_back("teacher_forced.png", std::move(*png));
  }
  if (!loss_by_position.empty()) {
    std::map<int64_t, std::map<int64_t, double>> steps;  // the step choice only looks at the keys
    for (const auto& [step, e] : loss_by_position) steps[step];
    const std::set<int64_t> shown = PassRateStepsToPlot(steps);
    std::vector<const Json*> chosen;
    for (const auto& [step, e] : loss_by_position)
      if (shown.count(step) != 0) chosen.push_back(e);
    std::string title = absl::StrCat(run_name, ": loss by position");
    if (shown.size() < loss_by_position.size())
      absl::StrAppend(&title, " (", shown.size(), " of ", loss_by_position.size(), " probes)");
    absl::StatusOr<std::string> png = LossByPositionPlotPng(chosen, title);
    if (png.ok()) out.emplace_back("loss_by_position.png", std::move(*png));
    else if (!absl::IsNotFound(png.status())) return png.status();
  }
  if (last_posfreq != nullptr) {
    absl::StatusOr<std::string> png = PosfreqPlotPng(
        *last_posfreq, absl::StrCat(run_name, ": position frequency at step ", (*last_posfreq)["step"].get<int64_t>()));
    if (!png.ok()) return png.status();
    out.emplace_back("posfreq.png", std::move(*png));
  }
  return out;
}

}  // namespace longctx
