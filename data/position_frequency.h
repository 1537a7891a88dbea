// Why: the STRING paper's position frequency f(i) = Σ_s max(|s| − i, 0) is the
// number of (query, key) pairs at relative distance i that attention computes,
// summed over attention segments s. longctx counts it live, from the segments
// the model actually attends over (cu_seqlens of every micro-batch, all ranks).
//
// Counting is exact and O(1) per segment: we keep the histogram of segment
// lengths h[s]; then f(i) = Σ_{s > i} h[s]·(s − i). A sliding-window layer of
// window w computes only distances i < w, so its f is the full f truncated at w.
#ifndef LONGCTX_DATA_POSITION_FREQUENCY_H_
#define LONGCTX_DATA_POSITION_FREQUENCY_H_

#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace longctx {

struct PositionFrequencySummary {
  int64_t max_len = 0;           // L: distances are in [0, L)
  double total_pairs = 0;        // Σ_i f(i) (full attention)
  double share_ge_half = 0;      // fraction of pairs with i >= L/2
  double share_ge_three_quarters = 0;  // i >= 3L/4
  double share_le_half = 0;      // i <= L/2 (the paper's "i <= 1024 at L = 2048")
  double pairs_ge_half = 0;      // Σ_{i >= L/2} f(i): pairs, not a share, to compare
  double pairs_ge_three_quarters = 0;  // packings over the same tokens; i >= 3L/4
  int64_t largest_i_with_k = -1; // largest i with f(i) >= k
  double k = 0;
};

class PositionFrequency {
 public:
  // Distances are tracked in [0, max_len); longer segments are an error in Add.
  explicit PositionFrequency(int64_t max_len);

  int64_t max_len() const { return max_len_; }
  // One attention segment of `length` tokens (a document piece with document
  // masking, a whole row without).
  void AddSegment(int64_t length, uint64_t times = 1);
  // All segments of a packed batch given by cu_seqlens (prefix sums).
  void AddCuSeqlens(absl::Span<const int32_t> cu_seqlens);
  void Merge(const PositionFrequency& other);

  // f(i) for i in [0, max_len) for full attention; window w > 0 truncates (i < w).
  std::vector<double> Counts(int64_t window = 0) const;
  PositionFrequencySummary Summarize(double k, int64_t window = 0) const;

  // The segment-length histogram: what checkpoints store and ranks all-reduce.
  const std::vector<uint64_t>& length_histogram() const { return hist_; }
  std::vector<double> HistogramAsDoubles() const;
  absl::Status SetHistogramFromDoubles(absl::Span<const double> h);
  nlohmann::json ToJson() const;  // {"max_len": L, "lengths": [[len, count], ...]}
  static absl::StatusOr<PositionFrequency> FromJson(const nlohmann::json& j);

 private:
  int64_t max_len_;
  std::vector<uint64_t> hist_;  // hist_[s] = segments of length s, s in [0, max_len]
};

// Log-spaced summary of f for metrics lines: [[i_begin, i_end, pairs], ...].
nlohmann::json BinnedCounts(const std::vector<double>& f, int bins_per_octave = 2);

}  // namespace longctx

#endif  // LONGCTX_DATA_POSITION_FREQUENCY_H_
