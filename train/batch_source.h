// Why: what a training step learns from, apart from the step itself: the next
// grad_accum × world micro-batches from the packer in the global data order,
// with retrieval rows mixed in, and the position-frequency counters fed with
// their segments. Every rank packs every micro-batch of the step (packing is
// cheap next to the step), so the data order and the counters are the same on
// every rank without communication and do not depend on the world size.
//
// Supervised fine-tuning (data.sft, data/sft_schedule.h) draws a step's batch
// from the SFT length schedule instead: the step's rows all have the
// schedule's length for that step (8,192 or 65,536 by default), and the rows
// are dealt in order into the step's micro-batches, the same number to each
// (a schedule whose row count a length does not divide evenly is refused when
// the source is made). So the sequence length changes from step to step, never
// within one, and the rows of a step do not depend on grad_accum or the world.
#ifndef LONGCTX_TRAIN_BATCH_SOURCE_H_
#define LONGCTX_TRAIN_BATCH_SOURCE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "data/packer.h"
#include "data/position_frequency.h"
#include "data/retrieval_task_mixer.h"
#include "data/sft_schedule.h"

namespace longctx {

class BatchSource {
 public:
  // Not owned. retrieval may be null (no retrieval rows); posfreq may be null.
  BatchSource(Packer* packer, RetrievalMixer* retrieval, PositionFrequency* posfreq)
      : packer_(packer), retrieval_(retrieval), posfreq_(posfreq) {}
  // SFT: every step from `sft` (not owned). `packer` is the pretraining packer,
  // left where it is (its cursor() is still what checkpoints record for it),
  // or null when the run has no data.path.
  // Errors when a length's rows cannot be dealt evenly into micro_batches.
  static absl::StatusOr<BatchSource> ForSft(Packer* packer, SftSchedule* sft, PositionFrequency* posfreq,
                                            int micro_batches);

  // Fills every element of *micro (its size is the step's micro-batch count)
  // with the batches of `step` (1-based; the retrieval curriculum reads it)
  // and returns their target tokens summed over all of them.
  absl::StatusOr<int64_t> Next(int64_t step, std::vector<PackedBatch>* micro);

  // Where the next step's batches start in the pretraining packer (saved
  // with checkpoints); a default cursor when there is none (SFT without data.path).
  PackerCursor cursor() const { return packer_ != nullptr ? packer_->cursor() : PackerCursor{}; }

  // SFT only (null otherwise): the schedule, and where the last step's batch
  // started in it (equal to the schedule's cursor before the first step).
  const SftSchedule* sft() const { return sft_; }
  SftSchedule* mutable_sft() { return sft_; }
  const SftScheduleCursor& sft_last_step_cursor() const { return sft_last_step_cursor_; }
  void set_sft_last_step_cursor(const SftScheduleCursor& c) { sft_last_step_cursor_ = c; }

 private:
  Packer* packer_;
  RetrievalMixer* retrieval_;
  PositionFrequency* posfreq_;
  SftSchedule* sft_ = nullptr;
  SftScheduleCursor sft_last_step_cursor_;
  PackedBatch sft_whole_;  // the step's rows before they are dealt out (reused)
};

// Rows [first_row, first_row + rows) of `batch` as a batch of their own
// (segments clipped at the row boundaries, which cu_seqlens always contains).
PackedBatch SliceRows(const PackedBatch& batch, int32_t first_row, int32_t rows);

}  // namespace longctx

#endif  // LONGCTX_TRAIN_BATCH_SOURCE_H_
