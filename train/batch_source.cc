// Why: see batch_source.h.
#include "train/batch_source.h"

namespace longctx {

absl::StatusOr<int64_t> BatchSource::Next(int64_t step, std::vector<PackedBatch>* micro) {
  int64_t target_tokens = 0;
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
