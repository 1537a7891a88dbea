// Why: see niah_probe.h.
#include "train/probe/niah_probe.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <optional>

#include "absl/strings/str_cat.h"
#include "data/splitmix64.h"
#include "train/probe/binomial_interval.h"
#include "train/report/progress.h"

namespace longctx {
namespace {

constexpr uint64_t kProbeSalt = 0x6C6F6E6763747850ULL;  // "longctxP"

}  // namespace

absl::Status ValidateProbeSettings(const ProbeSettings& s, const std::string& p) {
  auto bad = [&](const std::string& field, const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(p, field, ": ", why));
  };
  if (s.min_len < 1) return bad("min_len", absl::StrCat("must be >= 1 (got ", s.min_len, ")"));
  if (s.max_len < s.min_len) return bad("max_len", absl::StrCat("must be >= min_len ", s.min_len, " (got ", s.max_len, ")"));
  if (s.len_step < 1) return bad("len_step", absl::StrCat("must be >= 1 (got ", s.len_step, ")"));
  if (s.trials < 1) return bad("trials", absl::StrCat("must be >= 1 (got ", s.trials, ")"));
  if (s.needles < 1 || s.needles > 64) return bad("needles", absl::StrCat("must be in [1, 64] (got ", s.needles, ")"));
  if (s.depth_bins < 1 || s.depth_bins > 100)
    return bad("depth_bins", absl::StrCat("must be in [1, 100] (got ", s.depth_bins, ")"));
  if (!(s.threshold >= 0 && s.threshold <= 1)) return bad("threshold", absl::StrCat("must be in [0, 1] (got ", s.threshold, ")"));
  if (s.extra_new_tokens < 0) return bad("extra_new_tokens", "must be >= 0");
  if (s.teacher_forced) {
    if (s.tf_needles.empty()) return bad("tf_needles", "must list at least one needle count");
    for (int k : s.tf_needles)
      if (k < 1 || k > 64) return bad("tf_needles", absl::StrCat("each must be in [1, 64] (got ", k, ")"));
    if (s.tf_trials < 1) return bad("tf_trials", absl::StrCat("must be >= 1 (got ", s.tf_trials, ")"));
  }
  return absl::OkStatus();
}

std::vector<int64_t> ProbeLengths(const ProbeSettings& s) {
  std::vector<int64_t> out;
  for (int64_t L = s.min_len; L <= s.max_len && s.len_step > 0; L += s.len_step) out.push_back(L);
  return out;
}

absl::StatusOr<NeedleSample> MakeProbeTrial(const ProbeSettings& s, const HaystackSource& haystack, int64_t length,
                                            int index) {
  const uint64_t seed = Mix64(Mix64(s.seed ^ kProbeSalt) ^ Mix64(static_cast<uint64_t>(length))) ^
                        Mix64(static_cast<uint64_t>(index) + 0x2545F4914F6CDD1DULL);
  return BuildNeedleSample(s.format, s.needles, length, haystack, seed);
}

void ScoreProbeTrial(const std::string& generated, ProbeTrial* t) {
  t->generated = generated;
  const size_t k = t->sample.numbers.size();
  t->found.assign(k, false);
  t->found_count = 0;
  for (size_t j = 0; j < k; ++j) {
    t->found[j] = generated.find(t->sample.numbers[j]) != std::string::npos;
    t->found_count += t->found[j];
  }
  t->passed = k > 0 && static_cast<size_t>(t->found_count) >= (k + 1) / 2;
}

double AnswerDigitLoss(const std::vector<int32_t>& answer, const std::vector<double>& losses,
                       const Tokenizer& tokenizer) {
  double sum = 0, all = 0;
  int n = 0;
  for (size_t i = 0; i < answer.size() && i < losses.size(); ++i) {
    all += losses[i];
    const std::string text = tokenizer.Decode(absl::MakeConstSpan(&answer[i], 1));
    bool digit = false;
    for (char c : text) digit |= c >= '0' && c <= '9';
    if (digit) sum += losses[i], ++n;
  }
  if (n > 0) return sum / n;
  return losses.empty() ? 0.0 : all / static_cast<double>(std::min(answer.size(), losses.size()));
}

namespace {

// Longest tested length before the first whose rate(l) is below threshold.
template <typename Rate>
int64_t LastPassingLength(const std::vector<ProbeLengthResult>& lengths, double threshold, Rate rate,
                          int64_t* first_failing = nullptr) {
  int64_t last = 0;
  if (first_failing != nullptr) *first_failing = -1;
  for (const ProbeLengthResult& l : lengths) {
    if (!l.tested) continue;
    if (rate(l) < threshold) {
      if (first_failing != nullptr) *first_failing = l.length;
      break;
    }
    last = l.length;
  }
  return last;
}

}  // namespace

void ComputeEffectiveLength(ProbeResult* r) {
  r->effective_length = r->effective_length_low = r->effective_length_high = 0;
  r->first_failing_length = -1;
  r->uncertain_lengths.clear();
  if (!r->settings.decode) return;
  const double th = r->settings.threshold;
  r->effective_length =
      LastPassingLength(r->lengths, th, [](const ProbeLengthResult& l) { return l.pass_rate; }, &r->first_failing_length);
  r->effective_length_low = LastPassingLength(r->lengths, th, [](const ProbeLengthResult& l) { return l.pass_low; });
  r->effective_length_high = LastPassingLength(r->lengths, th, [](const ProbeLengthResult& l) { return l.pass_high; });
  for (const ProbeLengthResult& l : r->lengths)
    if (l.tested && l.pass_low < th && th <= l.pass_high) r->uncertain_lengths.push_back(l.length);
}

absl::StatusOr<ProbeResult> RunProbe(const ProbeSettings& s, const HaystackSource& haystack, ProbeModel& model,
                                     const ProbeRunOptions& options) {
  absl::Status st = ValidateProbeSettings(s, "probe ");
  if (!st.ok()) return st;
  const auto start = std::chrono::steady_clock::now();
  const Tokenizer& tok = haystack.tokenizer();
  const int64_t fixed = NeedleFixedTokens(s.format, s.needles, tok);
  ProbeResult result;
  result.settings = s;
  // A live "probe i/N trials | rate | ETA" line on a terminal only (logs get the callers' per-length lines).
  std::optional<Progress> progress;
  if (isatty(fileno(stdout)) == 1)
    progress.emplace("probe", static_cast<int64_t>(ProbeLengths(s).size()) * s.trials, "trials", stdout,
                     Progress::Mode::kLive);
  for (int64_t L : ProbeLengths(s)) {
    ProbeLengthResult r;
    r.length = L;
    r.bin_found.assign(s.depth_bins, 0);
    r.bin_total.assign(s.depth_bins, 0);
    r.tested = fixed <= L;
    if (r.tested) {
      double loss_sum = 0, prompt_sum = 0;
      int found = 0;
      for (int i = 0; i < s.trials; ++i) {
        ProbeTrial t;
        t.length = L;
        t.index = i;
        absl::StatusOr<NeedleSample> sample = MakeProbeTrial(s, haystack, L, i);
        if (!sample.ok())
          return absl::Status(sample.status().code(),
                              absl::StrCat("probe: length ", L, " trial ", i, ": ", sample.status().message()));
        t.sample = std::move(*sample);
        if (s.decode) {
          const int max_new = static_cast<int>(t.sample.answer.size()) + s.extra_new_tokens;
          absl::StatusOr<std::vector<int32_t>> gen = model.Greedy(t.sample.prompt, max_new, tok.eos_id());
          if (!gen.ok())
            return absl::Status(gen.status().code(), absl::StrCat("probe: length ", L, " trial ", i,
                                                                  " greedy decoding: ", gen.status().message()));
          if (!gen->empty() && gen->back() == tok.eos_id()) gen->pop_back();
          ScoreProbeTrial(tok.Decode(*gen), &t);
        } else {
          ScoreProbeTrial("", &t);
        }
        absl::StatusOr<std::vector<double>> losses = model.AnswerTokenLosses(t.sample.prompt, t.sample.answer);
        if (!losses.ok())
          return absl::Status(losses.status().code(), absl::StrCat("probe: length ", L, " trial ", i,
                                                                   " answer loss: ", losses.status().message()));
        t.answer_loss = AnswerDigitLoss(t.sample.answer, *losses, tok);
        loss_sum += t.answer_loss;
        prompt_sum += static_cast<double>(t.sample.prompt.size());
        r.trials += 1;
        r.passed += t.passed;
        found += t.found_count;
        for (size_t j = 0; j < t.found.size(); ++j) {
          const int bin = std::min(s.depth_bins - 1, static_cast<int>(std::floor(t.sample.depths[j] * s.depth_bins)));
          r.bin_total[bin] += 1;
          r.bin_found[bin] += t.found[j];
        }
        ++result.trials_run;
        if (progress) progress->Update(result.trials_run);
        if (options.keep_trials) result.trials.push_back(std::move(t));
      }
      r.pass_rate = static_cast<double>(r.passed) / r.trials;
      absl::StatusOr<BinomialInterval> ci = WilsonInterval(r.passed, r.trials);
      if (!ci.ok()) return absl::Status(ci.status().code(), absl::StrCat("probe: length ", L, ": ", ci.status().message()));
      r.pass_low = ci->low;
      r.pass_high = ci->high;
      r.answer_loss = loss_sum / r.trials;
      r.needle_accuracy = static_cast<double>(found) / (static_cast<double>(r.trials) * s.needles);
      r.mean_prompt_tokens = prompt_sum / r.trials;
    }
    result.lengths.push_back(r);
    if (progress) progress->Clear();
    if (options.on_length) options.on_length(result.lengths.back());
  }
  if (s.decode) ComputeEffectiveLength(&result);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace longctx
