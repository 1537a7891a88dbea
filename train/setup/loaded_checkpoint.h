// Why: every command that runs a trained model (`longctx eval`, `probe`,
// `generate`) must load a checkpoint the same way the trainer ran it: the
// checkpoint's own config (so the model shape, tokenizer and data split are
// the run's), its thread count (bitwise-equal sums), its matmul precision,
// its data, its weights. One function does that, so the commands cannot drift.
#ifndef LONGCTX_TRAIN_LOADED_CHECKPOINT_H_
#define LONGCTX_TRAIN_LOADED_CHECKPOINT_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "data/token_dataset.h"
#include "kernels/backend.h"
#include "model/config.h"
#include "model/transformer.h"
#include "train/train.pb.h"

namespace longctx {

struct LoadedCheckpoint {
  TrainConfig config;
  ModelDims dims;
  std::unique_ptr<TokenDataset> tokens;  // null when loaded without data
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Transformer> model;  // declared after backend: destroyed first
};

enum class CheckpointData { kOpen, kSkip };

// Loads checkpoint DIR; data, when non-empty, replaces the config's data.path.
// With CheckpointData::kSkip the run's data is not opened (tokens stays null):
// for commands that only need the model and its tokenizer (`generate`), so a
// checkpoint copied away from its training data still runs.
absl::StatusOr<LoadedCheckpoint> LoadCheckpointForEval(const std::string& checkpoint, const std::string& data,
                                                       CheckpointData open_data = CheckpointData::kOpen);

}  // namespace longctx

#endif  // LONGCTX_TRAIN_LOADED_CHECKPOINT_H_
