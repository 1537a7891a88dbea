// Why: see position_frequency.h.
#include "data/position_frequency.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "base/log.h"

namespace longctx {

PositionFrequency::PositionFrequency(int64_t max_len) : max_len_(max_len), hist_(max_len + 1, 0) {
  CHECK_GT(max_len, 0);
}

void PositionFrequency::AddSegment(int64_t length, uint64_t times) {
  CHECK(length >= 0 && length <= max_len_) << "segment of " << length << " tokens > max_len " << max_len_;
  hist_[length] += times;
}

void PositionFrequency::AddCuSeqlens(absl::Span<const int32_t> cu) {
  for (size_t i = 1; i < cu.size(); ++i) AddSegment(cu[i] - cu[i - 1]);
}

void PositionFrequency::Merge(const PositionFrequency& other) {
  CHECK_EQ(other.max_len_, max_len_);
  for (size_t s = 0; s < hist_.size(); ++s) hist_[s] += other.hist_[s];
}

std::vector<double> PositionFrequency::Counts(int64_t window) const {
  // Sweep i downwards keeping (# segments longer than i) and (Σ of their lengths).
  std::vector<double> f(max_len_, 0.0);
  double count_gt = 0, sum_gt = 0;
  for (int64_t i = max_len_ - 1; i >= 0; --i) {
    const double h = static_cast<double>(hist_[i + 1]);
    count_gt += h;
    sum_gt += h * static_cast<double>(i + 1);
    f[i] = sum_gt - static_cast<double>(i) * count_gt;
  }
  if (window > 0)
    for (int64_t i = window; i < max_len_; ++i) f[i] = 0;
  return f;
}

PositionFrequencySummary PositionFrequency::Summarize(double k, int64_t window) const {
  PositionFrequencySummary s;
  s.max_len = max_len_;
  s.k = k;
  const std::vector<double> f = Counts(window);
  double total = 0, ge_half = 0, ge_3q = 0, le_half = 0;
  for (int64_t i = 0; i < max_len_; ++i) {
    total += f[i];
    if (2 * i >= max_len_) ge_half += f[i];
    if (4 * i >= 3 * max_len_) ge_3q += f[i];
    if (2 * i <= max_len_) le_half += f[i];
    if (f[i] >= k && f[i] > 0) s.largest_i_with_k = i;
  }
  s.total_pairs = total;
  s.pairs_ge_half = ge_half;
  s.pairs_ge_three_quarters = ge_3q;
  if (total > 0) {
    s.share_ge_half = ge_half / total;
    s.share_ge_three_quarters = ge_3q / total;
    s.share_le_half = le_half / total;
  }
  return s;
}

std::vector<double> PositionFrequency::HistogramAsDoubles() const {
  return std::vector<double>(hist_.begin(), hist_.end());
}

absl::Status PositionFrequency::SetHistogramFromDoubles(absl::Span<const double> h) {
  if (h.size() != hist_.size())
    return absl::InvalidArgumentError(absl::StrCat("position histogram has ", h.size(), " bins, want ", hist_.size()));
  for (size_t s = 0; s < h.size(); ++s) {
    if (!(h[s] >= 0) || h[s] != std::floor(h[s]) || h[s] > 9007199254740992.0)
      return absl::InvalidArgumentError(absl::StrCat("position histogram bin ", s, " is not a count: ", h[s]));
    hist_[s] = static_cast<uint64_t>(h[s]);
  }
  return absl::OkStatus();
}

nlohmann::json PositionFrequency::ToJson() const {
  nlohmann::json lengths = nlohmann::json::array();
  for (size_t s = 0; s < hist_.size(); ++s)
    if (hist_[s] != 0) lengths.push_back({s, hist_[s]});
  return {{"max_len", max_len_}, {"lengths", lengths}};
}

absl::StatusOr<PositionFrequency> PositionFrequency::FromJson(const nlohmann::json& j) {
  if (!j.is_object() || !j.contains("max_len") || !j.contains("lengths") || !j["max_len"].is_number_integer() ||
      !j["lengths"].is_array())
    return absl::DataLossError("position frequency: want {\"max_len\": int, \"lengths\": [[len, count], ...]}");
  const int64_t max_len = j["max_len"].get<int64_t>();
  if (max_len <= 0) return absl::DataLossError(absl::StrCat("position frequency: max_len ", max_len));
  PositionFrequency pf(max_len);
  for (const auto& e : j["lengths"]) {
    if (!e.is_array() || e.size() != 2 || !e[0].is_number_integer() || !e[1].is_number_unsigned())
      return absl::DataLossError(absl::StrCat("position frequency: bad entry ", e.dump()));
    const int64_t len = e[0].get<int64_t>();
    if (len < 0 || len > max_len)
      return absl::DataLossError(absl::StrCat("position frequency: length ", len, " outside [0, ", max_len, "]"));
    pf.hist_[len] += e[1].get<uint64_t>();
  }
  return pf;
}

nlohmann::json BinnedCounts(const std::vector<double>& f, int bins_per_octave) {
  const int64_t n = static_cast<int64_t>(f.size());
  // Bin edges 0, 1, then round(2^(k / bins_per_octave)) without repeats, then n.
  std::vector<int64_t> edges = {0};
  for (int k = 0; edges.back() < n; ++k) {
    const int64_t e = std::min<int64_t>(n, std::llround(std::pow(2.0, static_cast<double>(k) / bins_per_octave)));
    if (e > edges.back()) edges.push_back(e);
  }
  nlohmann::json out = nlohmann::json::array();
  for (size_t b = 0; b + 1 < edges.size(); ++b) {
    double sum = 0;
    for (int64_t i = edges[b]; i < edges[b + 1]; ++i) sum += f[i];
    out.push_back({edges[b], edges[b + 1], sum});
  }
  return out;
}

}  // namespace longctx
