// Why: greedy decoding scores a needle trial all-or-nothing, and a small model
// sits at pass rate 0 until retrieval appears, then jumps. The log-probability
// the model gives the correct answer's digits, teacher-forced after the
// question, moves before that: it rises while the pass rate still reads 0
// (and it works on a base model that has not learned to answer at all). It is
// one forward pass per trial, no decoding, so a grid of lengths × depths with
// 1 and 4 needles costs less than the greedy probe at one needle count.
//
// The grid: for each needle count k and length L, depth_bins cells times
// tf_trials repeats. Cell b places needle j of k at nominal depth
// (j + (b + ½) / depth_bins) · 0.99 / k — for one needle the bin centres
// 0.0495, 0.1485, ..., for four the same relative place inside each needle's
// quarter. Repeat r draws numbers and haystack from (seed, L, k, r), the same
// for every cell, so along a row only the needles' places differ.
//
// Scores per trial: the mean log-prob of the answer's digit tokens (the
// answer " N1, ..., Nk." without its punctuation), and whether every digit
// token is the argmax (what greedy decoding would reproduce, given the
// preceding digits right). Per needle, the mean log-prob of its own digits
// (the j-th run of consecutive digit tokens) goes to the depth bin of its
// nominal depth.
#ifndef LONGCTX_TRAIN_PROBE_TEACHER_FORCED_RECALL_H_
#define LONGCTX_TRAIN_PROBE_TEACHER_FORCED_RECALL_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "train/probe/niah_probe.h"

namespace longctx {

// "1,4" → {1, 4}: comma-separated needle counts, each in [1, 64]; errors name
// `field` and the bad entry.
absl::StatusOr<std::vector<int>> ParseNeedleCounts(const std::string& text, const std::string& field);

// The nominal depths of cell `cell` of `cells` for k needles (see above).
std::vector<double> RecallCellDepths(int needles, int cell, int cells);

// The sample of repeat r in cell b at (length, needles).
absl::StatusOr<NeedleSample> MakeRecallTrial(const ProbeSettings& s, const HaystackSource& haystack, int64_t length,
                                             int needles, int cell, int repeat);

// Per-needle digit runs: for each maximal run of answer tokens whose text holds
// an ASCII digit, its [begin, end) token range, in order.
std::vector<std::pair<int, int>> DigitRuns(const std::vector<int32_t>& answer, const Tokenizer& tokenizer);

// The whole grid over settings.tf_needles × ProbeLengths(s); lengths where the
// fixed parts with k needles do not fit are untested.
absl::StatusOr<std::vector<RecallCurve>> RunTeacherForcedRecall(const ProbeSettings& s, const HaystackSource& haystack,
                                                                ProbeModel& model);

// When result->settings.teacher_forced: runs the grid with result->settings
// and stores it in result->recall, its time in recall_seconds (added to
// seconds too). A no-op otherwise.
absl::Status AddTeacherForcedRecall(const HaystackSource& haystack, ProbeModel& model, ProbeResult* result);

}  // namespace longctx

#endif  // LONGCTX_TRAIN_PROBE_TEACHER_FORCED_RECALL_H_
