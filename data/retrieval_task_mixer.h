// Why: a tiny model trained on natural text alone never learns to retrieve a
// needle (SPECS.md "What tiny models on 2 CPU cores can and cannot learn"), so
// its NIAH effective length would be zero at every length and say nothing
// about positions. This mixer replaces a deterministic fraction of the packed
// training rows by synthetic retrieval samples in the probe's exact format
// (data/retrieval_task.h) built from TRAIN-split documents, with a curriculum
// over needles and sample length (one needle → two → four, short → long).
//
// Exactness: whether global row r (the packer's rows_emitted when the row was
// cut) is a retrieval row, and every token in it, is a pure function of
// (seed, r, the curriculum stage of the step that trains it), so a run resumed
// from a checkpoint sees exactly the rows an uninterrupted run sees, and
// `longctx eval --batch=last_train` rebuilds the trainer's last batch. A
// replaced row's natural text is skipped (the packer cursor moves on as
// usual). The row's samples are attention segments of their own (positions
// restart at 0 per sample), and cu_seqlens says so, so the position-frequency
// counters count what the model saw.
//
// A row holds samples of the stage's length (0 = the whole row); when that does
// not divide the row, the last sample is longer. A sample is prompt, answer,
// EOS, and pad tokens (targets −1) if the haystack fell short of the budget.
// Loss: "answer" keeps the targets of the answer tokens and the EOS only;
// "all" keeps every target up to the EOS.
#ifndef LONGCTX_DATA_RETRIEVAL_TASK_MIXER_H_
#define LONGCTX_DATA_RETRIEVAL_TASK_MIXER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "data/packer.h"
#include "data/retrieval_task.h"

namespace longctx {

struct RetrievalStage {
  int64_t from_step = 0;   // first training step of the stage
  int needles = 1;
  int32_t sample_len = 0;  // tokens per sample; 0 (or >= the row) = one sample per row
};

// "STEP:NEEDLES:LEN,STEP:NEEDLES:LEN,..." with strictly increasing steps, the
// first one 0; empty → one stage {0, default_needles, 0}. Errors name `field`.
absl::StatusOr<std::vector<RetrievalStage>> ParseRetrievalCurriculum(const std::string& spec, int default_needles,
                                                                     const std::string& field);

enum class RetrievalLoss { kAnswer, kAll };

struct RetrievalMixOptions {
  double fraction = 0;  // share of rows replaced, in [0, 1]
  uint64_t seed = 0;
  NeedleFormat format;
  std::vector<RetrievalStage> stages;
  RetrievalLoss loss = RetrievalLoss::kAnswer;
  std::string field = "data.retrieval";  // prefix for error messages
};

class RetrievalMixer {
 public:
  // docs: the train-split documents to cut haystacks from. Errors: fraction
  // outside [0, 1], no stages, a stage whose samples cannot hold its needles.
  static absl::StatusOr<std::unique_ptr<RetrievalMixer>> Create(const RetrievalMixOptions& options,
                                                                const DocumentSource* source,
                                                                std::vector<uint32_t> docs,
                                                                const Tokenizer* tokenizer, int32_t seq_len);

  bool IsRetrievalRow(uint64_t row) const;
  const RetrievalStage& StageAt(int64_t step) const;
  // Replaces the retrieval rows among rows first_row .. first_row + B − 1 of a
  // packed batch trained at `step`; rebuilds cu_seqlens, positions,
  // max_seqlen and num_target_tokens.
  absl::Status Apply(int64_t step, uint64_t first_row, PackedBatch* batch) const;
  // The samples of one row: T inputs and targets, segment lengths appended.
  absl::Status FillRow(const RetrievalStage& stage, uint64_t row, int32_t* inputs, int32_t* targets,
                       std::vector<int32_t>* segment_lengths) const;

  const RetrievalMixOptions& options() const { return options_; }

 private:
  RetrievalMixer(RetrievalMixOptions options, const DocumentSource* source, std::vector<uint32_t> docs,
                 const Tokenizer* tokenizer, int32_t seq_len);

  RetrievalMixOptions options_;
  HaystackSource haystack_;
  const Tokenizer* tokenizer_;
  int32_t seq_len_;
};

}  // namespace longctx

#endif  // LONGCTX_DATA_RETRIEVAL_TASK_MIXER_H_
