// Why: see sampling.h.
#include "model/sampling.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "absl/strings/str_cat.h"

namespace longctx {
namespace {

// Ids sorted by logit, largest first, ties by lower id; non-finite and NaN
// logits (never valid choices) last. +inf counts as the largest.
std::vector<int32_t> Ranked(absl::Span<const float> logits) {
  std::vector<int32_t> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  auto key = [&](int32_t i) {
    const float x = logits[i];
    return std::isnan(x) ? -std::numeric_limits<float>::infinity() : x;
  };
  std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return key(a) > key(b); });
  return ids;
}

}  // namespace

absl::Status ValidateSamplingOptions(const SamplingOptions& o) {
  if (!(o.temperature >= 0) || !std::isfinite(o.temperature))
    return absl::InvalidArgumentError(absl::StrCat("temperature: must be finite and >= 0 (got ", o.temperature, ")"));
  if (o.top_k < 0) return absl::InvalidArgumentError(absl::StrCat("top_k: must be >= 0 (got ", o.top_k, ")"));
  return absl::OkStatus();
}

Sampler::Sampler(const SamplingOptions& options) : options_(options), rng_(options.seed) {}

std::vector<double> Sampler::Probabilities(absl::Span<const float> logits) const {
  std::vector<double> p(logits.size(), 0.0);
  if (logits.empty()) return p;
  const std::vector<int32_t> ranked = Ranked(logits);
  const float best = logits[ranked[0]];
  if (!(best > -std::numeric_limits<float>::infinity())) {  // nothing finite: id 0
    p[0] = 1.0;
    return p;
  }
  if (options_.temperature == 0.0 || std::isinf(best)) {
    p[ranked[0]] = 1.0;
    return p;
  }
  size_t k = options_.top_k > 0 ? std::min<size_t>(options_.top_k, ranked.size()) : ranked.size();
  double sum = 0;
  for (size_t r = 0; r < k; ++r) {
    const float x = logits[ranked[r]];
    if (!std::isfinite(x)) break;
    const double e = std::exp((static_cast<double>(x) - best) / options_.temperature);
    p[ranked[r]] = e;
    sum += e;
  }
  for (double& e : p) e /= sum;
  return p;
}

int32_t Sampler::Next(absl::Span<const float> logits) {
  if (logits.empty()) return 0;
  // One uniform per step whatever the options, so the stream stays aligned.
  const double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
  const std::vector<double> p = Probabilities(logits);
  if (options_.temperature == 0.0) return static_cast<int32_t>(std::max_element(p.begin(), p.end()) - p.begin());
  // Inverse CDF over ids in rank order (largest probability first).
  const std::vector<int32_t> ranked = Ranked(logits);
  double acc = 0;
  int32_t last = ranked[0];
  for (int32_t id : ranked) {
    if (p[id] <= 0) continue;
    acc += p[id];
    last = id;
    if (u < acc) return id;
  }
  return last;  // u within rounding of 1
}

}  // namespace longctx
