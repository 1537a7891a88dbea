// Why: a probe result has three readers: the metrics JSONL stream (one compact
// "kind": "probe" event beside the posfreq events), a JSON file with the
// per-(length, depth) accuracy, and the paper's Figure 4 heatmap (x = length,
// y = depth, colour = accuracy) drawn with train/png_plot. All three come from
// here so they cannot disagree.
#ifndef LONGCTX_TRAIN_NIAH_PROBE_REPORT_H_
#define LONGCTX_TRAIN_NIAH_PROBE_REPORT_H_

#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "train/probe/niah_probe.h"

namespace longctx {

// {"format", "needles", "trials_per_length", "threshold", "depth_bins", "seed",
//  "effective_length", "first_failing_length" (null: none failed),
//  "interval": "wilson95", "effective_length_low", "effective_length_high",
//  "uncertain_lengths" (see ProbeResult), "trials_run", "seconds",
//  "lengths": [{"length", "tested", "trials", "passed", "pass_rate",
//               "pass_low", "pass_high", "answer_loss",
//               "needle_accuracy", "mean_prompt_tokens",
//               "depth_accuracy": [per bin; null where no needle fell]}],
//  with the teacher-forced recall on: "teacher_forced": [{"needles",
//    "lengths": [{"length", "tested", "trials", "logprob", "argmax_exact",
//                 "depth_logprob": [per bin; null where no needle fell]}]}],
//    "teacher_forced_trials_per_cell", "teacher_forced_seconds",
//  "trials": [{"length", "index", "numbers", "depths", "needle_offsets",
//              "prompt_tokens", "found", "passed", "answer_loss", "generated"}]
//  (only when kept)}.
nlohmann::json ProbeResultToJson(const ProbeResult& result);

// The compact metrics event: kind "probe", step, effective_length (and
// effective_length_low / _high, uncertain_lengths), first_failing_length, and
// per tested length its pass_rate, pass_low, pass_high and answer_loss; with
// the teacher-forced recall on, "teacher_forced" as in the JSON without
// depths and untested lengths, and "teacher_forced_seconds".
nlohmann::json ProbeMetricsEvent(const ProbeResult& result, int64_t step);

// Columns = tested lengths, rows = depth bins (0 % at the top), colour = the
// share of needles in that bin found (grey: no needle fell there).
absl::Status WriteProbeHeatmap(const ProbeResult& result, const std::string& title, const std::string& path);

// Writes the JSON (pretty, one trailing newline) via path.tmp + rename.
absl::Status WriteProbeJson(const ProbeResult& result, const std::string& path);

// "eff len 0 (95% 0..512, uncertain 128) | pass 0.38? 1.00 1.00 0.88 | answer loss ... (lengths 128..512, ...)":
// the effective length, the range of its low / high versions, the lengths whose
// interval straddles the threshold, and their pass rates marked with '?'.
std::string ProbeSummaryLine(const ProbeResult& result);

}  // namespace longctx

#endif  // LONGCTX_TRAIN_NIAH_PROBE_REPORT_H_
