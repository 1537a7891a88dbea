// Why: the RNoPE-SWA SFT recipe (SPECS.md "SFT recipe") interleaves batches of
// short rows and batches of long rows, 3:1 at 8,192 and 65,536 tokens, each
// batch about the same number of tokens. The sequence length therefore changes
// from batch to batch, and a resumed run must land on the same point of the
// schedule and of every length's data stream.
//
// Batch k (0-based, counting every batch emitted) has the row length
// seq_lens[i] where k mod sum(counts) falls in the i-th block of the cycle
// (counts {3, 1}: S S S L S S S L …) and max(1, tokens_per_batch / seq_len)
// rows. Each length has its own SftPacker (sft_packer.h) over the examples
// that fit its rows: a shorter length skips longer examples, the longest
// length takes every example (and errors on, or splits, longer ones). So short
// examples are seen in both streams and long ones only in long batches.
#ifndef LONGCTX_DATA_SFT_SCHEDULE_H_
#define LONGCTX_DATA_SFT_SCHEDULE_H_

#include <cstdint>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "absl/status/statusor.h"
#include "data/sft_packer.h"

namespace longctx {

struct SftScheduleOptions {
  std::vector<int32_t> seq_lens = {8192, 65536};  // strictly ascending
  std::vector<int32_t> counts = {3, 1};           // batches of each length per cycle (>= 1 each)
  int64_t tokens_per_batch = 524288;
  bool split_long_examples = false;  // the longest length splits longer examples instead of failing
  // The longest length skips longer examples instead of failing (when not
  // split_long_examples); dropped_examples() counts them, for the caller to report.
  bool drop_long_examples = false;
  uint64_t shuffle_seed = 1234;
  bool shuffle = true;
  int32_t pad_id = 0;
};

struct SftScheduleCursor {
  uint64_t batches_emitted = 0;
  std::vector<SftCursor> per_length;  // one per seq_lens entry
  bool operator==(const SftScheduleCursor&) const = default;
};
nlohmann::json SftScheduleCursorToJson(const SftScheduleCursor& cursor);
absl::StatusOr<SftScheduleCursor> SftScheduleCursorFromJson(const nlohmann::json& json);

class SftSchedule {
 public:
  // data must outlive the schedule. Errors: bad options, a length with no
  // example that fits, an over-long example (SftPacker::Create).
  static absl::StatusOr<SftSchedule> Create(const SftDataset* data, const SftScheduleOptions& options);

  int32_t SeqLenAt(uint64_t batch_index) const;
  int32_t BatchSizeFor(int32_t seq_len) const;
  // The next batch of the schedule.
  absl::Status NextInto(PackedBatch* batch);

  SftScheduleCursor cursor() const;
  // Continues from a cursor of a schedule over the same data and options.
  absl::Status Seek(const SftScheduleCursor& cursor);
  const SftScheduleOptions& options() const { return options_; }
  const SftPacker& packer(size_t i) const { return packers_[i]; }
  // Examples no length takes (longer than the longest, drop_long_examples).
  int64_t dropped_examples() const { return dropped_; }

 private:
  SftSchedule() = default;
  SftScheduleOptions options_;
  std::vector<SftPacker> packers_;
  uint64_t batches_emitted_ = 0;
  int64_t cycle_ = 0;
  int64_t dropped_ = 0;
};

}  // namespace longctx

#endif  // LONGCTX_DATA_SFT_SCHEDULE_H_
