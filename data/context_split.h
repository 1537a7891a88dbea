// Why: context parallelism (CP, issue 45) puts one packed row on the C ranks
// of a group, each holding a disjoint set of its tokens, so a 64K-token row
// needs ~1/C of its activations per rank. Which tokens a rank holds decides
// how evenly causal attention work spreads (the last tokens of a document see
// the most keys), and every per-token array must travel with its token:
// inputs, targets (−1 = no loss, so the loss flags travel too), positions (per
// document, exactly as the full row has them: a document cut at a chunk edge
// keeps counting) and the segment structure. This file is that split and
// nothing else: which equal chunks go to which rank (ContextAssignment), and
// the rank's share of a row with the metadata attention needs to find, for
// each of its queries, the global range of keys it may see (ContextShard).
// data/context_balance.h measures the work of a split and computes a
// data-dependent assignment where the fixed zig-zag is not even enough.
//
// Nothing here knows about models or devices: a shard is host vectors, like
// PackedBatch. The trainer does not use it yet (docs/parallelism.md).
#ifndef LONGCTX_DATA_CONTEXT_SPLIT_H_
#define LONGCTX_DATA_CONTEXT_SPLIT_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "data/packer.h"

namespace longctx {

// A row of T tokens cut into num_chunks equal chunks of T / num_chunks tokens;
// rank r holds chunks_of_rank[r] (ascending). Every chunk belongs to exactly
// one rank and every rank holds the same number of chunks, so every rank holds
// T / C tokens.
struct ContextAssignment {
  int32_t cp = 1;          // C, the ranks of the group
  int32_t num_chunks = 1;  // a multiple of C
  std::vector<std::vector<int32_t>> chunks_of_rank;  // [C]
  int32_t chunks_per_rank() const { return num_chunks / cp; }
  // The rank that holds chunk c (0 <= c < num_chunks; CHECKed).
  int32_t OwnerOf(int32_t chunk) const;
  bool operator==(const ContextAssignment&) const = default;
};

// The causal-balancing zig-zag: 2C chunks, rank r holds chunks r and 2C−1−r
// (C = 1: chunks 0 and 1, i.e. the whole row). Errors when cp < 1 or when
// seq_len is not divisible by 2C (the chunks must be equal).
absl::StatusOr<ContextAssignment> ZigZagAssignment(int32_t seq_len, int32_t cp);
// The checks every assignment must pass for a row of seq_len tokens: cp >= 1,
// num_chunks a positive multiple of cp dividing seq_len, chunks_of_rank of
// size cp, each ascending with num_chunks / cp chunks, together a permutation
// of 0..num_chunks−1.
absl::Status ValidateContextAssignment(const ContextAssignment& a, int32_t seq_len);

// A maximal run of consecutive chunks held by one rank (the zig-zag's rank
// C−1 holds chunks C−1 and C: one piece), i.e. a contiguous token range of the
// row. Row positions are "global" (0..T−1 within the row); local offsets index
// the rank's own arrays, where pieces are concatenated in ascending global order.
struct ContextPiece {
  int32_t first_chunk = 0, num_chunks = 0;
  int32_t global_begin = 0;  // row offset of the piece's first token
  int32_t length = 0;        // tokens (num_chunks × chunk length)
  int32_t local_begin = 0;   // offset of its first token in the shard's arrays
  int32_t first_segment = 0, num_segments = 0;  // its local segments (indices into ContextShard::cu_seqlens)
  // The first segment continues a document (a row segment) that starts before
  // global_begin, i.e. on an earlier chunk; first_doc_begin is that document's
  // global start (== global_begin when it does not continue).
  bool continues_from_previous = false;
  int32_t first_doc_begin = 0;
  // The last segment's document goes on past the piece's end, into the next
  // chunk; last_doc_begin is that document's global start (it may be before
  // global_begin when one document covers the whole piece).
  bool continues_into_next = false;
  int32_t last_doc_begin = 0;
  int32_t global_end() const { return global_begin + length; }
};

// One rank's share of one row. Its arrays hold the rank's T / C tokens, the
// pieces one after another in ascending global order; cu_seqlens cuts the
// row's segments at every piece edge (a document on several pieces is one
// local segment per piece). segment_doc_begin / segment_doc_end give each
// local segment's whole document as a global range [begin, end) of the row:
// query g of a local segment s sees keys [max(segment_doc_begin[s], g−w+1), g]
// (w = window, unlimited for full layers), which may lie on other ranks.
struct ContextShard {
  int32_t cp = 1, rank = 0;
  int32_t seq_len = 0;       // T of the whole row
  int32_t chunk_len = 0;     // T / num_chunks
  std::vector<int32_t> inputs, targets, positions;  // [T / C]
  std::vector<int32_t> cu_seqlens;                  // local, starts at 0, ends at T / C
  std::vector<int32_t> segment_doc_begin, segment_doc_end;  // [local segments], global
  std::vector<ContextPiece> pieces;                         // ascending global_begin
  int32_t max_seqlen = 0;         // longest local segment
  int64_t num_target_tokens = 0;  // targets >= 0 of this shard
  int32_t num_tokens() const { return static_cast<int32_t>(inputs.size()); }
  // The global row position of local token i (0 <= i < num_tokens(); CHECKed).
  int32_t GlobalPosition(int32_t local) const;
};

// Rank `rank`'s share of row `row` of `batch` under `assignment`. Errors: an
// assignment that fails ValidateContextAssignment for batch.seq_len, rank or
// row out of range, or a batch whose arrays do not match its shape. With one
// rank holding every chunk (C = 1) the shard is the row itself: the same
// inputs, targets, positions and cu_seqlens as SliceRows(batch, row, 1).
absl::StatusOr<ContextShard> SplitRowForContext(const PackedBatch& batch, int32_t row,
                                                const ContextAssignment& assignment, int32_t rank);
// The keys this rank's queries may see that other ranks hold, as ascending
// disjoint global ranges [begin, end) of the row: for each local segment, the
// part of its document before the segment that lies within window − 1 tokens
// of the segment's first query (window 0 = unlimited, a full layer), less the
// rank's own tokens. What a halo exchange must bring (and a ring or
// all-gather at least brings); its total times the bytes of a token's K and V
// is the exchange's cost for this row.
std::vector<std::pair<int32_t, int32_t>> ContextKeysToReceive(const ContextShard& shard, int32_t window);
int64_t ContextKeysToReceiveCount(const ContextShard& shard, int32_t window);

// Every rank's share of the row (index = rank).
absl::StatusOr<std::vector<ContextShard>> SplitRowForAllRanks(const PackedBatch& batch, int32_t row,
                                                              const ContextAssignment& assignment);

}  // namespace longctx

#endif  // LONGCTX_DATA_CONTEXT_SPLIT_H_
