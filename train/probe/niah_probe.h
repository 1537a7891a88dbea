// Why: the STRING paper's effective context length is measured with a
// 4-needle needle-in-a-haystack test (SPECS.md "Effective-length probe"): at
// each test length, trials with needles hidden at random depths; greedy
// decoding; a trial passes when at least half of the numbers come back; the
// effective length is the longest length before the first one whose pass rate
// falls under a threshold. This file is that sweep, written against a small
// model interface (ProbeModel) so it is testable with a scripted fake model,
// and shared by `longctx probe` and the trainer's periodic probe.
//
// Beside the all-or-nothing pass rate (which a tiny model sits at 0 or 1 on),
// every trial also records a continuous metric: the teacher-forced loss (mean
// NLL, nats per token) of the correct answer's digit tokens after the
// question, averaged per length. Per-needle retrieval is accumulated per
// (length, depth bin) of the needle's nominal depth: the paper's Figure 4.
//
// A pass rate of k of n trials carries its Wilson 95 % interval
// (train/probe/binomial_interval.h), and the effective length is reported
// beside the two it would be if every pass rate were at its interval's lower
// (upper) bound, with the lengths whose interval straddles the threshold: one
// unlucky draw at a short length reads as "0, but uncertain at 128", not "0".
//
// Trials are a pure function of (seed, length, trial index) and the haystack
// documents (the eval split of the run's data), so every probe of a run — and
// a standalone probe with the same seed — asks the same questions.
#ifndef LONGCTX_TRAIN_NIAH_PROBE_H_
#define LONGCTX_TRAIN_NIAH_PROBE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "data/retrieval_task.h"

namespace longctx {

// What the probe needs from a model.
class ProbeModel {
 public:
  virtual ~ProbeModel() = default;
  // Greedy continuation of prompt: up to max_new_tokens ids, stopping after
  // (and including) stop_id when it is produced.
  virtual absl::StatusOr<std::vector<int32_t>> Greedy(const std::vector<int32_t>& prompt, int max_new_tokens,
                                                      int32_t stop_id) = 0;
  // Teacher-forced NLL (nats) of each answer token given prompt and the
  // preceding answer tokens: answer.size() values.
  virtual absl::StatusOr<std::vector<double>> AnswerTokenLosses(const std::vector<int32_t>& prompt,
                                                                const std::vector<int32_t>& answer) = 0;
  // Teacher-forced scores of each answer token given prompt and the preceding
  // answer tokens, from one forward pass: its log-probability (nats, <= 0)
  // and the model's argmax id at that position (ties to the lowest id, as the
  // greedy sampler): answer.size() of each.
  struct TeacherForcedTokens {
    std::vector<double> logprob;
    std::vector<int32_t> argmax;
  };
  virtual absl::StatusOr<TeacherForcedTokens> TeacherForced(const std::vector<int32_t>& prompt,
                                                            const std::vector<int32_t>& answer) = 0;
};

struct ProbeSettings {
  int64_t min_len = 128, max_len = 1024, len_step = 128;  // test lengths (prompt tokens)
  int trials = 10;       // per length
  int needles = 4;
  int depth_bins = 10;
  double threshold = 0.5;  // a length fails when its pass rate is below this
  uint64_t seed = 1;
  NeedleFormat format = PaperNeedleFormat();
  int extra_new_tokens = 8;  // greedy budget beyond the reference answer's length
  // false: answer losses only (one forward pass per trial, no decoding): no
  // pass rates, no effective length, no heatmap. For cheap learning curves.
  bool decode = true;
  // Teacher-forced needle recall (AddTeacherForcedRecall in
  // train/probe/teacher_forced_recall.h; RunProbe ignores these): per
  // needle count in tf_needles, per length, depth_bins depth cells times
  // tf_trials repeats, one forward pass each.
  bool teacher_forced = false;
  std::vector<int> tf_needles = {1, 4};
  int tf_trials = 1;
};

// min_len..max_len in len_step steps; errors name the flag/field via `prefix`
// ("--" for flags, "probe_" for config fields).
absl::Status ValidateProbeSettings(const ProbeSettings& s, const std::string& prefix);
std::vector<int64_t> ProbeLengths(const ProbeSettings& s);

struct ProbeTrial {
  int64_t length = 0;
  int index = 0;
  NeedleSample sample;
  std::string generated;          // decoded greedy output
  std::vector<bool> found;        // per needle, in document order
  int found_count = 0;
  bool passed = false;
  double answer_loss = 0;         // mean NLL of the answer's digit tokens
};

struct ProbeLengthResult {
  int64_t length = 0;
  bool tested = false;            // false: the fixed parts do not fit this length
  int trials = 0, passed = 0;
  double pass_rate = 0;
  double pass_low = 0, pass_high = 0;  // Wilson 95 % interval of passed / trials
  double answer_loss = 0;         // mean over trials
  double needle_accuracy = 0;     // found needles / all needles
  double mean_prompt_tokens = 0;
  std::vector<int> bin_found, bin_total;  // per depth bin
};

// Teacher-forced recall of one length at one needle count (see
// train/probe/teacher_forced_recall.h).
struct RecallLengthResult {
  int64_t length = 0;
  bool tested = false;     // false: the format's fixed parts with this many needles do not fit
  int trials = 0;
  double logprob = 0;      // mean over trials of the mean log-prob per answer digit token (nats, <= 0)
  double argmax_exact = 0; // share of trials whose every answer digit token is the argmax
  // Per depth bin of each needle's nominal depth: Σ of that needle's mean
  // digit log-prob, and how many needles fell there.
  std::vector<double> bin_logprob;
  std::vector<int> bin_needles;
};

struct RecallCurve {
  int needles = 1;
  std::vector<RecallLengthResult> lengths;
};

struct ProbeResult {
  ProbeSettings settings;
  std::vector<RecallCurve> recall;  // one per settings.tf_needles, by AddTeacherForcedRecall
  std::vector<ProbeLengthResult> lengths;
  // Longest tested length before the first failing one; 0 when the first
  // tested length fails (or none could be tested).
  int64_t effective_length = 0;
  int64_t first_failing_length = -1;  // -1: none failed
  // The same rule applied to the intervals' lower and upper bounds instead of
  // the pass rates: effective_length_low <= effective_length <= effective_length_high.
  int64_t effective_length_low = 0, effective_length_high = 0;
  // Tested lengths whose interval straddles the threshold (pass_low <
  // threshold <= pass_high): whether they pass is not settled by these trials.
  std::vector<int64_t> uncertain_lengths;
  int64_t trials_run = 0;
  double seconds = 0;          // the whole probe, teacher-forced recall included
  double recall_seconds = 0;   // of which the teacher-forced recall
  std::vector<ProbeTrial> trials;   // kept when ProbeRunOptions::keep_trials
};

// The trial for (settings.seed, length, index) over a haystack source.
absl::StatusOr<NeedleSample> MakeProbeTrial(const ProbeSettings& s, const HaystackSource& haystack, int64_t length,
                                            int index);

// Scores generated text: which needles' numbers appear in it, and whether at
// least ceil(k/2) do.
void ScoreProbeTrial(const std::string& generated, ProbeTrial* trial);

// Mean of the losses of the answer tokens that decode to text containing an
// ASCII digit (all tokens when none does).
double AnswerDigitLoss(const std::vector<int32_t>& answer, const std::vector<double>& losses,
                       const Tokenizer& tokenizer);

struct ProbeRunOptions {
  bool keep_trials = false;
  // Called after each length (for progress lines); may be empty.
  std::function<void(const ProbeLengthResult&)> on_length;
};

// The whole sweep. Lengths whose fixed parts do not fit are skipped (untested).
// The teacher-forced recall is not run here: AddTeacherForcedRecall
// (train/probe/teacher_forced_recall.h) adds it to the result.
absl::StatusOr<ProbeResult> RunProbe(const ProbeSettings& s, const HaystackSource& haystack, ProbeModel& model,
                                     const ProbeRunOptions& options = {});

// Effective length (and its low / high versions), first failing length and
// uncertain lengths from per-length results (in ascending length order; each
// tested one's pass_rate, pass_low and pass_high set).
void ComputeEffectiveLength(ProbeResult* result);

}  // namespace longctx

#endif  // LONGCTX_TRAIN_NIAH_PROBE_H_
