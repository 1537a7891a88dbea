// Why: a run's numbers live in metrics.jsonl; a user wants curves. These
// functions turn its events into PNGs (loss and eval loss against step,
// effective length against step, pass rate against probe length per probe
// step, position frequency per layer kind) with the built-in plotter, for
// `longctx plot --run DIR` and for the TensorBoard hook's image records.
#ifndef LONGCTX_TRAIN_REPORT_RUN_PLOTS_H_
#define LONGCTX_TRAIN_REPORT_RUN_PLOTS_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"

namespace longctx {

// Every line of a metrics.jsonl (blank lines skipped; a malformed line is an
// error naming path:line).
absl::StatusOr<std::vector<nlohmann::json>> ReadMetricsJsonl(const std::string& path);

// PNG bytes of the position-frequency plot of one "posfreq" event: pairs per
// layer per relative distance (bin averages, log y), one series per layer kind.
absl::StatusOr<std::string> PosfreqPlotPng(const nlohmann::json& posfreq_event, const std::string& title);

// PNG bytes of the loss-by-position curves: mean loss per position bucket
// (drawn at the bucket's middle) for each "loss_by_position" event given
// (one series per step), a marker at the training length. Error: no event
// with a bucket that has a loss.
absl::StatusOr<std::string> LossByPositionPlotPng(const std::vector<const nlohmann::json*>& events,
                                                  const std::string& title);

// The run's plots as (file name, PNG bytes): "loss.png" (train and eval loss),
// "effective_length.png" (with the low / high effective lengths when the
// events have them), "pass_rate.png" (Wilson error bars likewise),
// "teacher_forced.png" (per needle count and length, the teacher-forced
// answer-digit log-prob by step, when probes ran it), "loss_by_position.png"
// (up to 10 probe steps, PassRateStepsToPlot's choice), "posfreq.png" (last posfreq event);
// a plot whose events are absent is left out. train_len > 0 draws the training
// length on the effective-length plot. Error: no "train" event at all.
absl::StatusOr<std::vector<std::pair<std::string, std::string>>> RenderRunPlots(
    const std::vector<nlohmann::json>& events, const std::string& run_name, int train_len);

// The probe steps the pass-rate plot draws, given each probe step's
// (length -> pass rate): all of them when at most
// 10 (the palette's colours); otherwise 7 evenly spaced steps (first and last
// included) plus the first step where some length reaches 0.5 and the step
// before it.
std::set<int64_t> PassRateStepsToPlot(const std::map<int64_t, std::map<int64_t, double>>& pass_rate);

}  // namespace longctx

#endif  // LONGCTX_TRAIN_REPORT_RUN_PLOTS_H_
