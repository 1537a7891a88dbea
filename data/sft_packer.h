// Why: an SFT example is a whole conversation; cutting it at a row boundary
// (as the pretraining packer does with its stream) would train responses
// without their prompt. This packer places whole examples into rows of T
// tokens, each example its own attention segment (document mask: no attention
// across examples; positions restart at 0), pads the rest of a row that the
// next example does not fit (a padding segment, pad ids, no loss), and keeps
// the chat template's loss flags: the target at a position is the next token
// of the same example when that token carries loss, else −1. An example's last
// position has target −1 (the next token belongs to another example).
//
// An example longer than T is, by SftPackerOptions::long_examples, an error
// naming the example (its source, path:line) — the default —, split into
// chunks of at most T tokens that each start a row (each chunk its own segment;
// a chunk attends only within itself), or skipped because a longer row length
// of the same length schedule (sft_schedule.h) takes it. Never truncated.
//
// Order: the examples this packer takes, in ascending index order, permuted per
// epoch by Fisher–Yates keyed on (shuffle_seed, epoch) (SplitMix64), epoch
// after epoch. SftCursor says where the next row starts; a packer seeked to a
// saved cursor continues bit-identically.
#ifndef LONGCTX_DATA_SFT_PACKER_H_
#define LONGCTX_DATA_SFT_PACKER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "data/packer.h"
#include "data/sft_token_file.h"

namespace longctx {

enum class SftLongExamples { kError, kSplit, kSkip };

struct SftPackerOptions {
  int32_t seq_len = 512;   // T
  int32_t batch_size = 8;  // B; B·T must fit int32
  uint64_t shuffle_seed = 1234;
  bool shuffle = true;
  SftLongExamples long_examples = SftLongExamples::kError;
  int32_t pad_id = 0;  // input id of padding positions (never a target)
};

struct SftCursor {
  uint64_t epoch = 0;
  uint64_t example_in_epoch = 0;  // index into the epoch's order
  uint64_t token_in_example = 0;  // > 0 only inside a split example
  uint64_t rows_emitted = 0;
  bool operator==(const SftCursor&) const = default;
};
nlohmann::json SftCursorToJson(const SftCursor& cursor);
absl::StatusOr<SftCursor> SftCursorFromJson(const nlohmann::json& json);

class SftPacker {
 public:
  // data must outlive the packer. Errors: bad options, an example longer than
  // T with kError (naming its source and length), no example to pack.
  static absl::StatusOr<SftPacker> Create(const SftDataset* data, const SftPackerOptions& options);

  absl::Status NextInto(PackedBatch* batch);  // the next B rows
  absl::StatusOr<PackedBatch> Next();

  const SftCursor& cursor() const { return cursor_; }
  // Continues from a cursor of a packer over the same data and options
  // (batch_size may differ). Rejects cursors outside the stream.
  absl::Status Seek(const SftCursor& cursor);

  const SftPackerOptions& options() const { return options_; }
  // The examples this packer takes (dataset indices, ascending).
  const std::vector<uint32_t>& examples() const { return examples_; }
  std::vector<uint32_t> EpochOrder(uint64_t epoch) const;

 private:
  SftPacker() = default;
  const std::vector<uint32_t>& Order(uint64_t epoch);
  void FillRow(int32_t* in, int32_t* tgt, int32_t* pos, std::vector<int32_t>* seg_lens);

  const SftDataset* data_ = nullptr;
  SftPackerOptions options_;
  std::vector<uint32_t> examples_;
  SftCursor cursor_;
  uint64_t cached_epoch_ = ~uint64_t{0};
  std::vector<uint32_t> cached_order_;
};

// A human-readable dump of rows of a packed batch: per segment, the decoded
// text with the tokens that carry loss (as targets) wrapped in ⟦ ⟧, one line
// per segment ("row R seg S [start, end) pos 0..: …"). decode turns ids into
// text. At most max_rows rows.
std::string DumpPackedBatch(const PackedBatch& batch,
                            const std::function<std::string(const std::vector<int32_t>&)>& decode, int max_rows);

}  // namespace longctx

#endif  // LONGCTX_DATA_SFT_PACKER_H_
