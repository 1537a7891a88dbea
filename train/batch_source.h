// Why: what a training step learns from, apart from the step itself: the next
// grad_accum × world micro-batches from the packer in the global data order,
// with retrieval rows mixed in, and the position-frequency counters fed with
// their segments. Every rank packs every micro-batch of the step (packing is
// cheap next to the step), so the data order and the counters are the same on
// every rank without communication and do not depend on the world size.
#ifndef LONGCTX_TRAIN_BATCH_SOURCE_H_
#define LONGCTX_TRAIN_BATCH_SOURCE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "data/packer.h"
#include "data/position_frequency.h"
#include "data/retrieval_task_mixer.h"

namespace longctx {

class BatchSource {
 public:
  // Not owned. retrieval may be null (no retrieval rows); posfreq may be null.
  BatchSource(Packer* packer, RetrievalMixer* retrieval, PositionFrequency* posfreq)
      : packer_(packer), retrieval_(retrieval), posfreq_(posfreq) {}

  // Fills every element of *micro (its size is the step's micro-batch count)
  // with the batches of `step` (1-based; the retrieval curriculum reads it)
  // and returns their target tokens summed over all of them.
  absl::StatusOr<int64_t> Next(int64_t step, std::vector<PackedBatch>* micro);

  // Where the next step's batches start (saved with checkpoints).
  PackerCursor cursor() const { return packer_->cursor(); }

 private:
  Packer* packer_;
  RetrievalMixer* retrieval_;
  PositionFrequency* posfreq_;
};

}  // namespace longctx

#endif  // LONGCTX_TRAIN_BATCH_SOURCE_H_
