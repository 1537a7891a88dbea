// Why: see niah_probe_report.h.
#include "train/probe/niah_probe_report.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "data/text_corpus.h"
#include "train/report/png_plot.h"

namespace longctx {
namespace {

nlohmann::json NullIfNegative(int64_t v) { return v < 0 ? nlohmann::json(nullptr) : nlohmann::json(v); }

nlohmann::json DepthAccuracy(const ProbeLengthResult& l) {
  nlohmann::json a = nlohmann::json::array();
  for (size_t b = 0; b < l.bin_total.size(); ++b)
    a.push_back(l.bin_total[b] > 0 ? nlohmann::json(static_cast<double>(l.bin_found[b]) / l.bin_total[b])
                                   : nlohmann::json(nullptr));
  return a;
}

// "teacher_forced": [{"needles", "lengths": [{"length", "tested", "trials",
// "logprob", "argmax_exact"[, "depth_logprob"]}]}]; depth_logprob (per bin,
// null where no needle fell) only when `depths`.
nlohmann::json RecallJson(const ProbeResult& r, bool depths) {
  nlohmann::json curves = nlohmann::json::array();
  for (const RecallCurve& c : r.recall) {
    nlohmann::json lengths = nlohmann::json::array();
    for (const RecallLengthResult& l : c.lengths) {
      if (!depths && !l.tested) continue;
      nlohmann::json e = {{"length", l.length}};
      if (depths) e["tested"] = l.tested;
      if (l.tested) {
        e["trials"] = l.trials;
        e["logprob"] = l.logprob;
        e["argmax_exact"] = l.argmax_exact;
        if (depths) {
          nlohmann::json d = nlohmann::json::array();
          for (size_t b = 0; b < l.bin_needles.size(); ++b)
            d.push_back(l.bin_needles[b] > 0 ? nlohmann::json(l.bin_logprob[b] / l.bin_needles[b])
                                             : nlohmann::json(nullptr));
          e["depth_logprob"] = std::move(d);
        }
      }
      lengths.push_back(std::move(e));
    }
    curves.push_back({{"needles", c.needles}, {"lengths", std::move(lengths)}});
  }
  return curves;
}

void AddIntervalFields(const ProbeResult& r, nlohmann::json* j) {
  (*j)["interval"] = "wilson95";
  (*j)["effective_length_low"] = r.effective_length_low;
  (*j)["effective_length_high"] = r.effective_length_high;
  (*j)["uncertain_lengths"] = r.uncertain_lengths;
}

}  // namespace

nlohmann::json ProbeResultToJson(const ProbeResult& r) {
  const ProbeSettings& s = r.settings;
  nlohmann::json j = {{"format", s.format.name},
                      {"needles", s.needles},
                      {"trials_per_length", s.trials},
                      {"threshold", s.threshold},
                      {"depth_bins", s.depth_bins},
                      {"seed", s.seed},
                      {"min_len", s.min_len},
                      {"max_len", s.max_len},
                      {"len_step", s.len_step},
                      {"decoded", s.decode},
                      {"effective_length", s.decode ? nlohmann::json(r.effective_length) : nlohmann::json(nullptr)},
                      {"first_failing_length", NullIfNegative(s.decode ? r.first_failing_length : -1)},
                      {"trials_run", r.trials_run},
                      {"seconds", r.seconds}};
  if (s.decode) AddIntervalFields(r, &j);
  if (s.teacher_forced) {
    j["teacher_forced"] = RecallJson(r, /*depths=*/true);
    j["teacher_forced_trials_per_cell"] = s.tf_trials;
    j["teacher_forced_seconds"] = r.recall_seconds;
  }
  nlohmann::json lengths = nlohmann::json::array();
  for (const ProbeLengthResult& l : r.lengths) {
    nlohmann::json e = {{"length", l.length}, {"tested", l.tested}};
    if (l.tested) {
      e["trials"] = l.trials;
      e["answer_loss"] = l.answer_loss;
      e["mean_prompt_tokens"] = l.mean_prompt_tokens;
      if (s.decode) {
        e["passed"] = l.passed;
        e["pass_rate"] = l.pass_rate;
        e["pass_low"] = l.pass_low;
        e["pass_high"] = l.pass_high;
        e["needle_accuracy"] = l.needle_accuracy;
        e["depth_accuracy"] = DepthAccuracy(l);
      }
    }
    lengths.push_back(std::move(e));
  }
  j["lengths"] = std::move(lengths);
  if (!r.trials.empty()) {
    nlohmann::json trials = nlohmann::json::array();
    for (const ProbeTrial& t : r.trials) {
      nlohmann::json e = {{"length", t.length},
                          {"index", t.index},
                          {"numbers", t.sample.numbers},
                          {"depths", t.sample.depths},
                          {"needle_offsets", t.sample.needle_offsets},
                          {"prompt_tokens", t.sample.prompt.size()},
                          {"answer_loss", t.answer_loss}};
      // A byte-level model's greedy output can be any bytes, and JSON strings
      // must be UTF-8 (nlohmann::json throws on dump otherwise): each invalid
      // byte becomes U+FFFD in the report. The scoring used the raw bytes.
      if (s.decode) e["found"] = t.found, e["passed"] = t.passed, e["generated"] = ReplaceInvalidUtf8(t.generated);
      trials.push_back(std::move(e));
    }
    j["trials"] = std::move(trials);
  }
  return j;
}

nlohmann::json ProbeMetricsEvent(const ProbeResult& r, int64_t step) {
  const bool decoded = r.settings.decode;
  nlohmann::json lengths = nlohmann::json::array();
  for (const ProbeLengthResult& l : r.lengths) {
    if (!l.tested) continue;
    nlohmann::json e = {{"length", l.length}, {"answer_loss", l.answer_loss}};
    if (decoded) {
      e["pass_rate"] = l.pass_rate, e["needle_accuracy"] = l.needle_accuracy;
      e["pass_low"] = l.pass_low, e["pass_high"] = l.pass_high;
    }
    lengths.push_back(std::move(e));
  }
  nlohmann::json ev = {{"kind", "probe"},
          {"step", step},
          {"needles", r.settings.needles},
          {"format", r.settings.format.name},
          {"trials_per_length", r.settings.trials},
          {"decoded", decoded},
          {"effective_length", decoded ? nlohmann::json(r.effective_length) : nlohmann::json(nullptr)},
          {"first_failing_length", NullIfNegative(decoded ? r.first_failing_length : -1)},
          {"seconds", r.seconds},
          {"lengths", std::move(lengths)}};
  if (decoded) AddIntervalFields(r, &ev);
  if (r.settings.teacher_forced) {
    ev["teacher_forced"] = RecallJson(r, /*depths=*/false);
    ev["teacher_forced_seconds"] = r.recall_seconds;
  }
  return ev;
}

absl::Status WriteProbeHeatmap(const ProbeResult& r, const std::string& title, const std::string& path) {
  const int bins = r.settings.depth_bins;
  const int cols = static_cast<int>(r.lengths.size());
  if (cols == 0) return absl::InvalidArgumentError(absl::StrCat("probe heatmap ", path, ": no test length"));
  if (!r.settings.decode)
    return absl::InvalidArgumentError(absl::StrCat("probe heatmap ", path, ": the probe ran without decoding"));
  HeatmapOptions o;
  o.width = std::max({640, 120 + 48 * cols, TextWidth(title, kTitleFont) + 40});
  o.height = std::max(420, 160 + 28 * bins);
  o.title = title;
  o.x_label = "test length (prompt tokens)";
  o.y_label = "needle depth (%)";
  o.colorbar_label = "needles retrieved";
  for (const ProbeLengthResult& l : r.lengths) o.col_labels.push_back(absl::StrCat(l.length));
  for (int b = 0; b < bins; ++b) o.row_labels.push_back(absl::StrCat(100 * b / bins));
  Heatmap h(bins, cols, o);
  for (int c = 0; c < cols; ++c)
    for (int b = 0; b < bins; ++b) {
      const ProbeLengthResult& l = r.lengths[c];
      h.Set(b, c, l.tested && l.bin_total[b] > 0 ? static_cast<double>(l.bin_found[b]) / l.bin_total[b]
                                                 : std::numeric_limits<double>::quiet_NaN());
    }
  return h.WritePng(path);
}

absl::Status WriteProbeJson(const ProbeResult& r, const std::string& path) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f << ProbeResultToJson(r).dump(1) << "\n";
    f.close();
    if (!f) return absl::InternalError(absl::StrCat("writing ", tmp, ": ", std::strerror(errno)));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    return absl::InternalError(absl::StrCat("writing ", path, " (rename from ", tmp, "): ", std::strerror(errno)));
  return absl::OkStatus();
}

std::string ProbeSummaryLine(const ProbeResult& r) {
  std::string pass, loss;
  int64_t first = -1, last = -1;
  for (const ProbeLengthResult& l : r.lengths) {
    if (!l.tested) continue;
    if (first < 0) first = l.length;
    last = l.length;
    const bool uncertain = std::find(r.uncertain_lengths.begin(), r.uncertain_lengths.end(), l.length) !=
                           r.uncertain_lengths.end();
    if (r.settings.decode) absl::StrAppend(&pass, absl::StrFormat(" %.2f%s", l.pass_rate, uncertain ? "?" : ""));
    absl::StrAppend(&loss, absl::StrFormat(" %.2f", l.answer_loss));
  }
  if (first < 0) return absl::StrCat("no length in ", r.settings.min_len, "..", r.settings.max_len,
                                     " fits the '", r.settings.format.name, "' format with ", r.settings.needles, " needles");
  std::string tf;
  for (const RecallCurve& c : r.recall) {
    absl::StrAppend(&tf, tf.empty() ? " | tf logprob" : ",", " k=", c.needles);
    for (const RecallLengthResult& l : c.lengths)
      absl::StrAppend(&tf, l.tested ? absl::StrFormat(" %.2f", l.logprob) : std::string(" --"));
  }
  if (!r.settings.decode)
    return absl::StrFormat("answer loss%s%s (no decoding; lengths %d..%d, %d trials, %.1f s)", loss, tf, first, last,
                           r.trials_run, r.seconds);
  std::string range = absl::StrFormat("95%% %d..%d", r.effective_length_low, r.effective_length_high);
  if (!r.uncertain_lengths.empty()) absl::StrAppend(&range, ", uncertain ", absl::StrJoin(r.uncertain_lengths, " "));
  return absl::StrFormat("eff len %d (%s) | pass%s | answer loss%s%s (lengths %d..%d, %d trials, %.1f s)",
                         r.effective_length, range, pass, loss, tf, first, last, r.trials_run, r.seconds);
}

}  // namespace longctx
