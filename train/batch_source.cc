// Why: see batch_source.h.
#include "train/batch_source.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace longctx {

PackedBatch SliceRows(const PackedBatch& batch, int32_t first_row, int32_t rows) {
  const int64_t T = batch.seq_len, begin = int64_t{first_row} * T, end = begin + int64_t{rows} * T;
  PackedBatch out;
  out.batch_size = rows;
  out.seq_len = batch.seq_len;
  out.inputs.assign(batch.inputs.begin() + begin, batch.inputs.begin() + end);
  out.targets.assign(batch.targets.begin() + begin, batch.targets.begin() + end);
  out.positions.assign(batch.positions.begin() + begin, batch.positions.begin() + end);
  for (int32_t c : batch.cu_seqlens)
    if (c >= begin && c <= end) out.cu_seqlens.push_back(static_cast<int32_t>(c - begin));
  for (size_t s = 0; s + 1 < out.cu_seqlens.size(); ++s)
    out.max_seqlen = std::max(out.max_seqlen, out.cu_seqlens[s + 1] - out.cu_seqlens[s]);
  for (int32_t t : out.targets) out.num_target_tokens += t >= 0;
  return out;
}

absl::StatusOr<BatchSource> BatchSource::ForSft(Packer* packer, SftSchedule* sft, PositionFrequency* posfreq,
                                                int micro_batches) {
  for (int32_t L : sft->options().seq_lens) {
    const int32_t rows = sft->BatchSizeFor(L);
    if (rows % micro_batches != 0)
      return absl::InvalidArgumentError(absl::StrCat(
          "data.sft: a step of ", L, "-token rows has ", rows, " rows (data.sft.tokens_per_batch ",
          sft->options().tokens_per_batch, " / ", L, "), which grad_accum x world = ", micro_batches,
          " micro-batches cannot share evenly; make tokens_per_batch a multiple of ", int64_t{L} * micro_batches,
          " or lower grad_accum"));
  }
  BatchSource b(packer, nullptr, posfreq);
  b.sft_ = sft;
  b.sft_last_step_cursor_ = sft->cursor();
  return b;
}

absl::StatusOr<int64_t> BatchSource::Next(int64_t step, std::vector<PackedBatch>* micro) {
  int64_t target_tokens = 0;
  if (sft_ != nullptr) {
    sft_last_step_cursor_ = sft_->cursor();
    if (absl::Status st = sft_->NextInto(&sft_whole_); !st.ok())
      return absl::Status(st.code(), absl::StrCat("data.sft: step ", step, ": ", st.message()));
    const int32_t n = static_cast<int32_t>(micro->size());
    const int32_t rows = sft_whole_.batch_size / n;  // ForSft checked that it divides
    for (int32_t i = 0; i < n; ++i) {
      (*micro)[i] = SliceRows(sft_whole_, i * rows, rows);
      target_tokens += (*micro)[i].num_target_tokens;
    }
    if (posfreq_ != nullptr) posfreq_->AddCuSeqlens(sft_whole_.cu_seqlens);
    return target_tokens;
  }
  for (PackedBatch& b : *micro) {
    const uint64_t first_row = packer_->cursor().rows_emitted;
    absl::StatusOr<PackedBatch> batch = packer_->Next();
    if (!batch.ok()) return batch.status();
    b = std::move(*batch);
    if (retrieval_ != nullptr) {
      absl::Status st = retrieval_->Apply(step, first_row, &b);
      if (!st.ok()) return st;
    }
    target_tokens += b.num_target_tokens;
    if (posfreq_ != nullptr) posfreq_->AddCuSeqlens(b.cu_seqlens);
  }
  return target_tokens;
}

}  // namespace longctx
