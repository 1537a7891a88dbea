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
  double answer_loss = 0;         // mean over trials
  double needle_accuracy = 0;     // found needles / all needles
  double mean_prompt_tokens = 0;
  std::vector<int> bin_found, bin_total;  // per depth bin
};

struct ProbeResult {
  ProbeSettings settings;
  std::vector<ProbeLengthResult> lengths;
  // Longest tested length before the first failing one; 0 when the first
  // tested length fails (or none could be tested).
  int64_t effective_length = 0;
  int64_t first_failing_length = -1;  // -1: none failed
  int64_t trials_run = 0;
  double seconds = 0;
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
absl::StatusOr<ProbeResult> RunProbe(const ProbeSettings& s, const HaystackSource& haystack, ProbeModel& model,
                                     const ProbeRunOptions& options = {});

// Effective length and first failing length from per-length results (in
// ascending length order).
void ComputeEffectiveLength(ProbeResult* result);

}  // namespace longctx

#endif  // LONGCTX_TRAIN_NIAH_PROBE_H_
