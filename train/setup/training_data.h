// Why: what a run reads — tokenizer, token data, packers, retrieval rows and
// the SFT examples with their length schedule — is opened from the config in
// one place, with every cross-check between them (vocabulary sizes, the SFT
// file's tokenizer) and errors that name the config field, so the trainer,
// the evaluation commands and the benchmarks open the same data the same way.
#ifndef LONGCTX_TRAIN_SETUP_TRAINING_DATA_H_
#define LONGCTX_TRAIN_SETUP_TRAINING_DATA_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "data/document_source.h"
#include "data/packer.h"
#include "data/retrieval_task_mixer.h"
#include "data/sft_schedule.h"
#include "data/sft_token_file.h"
#include "data/token_dataset.h"
#include "data/tokenizer.h"
#include "model/config.h"
#include "train/train.pb.h"

namespace longctx {

// data.path: one .ltok file or a directory of them (`longctx data tokenize` output).
absl::StatusOr<std::unique_ptr<TokenDataset>> OpenTrainingData(const TrainConfig& config);
// The packers over the config's train and eval splits, from their start.
absl::StatusOr<std::unique_ptr<Packer>> MakeTrainPacker(const TrainConfig& config, const DocumentSource* tokens);
absl::StatusOr<std::unique_ptr<Packer>> MakeEvalPacker(const TrainConfig& config, const DocumentSource* tokens);

// Everything a training run draws its batches from.
struct TrainingInputs {
  std::unique_ptr<Tokenizer> tokenizer;
  // The pretraining corpus (data.path) and its packer; both null for an SFT
  // run without data.path (then there is no eval, probe or retrieval).
  std::unique_ptr<TokenDataset> tokens;
  std::unique_ptr<Packer> train_packer;
  // Retrieval rows mixed into training (null when data.retrieval_fraction is 0).
  std::unique_ptr<RetrievalMixer> retrieval;
  // Supervised fine-tuning (data.sft; null otherwise): the examples and the
  // length schedule every step is drawn from.
  std::unique_ptr<SftDataset> sft_data;
  std::unique_ptr<SftSchedule> sft_schedule;
  bool has_eval = true;         // false when the eval split has no documents (a warning says so)
  int64_t longest_row = 0;      // the longest row a step can have (the position-frequency range)
};

// Opens and cross-checks the config's data for a model of `dims`; rank 0
// prints what it drops or skips. An SFT run (data.sft.path) needs no
// data.path; without one, eval_every, probe_every and retrieval_fraction
// must be 0 (each an error naming the field otherwise).
absl::StatusOr<TrainingInputs> OpenTrainingInputs(const TrainConfig& config, const ModelDims& dims, int rank);

}  // namespace longctx

#endif  // LONGCTX_TRAIN_SETUP_TRAINING_DATA_H_
