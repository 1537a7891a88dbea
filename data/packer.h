// Why: the trainer consumes fixed-shape batches of B rows of T tokens cut from
// documents streamed back to back (no padding, no wasted compute). This is the
// one place that decides which tokens a row holds, where attention segments
// and RoPE positions restart (SPECS.md "Variable-length attention (packing)"),
// which targets carry loss, which documents are held out for eval, and how a
// resumed run continues exactly where it stopped (PackerCursor in checkpoints).
//
// The stream: the documents of the split (non-empty ones, ascending file
// index), permuted per epoch by a deterministic Fisher–Yates shuffle keyed on
// (shuffle_seed, epoch) (own SplitMix64, so the order never depends on the
// standard library or Abseil version), epoch after epoch without end.
// Row r (counting all rows ever emitted) holds stream tokens [r·T, r·T + T]:
// inputs = the first T, targets = the last T, so consecutive rows overlap by
// one token and the concatenation of every row's inputs plus the final target
// is the stream itself.
//
// Segments (cu_seqlens over the flattened B·T tokens): every row start is a
// segment start. With document_mask, every document start inside a row is one
// too, positions restart at 0 at each segment start (a document continued from
// the previous row restarts at 0 as well), and a target that is the first token
// of another document than its input (the input is a document's final token,
// its EOS) is −1. Without document_mask (TinyLlama): one segment per row,
// positions 0..T−1, every target kept.
//
// Join mode (join_fraction p > 0, with document_mask): the stream, the rows and
// the targets are exactly those above; only the segments change. Each document
// start is, with probability p (a fixed hash of shuffle_seed, epoch and the
// document's place in the epoch order, so resuming and other batch sizes give
// the same joins), *joined* to the document before it: no segment starts there
// and positions continue across the previous document's EOS, which acts as the
// separator. A join's target (EOS → the next document's first token) stays −1,
// so the same tokens carry loss as without joins. Why: with document masking a
// segment is at most one document, so on a corpus of documents shorter than T
// the long relative distances (i ≥ T/2) are rarely trained (the STRING paper's
// left-skewed position frequency); joined segments are longer, and f(i ≥ T/2)
// grows (docs/data.md "Join packing"). Reordering documents alone would not
// change f. p = 1 makes every row one segment; p = 0 is the default packer.
#ifndef LONGCTX_DATA_PACKER_H_
#define LONGCTX_DATA_PACKER_H_

#include <cstdint>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "data/document_source.h"
#include "data/token_file.h"

namespace longctx {

enum class PackerSplit { kTrain, kEval, kAll };
const char* PackerSplitName(PackerSplit split);

// Document i of a token file is in the eval split iff a fixed hash of i (not of
// the shuffle seed: changing the seed keeps the eval set) mapped to [0, 1) is
// < eval_fraction. eval_fraction 0 → no eval documents; 1 → all.
bool DocumentInEvalSplit(int64_t doc_index, double eval_fraction);

struct PackerOptions {
  int32_t seq_len = 256;    // T
  int32_t batch_size = 8;   // B; B·T must fit int32 (cu_seqlens are int32)
  bool document_mask = true;
  uint64_t shuffle_seed = 1234;
  bool shuffle = true;  // false: ascending document order in every epoch
  double eval_fraction = 0.02;
  PackerSplit split = PackerSplit::kTrain;
  // Join mode (above): share of document starts inside rows whose segment
  // continues from the previous document. 0 = off; needs document_mask.
  double join_fraction = 0.0;
};

// Whether the document at place doc_in_epoch of epoch `epoch`'s order continues
// the previous document's segment in join mode: a fixed hash of (shuffle_seed,
// epoch, doc_in_epoch) mapped to [0, 1) is < join_fraction. Always false for
// join_fraction 0.
bool DocumentJoinsPrevious(uint64_t shuffle_seed, uint64_t epoch, uint64_t doc_in_epoch, double join_fraction);

struct PackedBatch {
  int32_t batch_size = 0;  // B
  int32_t seq_len = 0;     // T
  std::vector<int32_t> inputs;     // [B·T] row-major
  std::vector<int32_t> targets;    // [B·T]; −1 = no loss
  std::vector<int32_t> positions;  // [B·T] RoPE positions
  // [num_segments + 1] prefix sums over the flattened B·T tokens; starts at 0,
  // ends at B·T, contains every multiple of T.
  std::vector<int32_t> cu_seqlens;
  int32_t max_seqlen = 0;         // longest segment (varlen kernels want it)
  int64_t num_target_tokens = 0;  // targets >= 0
};

// The segments of one row as (start within the row, length), read from
// cu_seqlens; lengths sum to T. row in [0, B) (CHECKed).
std::vector<std::pair<int32_t, int32_t>> SegmentsOfRow(const PackedBatch& batch, int row);
// Every segment length, in order (the differences of cu_seqlens).
std::vector<int32_t> SegmentLengths(const PackedBatch& batch);
// Checks the invariants above (sizes, cu_seqlens monotone with every row
// boundary, positions 0,1,2,… within each segment, num_target_tokens, targets
// >= −1); for tests and debug checks in the trainer.
absl::Status ValidatePackedBatch(const PackedBatch& batch);

// Where the next row starts: token token_in_doc of the doc_in_epoch-th
// document of epoch `epoch`'s order; rows_emitted rows were produced before.
// Always rows_emitted·T == epoch·(tokens per epoch) + (tokens before that
// document in the epoch order) + token_in_doc; Seek checks it.
struct PackerCursor {
  uint64_t epoch = 0;
  uint64_t doc_in_epoch = 0;
  uint64_t token_in_doc = 0;
  uint64_t rows_emitted = 0;
  bool operator==(const PackerCursor&) const = default;
};

// {"epoch": …, "doc_in_epoch": …, "token_in_doc": …, "rows_emitted": …}.
nlohmann::json PackerCursorToJson(const PackerCursor& cursor);
absl::StatusOr<PackerCursor> PackerCursorFromJson(const nlohmann::json& json);

class Packer {
 public:
  // reader must outlive the packer. Errors: bad options, or a split with no
  // non-empty document.
  static absl::StatusOr<Packer> Create(const DocumentSource* reader, const PackerOptions& options);

  // The next B rows; advances the cursor by B rows.
  absl::StatusOr<PackedBatch> Next();
  // Same, reusing batch's storage.
  absl::Status NextInto(PackedBatch* batch);

  const PackerCursor& cursor() const { return cursor_; }
  // Continues from a cursor saved by a packer over the same file and with the
  // same seq_len, shuffle_seed, shuffle, eval_fraction and split (batch_size
  // may differ; join_fraction changes segments, not the cursor, so the trainer
  // checks it). Rejects cursors that point outside the stream or disagree
  // with rows_emitted·T. Seek(PackerCursor{}) restarts from the beginning.
  absl::Status Seek(const PackerCursor& cursor);

  const PackerOptions& options() const { return options_; }
  const DocumentSource& reader() const { return *reader_; }
  // Documents of the split (ascending file indices; empty documents excluded)
  // and their total length, i.e. the tokens in one epoch.
  const std::vector<uint32_t>& docs() const { return docs_; }
  int64_t num_docs() const { return static_cast<int64_t>(docs_.size()); }
  int64_t tokens_per_epoch() const { return tokens_per_epoch_; }
  // The document order (file indices) of an epoch.
  std::vector<uint32_t> EpochOrder(uint64_t epoch) const;

 private:
  struct StreamPos {
    uint64_t epoch, doc_in_epoch, token_in_doc;
  };
  Packer() = default;
  const std::vector<uint32_t>& Order(uint64_t epoch);
  // Reads n stream tokens from *pos (advancing it) into out; doc_start[i] = 1
  // where token i is the first token of a document, 2 where it is one that join
  // mode joins to the document before it.
  void ReadStream(StreamPos* pos, int64_t n, int32_t* out, uint8_t* doc_start);

  const DocumentSource* reader_ = nullptr;
  PackerOptions options_;
  std::vector<uint32_t> docs_;
  int64_t tokens_per_epoch_ = 0;
  PackerCursor cursor_;
  // At most two cached epoch orders (a row may straddle an epoch boundary).
  std::vector<std::pair<uint64_t, std::vector<uint32_t>>> order_cache_;
  std::vector<int32_t> row_tokens_;
  std::vector<uint8_t> row_starts_;
};

}  // namespace longctx

#endif  // LONGCTX_DATA_PACKER_H_
