// Why: docs/BENCHMARKS.md should show curves (attention time per token against
// L, fp32 against bf16 losses, activation memory against L) drawn from measured
// data, by the project's own PNG writer (png_plot.h) — the machines have no
// plotting library. A run's metrics.jsonl has its own plots (run_plots.h); this
// is the general case: a JSONL file of (series, x, y) points, one point a line,
// turned into one line plot (`longctx plot --series FILE.jsonl --png OUT.png`).
//
// Format: each non-blank line is an object {"series": "name", "x": <number>,
// "y": <number>}; series keep the order of their first point and points their
// file order (a series is drawn in that order, so give x ascending). Errors
// name the file and line.
#ifndef LONGCTX_TRAIN_REPORT_SERIES_PLOT_H_
#define LONGCTX_TRAIN_REPORT_SERIES_PLOT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "train/report/png_plot.h"

namespace longctx {

// The series of a points file's text; `source` names it in errors.
absl::StatusOr<std::vector<PlotSeries>> ParseSeriesJsonl(const std::string& text, const std::string& source);

// Reads `path`, parses it and renders one LinePlot with `options`; the PNG bytes.
absl::StatusOr<std::string> RenderSeriesPlot(const std::string& path, const LinePlotOptions& options);

}  // namespace longctx

#endif  // LONGCTX_TRAIN_REPORT_SERIES_PLOT_H_
