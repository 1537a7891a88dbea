// Why: "where does more context stop helping?" has a continuous answer that
// needs no task: the mean next-token loss of long held-out documents at each
// position. If the loss at positions L..2L is no lower than at L/2..L, the
// model gets nothing from the tokens beyond its training length L. This file
// is the bucket arithmetic and the batch layout it relies on, kept apart from
// the model so a test can hold it against a naive per-document loop.
//
// Conventions: the loss at position p of a document is the cross-entropy of
// predicting its token p+1 from tokens 0..p (so a document of n tokens has
// n - 1 loss positions, 0..n-2). Positions are counted from the document's own
// start, never from the row's: every document is its own attention segment
// with RoPE positions restarting at 0, so nothing of another document is seen.
// A document counts in bucket [lo, hi) only when it has a loss at every
// position of it (its loss positions reach hi - 1): a bucket's mean is then
// over the same documents at every one of its positions, and its token count
// is exactly docs x (hi - lo).
#ifndef LONGCTX_TRAIN_PROBE_LOSS_BY_POSITION_H_
#define LONGCTX_TRAIN_PROBE_LOSS_BY_POSITION_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "data/packer.h"

namespace longctx {

struct PositionBucket {
  int64_t lo = 0, hi = 0;  // positions [lo, hi)
  double loss_sum = 0;     // nats, over the counted tokens
  int64_t tokens = 0;
  int64_t docs = 0;  // documents that cover the whole bucket
  // Mean loss; NaN when no document covers the bucket.
  double mean() const;
};

struct LossByPosition {
  int64_t train_len = 0;  // L
  int64_t max_len = 0;    // the last bucket's hi
  std::vector<PositionBucket> buckets;
  int64_t documents = 0;  // segments added
};

// Empty buckets at edges 0, L/8, L/4, L/2, L, 2L, 4L, ... (doubling), the last
// edge max_len (a bucket ends there even when max_len is no power-of-two
// multiple of L); edges below 1 are dropped (tiny L). InvalidArgument unless
// 1 <= train_len <= max_len.
absl::StatusOr<LossByPosition> MakeLossByPositionBuckets(int64_t train_len, int64_t max_len);

// One row of B = 1 holding each document as its own segment, positions
// restarting at 0: inputs doc[0..n-2], targets doc[1..n-1] (a document of n
// tokens takes n - 1). InvalidArgument for no documents, a document under 2
// tokens, or more than INT32_MAX tokens in all.
absl::StatusOr<PackedBatch> DocumentsAsSegments(const std::vector<std::vector<int32_t>>& docs);

// Adds the per-token losses of a forward pass over `batch` (one value per
// token, as Transformer::ForwardBackward's per_token_loss) to the buckets,
// each segment taken as one document from its position 0. InvalidArgument
// (naming the token) when the losses do not match the batch, a segment's
// positions do not run 0, 1, 2, ... (documents packed into one segment), or a
// token inside a segment has no target (the buckets would count a gap).
absl::Status AddBatchLossesByPosition(const PackedBatch& batch, absl::Span<const double> per_token_loss,
                                      LossByPosition* out);

}  // namespace longctx

#endif  // LONGCTX_TRAIN_PROBE_LOSS_BY_POSITION_H_
