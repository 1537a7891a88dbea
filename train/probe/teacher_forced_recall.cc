// Why: see teacher_forced_recall.h.
#include "train/probe/teacher_forced_recall.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "data/splitmix64.h"

namespace longctx {
namespace {

constexpr uint64_t kRecallSalt = 0x6C6374785446524BULL;  // distinct from the greedy probe's trials

bool HasDigit(const std::string& text) {
  return std::any_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

absl::StatusOr<std::vector<int>> ParseNeedleCounts(const std::string& text, const std::string& field) {
  std::vector<int> out;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    int k = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(part), &k) || k < 1 || k > 64)
      return absl::InvalidArgumentError(absl::StrCat(field, ": \"", part, "\" in \"", text,
                                                     "\" is not a needle count in [1, 64]; want e.g. \"1,4\""));
    out.push_back(k);
  }
  return out;
}

std::vector<double> RecallCellDepths(int needles, int cell, int cells) {
  std::vector<double> d;
  const double w = 0.99 / needles, f = (cell + 0.5) / cells;
  for (int j = 0; j < needles; ++j) d.push_back((j + f) * w);
  return d;
}

absl::StatusOr<NeedleSample> MakeRecallTrial(const ProbeSettings& s, const HaystackSource& haystack, int64_t length,
                                             int needles, int cell, int repeat) {
  const uint64_t seed = Mix64(Mix64(s.seed ^ kRecallSalt) ^ Mix64(static_cast<uint64_t>(length))) ^
                        Mix64((static_cast<uint64_t>(needles) << 32) + static_cast<uint64_t>(repeat));
  const std::vector<double> depths = RecallCellDepths(needles, cell, s.depth_bins);
  return BuildNeedleSample(s.format, needles, length, haystack, seed, &depths);
}

std::vector<std::pair<int, int>> DigitRuns(const std::vector<int32_t>& answer, const Tokenizer& tokenizer) {
  std::vector<std::pair<int, int>> runs;
  for (int i = 0; i < static_cast<int>(answer.size()); ++i) {
    if (!HasDigit(tokenizer.Decode(absl::MakeConstSpan(&answer[i], 1)))) continue;
    if (!runs.empty() && runs.back().second == i) {
      runs.back().second = i + 1;
    } else {
      runs.emplace_back(i, i + 1);
    }
  }
  return runs;
}

absl::StatusOr<std::vector<RecallCurve>> RunTeacherForcedRecall(const ProbeSettings& s, const HaystackSource& haystack,
                                                                ProbeModel& model) {
  const Tokenizer& tok = haystack.tokenizer();
  std::vector<RecallCurve> out;
  for (int k : s.tf_needles) {
    RecallCurve curve;
    curve.needles = k;
    const int64_t fixed = NeedleFixedTokens(s.format, k, tok);
    for (int64_t L : ProbeLengths(s)) {
      RecallLengthResult r;
      r.length = L;
      r.tested = fixed <= L;
      r.bin_logprob.assign(s.depth_bins, 0.0);
      r.bin_needles.assign(s.depth_bins, 0);
      if (r.tested) {
        double sum = 0;
        int exact = 0;
        for (int rep = 0; rep < s.tf_trials; ++rep) {
          for (int cell = 0; cell < s.depth_bins; ++cell) {
            auto where = [&] { return absl::StrCat("teacher-forced recall: ", k, " needles, length ", L, " cell ", cell,
                                                   " repeat ", rep, ": "); };
            absl::StatusOr<NeedleSample> t = MakeRecallTrial(s, haystack, L, k, cell, rep);
            if (!t.ok()) return absl::Status(t.status().code(), absl::StrCat(where(), t.status().message()));
            absl::StatusOr<ProbeModel::TeacherForcedTokens> tf = model.TeacherForced(t->prompt, t->answer);
            if (!tf.ok()) return absl::Status(tf.status().code(), absl::StrCat(where(), tf.status().message()));
            if (tf->logprob.size() != t->answer.size() || tf->argmax.size() != t->answer.size())
              return absl::InternalError(absl::StrCat(where(), "the model scored ", tf->logprob.size(), " of ",
                                                      t->answer.size(), " answer tokens"));
            const std::vector<std::pair<int, int>> runs = DigitRuns(t->answer, tok);
            double trial_sum = 0;
            int trial_n = 0;
            bool all_argmax = true;
            for (const auto& [b, e] : runs)
              for (int i = b; i < e; ++i) {
                trial_sum += tf->logprob[i], ++trial_n;
                all_argmax &= tf->argmax[i] == t->answer[i];
              }
            if (trial_n == 0)
              return absl::InternalError(absl::StrCat(where(), "the answer has no digit token"));
            sum += trial_sum / trial_n;
            exact += all_argmax;
            r.trials += 1;
            // One digit run per needle (in depth order) unless the tokenizer
            // merged them; then the trial counts, its needles are not binned.
            if (static_cast<int>(runs.size()) == k) {
              for (int j = 0; j < k; ++j) {
                double ns = 0;
                for (int i = runs[j].first; i < runs[j].second; ++i) ns += tf->logprob[i];
                const int bin = std::min(s.depth_bins - 1, static_cast<int>(std::floor(t->depths[j] * s.depth_bins)));
                r.bin_logprob[bin] += ns / (runs[j].second - runs[j].first);
                r.bin_needles[bin] += 1;
              }
            }
          }
        }
        r.logprob = sum / r.trials;
        r.argmax_exact = static_cast<double>(exact) / r.trials;
      }
      curve.lengths.push_back(std::move(r));
    }
    out.push_back(std::move(curve));
  }
  return out;
}

absl::Status AddTeacherForcedRecall(const HaystackSource& haystack, ProbeModel& model, ProbeResult* result) {
  if (!result->settings.teacher_forced) return absl::OkStatus();
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<std::vector<RecallCurve>> recall = RunTeacherForcedRecall(result->settings, haystack, model);
  if (!recall.ok()) return absl::Status(recall.status().code(), absl::StrCat("probe: ", recall.status().message()));
  result->recall = std::move(*recall);
  result->recall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result->seconds += result->recall_seconds;
  return absl::OkStatus();
}

}  // namespace longctx
