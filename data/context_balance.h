// Why: the ranks of a context-parallel group wait for the slowest one at every
// attention layer, so a split is only as good as its most loaded rank.
// Attention work is the number of visible (query, key) pairs: a query i tokens
// into its document sees i + 1 keys (full causal) or min(i + 1, w) (window w),
// never a key of another document. The fixed zig-zag (rank r: chunks r and
// 2C−1−r) evens that out for one causal document spanning the row, but not for
// packed rows of natural document lengths, where one long document's tail
// carries most of the row's work wherever it happens to lie (measured in
// tests/data/context_balance_test.cc: max/mean well above 1.1). So this file
// also gives a data-dependent assignment: finer equal chunks dealt by work,
// the same number to every rank, computed from cu_seqlens alone (every rank
// packs every row, so every rank derives the same assignment without talking).
#ifndef LONGCTX_DATA_CONTEXT_BALANCE_H_
#define LONGCTX_DATA_CONTEXT_BALANCE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "data/context_split.h"
#include "data/packer.h"

namespace longctx {

// Σ over document offsets i in [begin, end) of the keys offset i sees:
// i + 1 with window 0 (full causal), min(i + 1, window) otherwise. Closed form.
int64_t VisiblePairs(int64_t begin, int64_t end, int32_t window);

// Work of each of num_chunks equal chunks of row `row` (num_chunks divides
// seq_len; CHECKed): the pairs whose query lies in the chunk, summed over
// `windows` (one entry per layer: 0 = full, w = window w).
std::vector<int64_t> ChunkAttentionWork(const PackedBatch& batch, int32_t row, int32_t num_chunks,
                                        const std::vector<int32_t>& windows);
// Work of each rank of an assignment (the sum of its chunks' work).
std::vector<int64_t> RankAttentionWork(const PackedBatch& batch, int32_t row, const ContextAssignment& assignment,
                                       const std::vector<int32_t>& windows);
// The same for one rank, from its shard alone (each local query's global
// position and document start): what the rank's attention will compute.
int64_t ShardAttentionWork(const ContextShard& shard, const std::vector<int32_t>& windows);

// max / mean of per-rank work (1 = perfectly even; 1 for all-zero work).
double MaxOverMean(const std::vector<int64_t>& work);

// cp × chunks_per_rank equal chunks, dealt to ranks so the most loaded rank's
// work is small: largest chunk first to the least loaded rank that still has
// room (ties: the lower chunk, the lower rank), then single swaps between the
// most and the least loaded rank while they lower the maximum. Every rank gets
// chunks_per_rank chunks; deterministic in the row's cu_seqlens. Errors when
// seq_len is not divisible by cp × chunks_per_rank or an argument is < 1.
absl::StatusOr<ContextAssignment> BalancedAssignment(const PackedBatch& batch, int32_t row, int32_t cp,
                                                     int32_t chunks_per_rank, const std::vector<int32_t>& windows);

}  // namespace longctx

#endif  // LONGCTX_DATA_CONTEXT_BALANCE_H_
