// Why: see context_balance.h.
#include "data/context_balance.h"

#include <algorithm>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "base/log.h"

namespace longctx {

int64_t VisiblePairs(int64_t begin, int64_t end, int32_t window) {
  if (end <= begin) return 0;
  auto ramp = [](int64_t a, int64_t b) { return (b * (b + 1) - a * (a + 1)) / 2; };  // Σ_{i=a}^{b-1} (i + 1)
  if (window <= 0) return ramp(begin, end);
  const int64_t w = window, split = std::clamp<int64_t>(w, begin, end);  // offsets < w see i + 1 keys
  return ramp(begin, split) + (end - split) * w;
}

std::vector<int64_t> ChunkAttentionWork(const PackedBatch& batch, int32_t row, int32_t num_chunks,
                                        const std::vector<int32_t>& windows) {
  CHECK(num_chunks > 0 && batch.seq_len % num_chunks == 0)
      << "seq_len " << batch.seq_len << " is not divisible by " << num_chunks << " chunks";
  const int64_t L = batch.seq_len / num_chunks;
  std::vector<int64_t> work(num_chunks, 0);
  for (const auto& [start, len] : SegmentsOfRow(batch, row)) {
    const int64_t end = int64_t{start} + len;
    for (int64_t c = start / L; c < num_chunks && c * L < end; ++c) {
      const int64_t b = std::max<int64_t>(c * L, start) - start, e = std::min<int64_t>((c + 1) * L, end) - start;
      for (int32_t w : windows) work[c] += VisiblePairs(b, e, w);
    }
  }
  return work;
}

std::vector<int64_t> RankAttentionWork(const PackedBatch& batch, int32_t row, const ContextAssignment& assignment,
                                       const std::vector<int32_t>& windows) {
  const std::vector<int64_t> chunk = ChunkAttentionWork(batch, row, assignment.num_chunks, windows);
  std::vector<int64_t> work(assignment.cp, 0);
  for (int32_t r = 0; r < assignment.cp; ++r)
    for (int32_t c : assignment.chunks_of_rank[r]) work[r] += chunk[c];
  return work;
}

int64_t ShardAttentionWork(const ContextShard& shard, const std::vector<int32_t>& windows) {
  int64_t work = 0;
  for (size_t s = 0; s + 1 < shard.cu_seqlens.size(); ++s) {
    const int32_t doc = shard.segment_doc_begin[s];
    for (int32_t i = shard.cu_seqlens[s]; i < shard.cu_seqlens[s + 1]; ++i) {
      const int64_t keys = int64_t{shard.GlobalPosition(i)} - doc + 1;  // the query itself and its predecessors
      for (int32_t w : windows) work += w > 0 ? std::min<int64_t>(keys, w) : keys;
    }
  }
  return work;
}

double MaxOverMean(const std::vector<int64_t>& work) {
  if (work.empty()) return 1.0;
  const double total = static_cast<double>(std::accumulate(work.begin(), work.end(), int64_t{0}));
  if (total <= 0) return 1.0;
  return static_cast<double>(*std::max_element(work.begin(), work.end())) * static_cast<double>(work.size()) / total;
}

absl::StatusOr<ContextAssignment> BalancedAssignment(const PackedBatch& batch, int32_t row, int32_t cp,
                                                     int32_t chunks_per_rank, const std::vector<int32_t>& windows) {
  if (cp < 1 || chunks_per_rank < 1)
    return absl::InvalidArgumentError(
        absl::StrCat("context parallelism: cp = ", cp, " and chunks_per_rank = ", chunks_per_rank, " must be >= 1"));
  const int32_t K = cp * chunks_per_rank;
  if (batch.seq_len <= 0 || batch.seq_len % K != 0)
    return absl::InvalidArgumentError(absl::StrCat("context parallelism: seq_len ", batch.seq_len,
                                                   " is not divisible by cp x chunks_per_rank = ", K,
                                                   " (the chunks must be equal)"));
  if (row < 0 || row >= batch.batch_size)
    return absl::InvalidArgumentError(absl::StrCat("context parallelism: row ", row, " of ", batch.batch_size));
  const std::vector<int64_t> cw = ChunkAttentionWork(batch, row, K, windows);
  std::vector<int32_t> order(K);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return cw[a] > cw[b]; });
  std::vector<std::vector<int32_t>> held(cp);
  std::vector<int64_t> load(cp, 0);
  for (int32_t c : order) {
    int32_t best = -1;
    for (int32_t r = 0; r < cp; ++r)
      if (static_cast<int32_t>(held[r].size()) < chunks_per_rank && (best < 0 || load[r] < load[best])) best = r;
    held[best].push_back(c);
    load[best] += cw[c];
  }
  // Swaps between the most and the least loaded rank. Each accepted swap
  // strictly lowers the larger of the two loads without raising the other
  // above it, so Σ load² falls and the loop ends; the bound is a safeguard.
  for (int iter = 0; iter < 64 * K; ++iter) {
    const int32_t hi = static_cast<int32_t>(std::max_element(load.begin(), load.end()) - load.begin());
    const int32_t lo = static_cast<int32_t>(std::min_element(load.begin(), load.end()) - load.begin());
    int64_t best_peak = load[hi];
    int32_t bi = -1, bj = -1;
    for (int32_t i = 0; i < chunks_per_rank; ++i)
      for (int32_t j = 0; j < chunks_per_rank; ++j) {
        const int64_t d = cw[held[hi][i]] - cw[held[lo][j]];
        if (d <= 0) continue;
        const int64_t peak = std::max(load[hi] - d, load[lo] + d);
        if (peak < best_peak) best_peak = peak, bi = i, bj = j;
      }
    if (bi < 0) break;
    const int64_t d = cw[held[hi][bi]] - cw[held[lo][bj]];
    std::swap(held[hi][bi], held[lo][bj]);
    load[hi] -= d;
    load[lo] += d;
  }
  ContextAssignment a;
  a.cp = cp;
  a.num_chunks = K;
  a.chunks_of_rank = std::move(held);
  for (std::vector<int32_t>& cs : a.chunks_of_rank) std::sort(cs.begin(), cs.end());
  return a;
}

}  // namespace longctx
