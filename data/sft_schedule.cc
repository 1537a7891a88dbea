// Why: see sft_schedule.h.
#include "data/sft_schedule.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace longctx {

nlohmann::json SftScheduleCursorToJson(const SftScheduleCursor& c) {
  nlohmann::json per = nlohmann::json::array();
  for (const SftCursor& p : c.per_length) per.push_back(SftCursorToJson(p));
  return {{"batches_emitted", c.batches_emitted}, {"per_length", per}};
}

absl::StatusOr<SftScheduleCursor> SftScheduleCursorFromJson(const nlohmann::json& j) {
  if (!j.is_object() || !j.contains("batches_emitted") || !j["batches_emitted"].is_number_unsigned() ||
      !j.contains("per_length") || !j["per_length"].is_array() || j.size() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("SFT schedule cursor: want {\"batches_emitted\": N, \"per_length\": [...]}, got ", j.dump()));
  }
  SftScheduleCursor c;
  c.batches_emitted = j["batches_emitted"].get<uint64_t>();
  for (const nlohmann::json& p : j["per_length"]) {
    absl::StatusOr<SftCursor> sc = SftCursorFromJson(p);
    if (!sc.ok()) return sc.status();
    c.per_length.push_back(*sc);
  }
  return c;
}

absl::StatusOr<SftSchedule> SftSchedule::Create(const SftDataset* data, const SftScheduleOptions& options) {
  const auto& L = options.seq_lens;
  if (L.empty() || L.size() != options.counts.size()) {
    return absl::InvalidArgumentError(absl::StrCat("SFT schedule: ", L.size(), " seq_lens but ",
                                                   options.counts.size(), " counts (need the same, >= 1)"));
  }
  SftSchedule s;
  s.options_ = options;
  for (size_t i = 0; i < L.size(); ++i) {
    if (i > 0 && L[i] <= L[i - 1]) {
      return absl::InvalidArgumentError(
          absl::StrCat("SFT schedule: seq_lens must be strictly ascending, got ", absl::StrJoin(L, ",")));
    }
    if (options.counts[i] < 1) {
      return absl::InvalidArgumentError(absl::StrCat("SFT schedule: counts[", i, "] is ", options.counts[i]));
    }
    s.cycle_ += options.counts[i];
  }
  if (options.tokens_per_batch < 1) return absl::InvalidArgumentError("SFT schedule: tokens_per_batch < 1");
  for (size_t i = 0; i < L.size(); ++i) {
    SftPackerOptions po;
    po.seq_len = L[i];
    po.batch_size = s.BatchSizeFor(L[i]);
    po.shuffle_seed = options.shuffle_seed + i;
    po.shuffle = options.shuffle;
    po.pad_id = options.pad_id;
    po.long_examples = i + 1 < L.size()         ? SftLongExamples::kSkip
                       : options.split_long_examples ? SftLongExamples::kSplit
                       : options.drop_long_examples  ? SftLongExamples::kSkip
                                                     : SftLongExamples::kError;
    absl::StatusOr<SftPacker> p = SftPacker::Create(data, po);
    if (!p.ok()) return p.status();
    s.packers_.push_back(std::move(*p));
  }
  s.dropped_ = data->n_examples() - static_cast<int64_t>(s.packers_.back().examples().size());
  return s;
}

int32_t SftSchedule::SeqLenAt(uint64_t batch_index) const {
  int64_t c = static_cast<int64_t>(batch_index % static_cast<uint64_t>(cycle_));
  for (size_t i = 0; i < options_.counts.size(); ++i) {
    if (c < options_.counts[i]) return options_.seq_lens[i];
    c -= options_.counts[i];
  }
  return options_.seq_lens.back();
}

int32_t SftSchedule::BatchSizeFor(int32_t seq_len) const {
  return static_cast<int32_t>(std::max<int64_t>(1, options_.tokens_per_batch / seq_len));
}

absl::Status SftSchedule::NextInto(PackedBatch* batch) {
  const int32_t L = SeqLenAt(batches_emitted_);
  const size_t i = static_cast<size_t>(
      std::find(options_.seq_lens.begin(), options_.seq_lens.end(), L) - options_.seq_lens.begin());
  absl::Status st = packers_[i].NextInto(batch);
  if (!st.ok()) return st;
  ++batches_emitted_;
  return absl::OkStatus();
}

SftScheduleCursor SftSchedule::cursor() const {
  SftScheduleCursor c;
  c.batches_emitted = batches_emitted_;
  for (const SftPacker& p : packers_) c.per_length.push_back(p.cursor());
  return c;
}

absl::Status SftSchedule::Seek(const SftScheduleCursor& c) {
  if (c.per_length.size() != packers_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("SFT schedule cursor has ", c.per_length.size(),
                                                   " lengths, the schedule ", packers_.size()));
  }
  for (size_t i = 0; i < packers_.size(); ++i) {
    absl::Status st = packers_[i].Seek(c.per_length[i]);
    if (!st.ok()) return st;
  }
  batches_emitted_ = c.batches_emitted;
  return absl::OkStatus();
}

}  // namespace longctx
