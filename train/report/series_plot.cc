// Why: see series_plot.h.
#include "train/report/series_plot.h"

#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"

namespace longctx {

absl::StatusOr<std::vector<PlotSeries>> ParseSeriesJsonl(const std::string& text, const std::string& source) {
  std::vector<PlotSeries> series;
  std::map<std::string, size_t> index;
  std::istringstream in(text);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = absl::StrCat(source, ":", n, ": ");
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object())
      return absl::InvalidArgumentError(absl::StrCat(where, "not a JSON object"));
    if (!j.contains("series") || !j["series"].is_string())
      return absl::InvalidArgumentError(absl::StrCat(where, "\"series\" must be a string"));
    for (const char* key : {"x", "y"})
      if (!j.contains(key) || !j[key].is_number() || !std::isfinite(j[key].get<double>()))
        return absl::InvalidArgumentError(absl::StrCat(where, "\"", key, "\" must be a finite number"));
    const std::string name = j["series"].get<std::string>();
    auto [it, fresh] = index.emplace(name, series.size());
    if (fresh) {
      PlotSeries s;
      s.name = name;
      series.push_back(std::move(s));
    }
    series[it->second].x.push_back(j["x"].get<double>());
    series[it->second].y.push_back(j["y"].get<double>());
  }
  if (series.empty()) return absl::InvalidArgumentError(absl::StrCat(source, ": no points"));
  return series;
}

absl::StatusOr<std::string> RenderSeriesPlot(const std::string& path, const LinePlotOptions& options) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return absl::NotFoundError(absl::StrCat(path, ": cannot open the points file"));
  std::stringstream buf;
  buf << f.rdbuf();
  absl::StatusOr<std::vector<PlotSeries>> series = ParseSeriesJsonl(buf.str(), path);
  if (!series.ok()) return series.status();
  LinePlot plot(options);
  for (PlotSeries& s : *series) plot.AddSeries(std::move(s));
  absl::StatusOr<RenderedPlot> r = plot.Render();
  if (!r.ok()) return absl::Status(r.status().code(), absl::StrCat(path, ": ", r.status().message()));
  return EncodePng(r->canvas);
}

}  // namespace longctx
