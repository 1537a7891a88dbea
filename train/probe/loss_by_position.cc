// Why: see loss_by_position.h.
#include "train/probe/loss_by_position.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"

namespace longctx {

double PositionBucket::mean() const {
  return tokens > 0 ? loss_sum / static_cast<double>(tokens) : std::numeric_limits<double>::quiet_NaN();
}

absl::StatusOr<LossByPosition> MakeLossByPositionBuckets(int64_t train_len, int64_t max_len) {
  if (train_len < 1 || max_len < train_len)
    return absl::InvalidArgumentError(absl::StrCat("loss by position: need 1 <= training length (", train_len,
                                                   ") <= max length (", max_len, ")"));
  std::vector<int64_t> edges = {0};
  for (int64_t e : {train_len / 8, train_len / 4, train_len / 2})
    if (e > edges.back()) edges.push_back(e);
  for (int64_t e = train_len; e < max_len; e *= 2)
    if (e > edges.back()) edges.push_back(e);
  edges.push_back(max_len);
  LossByPosition r;
  r.train_len = train_len;
  r.max_len = max_len;
  for (size_t k = 0; k + 1 < edges.size(); ++k) r.buckets.push_back({.lo = edges[k], .hi = edges[k + 1]});
  return r;
}

absl::StatusOr<PackedBatch> DocumentsAsSegments(const std::vector<std::vector<int32_t>>& docs) {
  if (docs.empty()) return absl::InvalidArgumentError("loss by position: no documents to lay out");
  int64_t total = 0;
  for (size_t d = 0; d < docs.size(); ++d) {
    if (docs[d].size() < 2)
      return absl::InvalidArgumentError(
          absl::StrCat("loss by position: document ", d, " has ", docs[d].size(), " tokens; a loss needs 2"));
    total += static_cast<int64_t>(docs[d].size()) - 1;
  }
  if (total > std::numeric_limits<int32_t>::max())
    return absl::InvalidArgumentError(absl::StrCat("loss by position: ", total, " tokens in one row"));
  PackedBatch b;
  b.batch_size = 1;
  b.seq_len = static_cast<int32_t>(total);
  b.cu_seqlens = {0};
  for (const std::vector<int32_t>& doc : docs) {
    const int32_t n = static_cast<int32_t>(doc.size()) - 1;
    for (int32_t t = 0; t < n; ++t) {
      b.inputs.push_back(doc[t]);
      b.targets.push_back(doc[t + 1]);
      b.positions.push_back(t);
    }
    b.cu_seqlens.push_back(b.cu_seqlens.back() + n);
    b.max_seqlen = std::max(b.max_seqlen, n);
  }
  b.num_target_tokens = total;
  return b;
}

absl::Status AddBatchLossesByPosition(const PackedBatch& batch, absl::Span<const double> loss, LossByPosition* out) {
  const int64_t n = static_cast<int64_t>(batch.inputs.size());
  if (static_cast<int64_t>(loss.size()) != n || static_cast<int64_t>(batch.targets.size()) != n ||
      static_cast<int64_t>(batch.positions.size()) != n || batch.cu_seqlens.size() < 2 ||
      batch.cu_seqlens.front() != 0 || batch.cu_seqlens.back() != n)
    return absl::InvalidArgumentError(absl::StrCat("loss by position: ", loss.size(), " losses for a batch of ", n,
                                                   " tokens (cu_seqlens ending at ", batch.cu_seqlens.empty() ? 0 : batch.cu_seqlens.back(), ")"));
  for (size_t s = 0; s + 1 < batch.cu_seqlens.size(); ++s) {
    const int64_t start = batch.cu_seqlens[s], end = batch.cu_seqlens[s + 1];
    if (end <= start) return absl::InvalidArgumentError(absl::StrCat("loss by position: empty segment ", s));
    for (int64_t t = start; t < end; ++t) {
      if (batch.positions[t] != t - start)
        return absl::InvalidArgumentError(absl::StrCat(
            "loss by position: token ", t, " of segment ", s, " is at position ", batch.positions[t], ", expected ",
            t - start, " (each document must be its own segment starting at position 0)"));
      if (batch.targets[t] < 0)
        return absl::InvalidArgumentError(
            absl::StrCat("loss by position: token ", t, " of segment ", s, " has no target"));
    }
    const int64_t covered = end - start;  // loss positions 0 .. covered-1
    for (PositionBucket& b : out->buckets) {
      if (covered < b.hi) continue;  // the document ends inside or before the bucket
      for (int64_t p = b.lo; p < b.hi; ++p) b.loss_sum += loss[start + p];
      b.tokens += b.hi - b.lo;
      b.docs += 1;
    }
    out->documents += 1;
  }
  return absl::OkStatus();
}

}  // namespace longctx
