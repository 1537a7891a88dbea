// Why: see loaded_checkpoint.h.
#include "train/setup/loaded_checkpoint.h"

#include "absl/strings/str_cat.h"
#include "train/checkpoint/checkpoint.h"
#include "train/setup/memory_check.h"
#include "train/setup/backend_for_config.h"
#include "train/setup/training_data.h"

namespace longctx {

absl::StatusOr<LoadedCheckpoint> LoadCheckpointForEval(const std::string& checkpoint, const std::string& data,
                                                       CheckpointData open_data) {
  if (checkpoint.empty()) return absl::InvalidArgumentError("--checkpoint is required");
  LoadedCheckpoint c;
  absl::StatusOr<TrainConfig> config = LoadCheckpointConfig(checkpoint);
  if (!config.ok()) return config.status();
  c.config = std::move(*config);
  if (!data.empty()) c.config.mutable_data()->set_path(data);
  absl::StatusOr<ModelDims> dims = ResolveModelConfig(c.config.model());
  if (!dims.ok()) return dims.status();
  c.dims = *dims;
  // The checkpoint's config.json may name a model this machine cannot hold: say so, do not abort.
  if (absl::Status fits = CheckMemoryFitsMachine(c.config, c.dims, MemoryUse::kInference, Bf16OperandCopies{}); !fits.ok())
    return absl::Status(fits.code(), absl::StrCat(checkpoint, ": ", fits.message()));
  if (open_data == CheckpointData::kOpen) {
    absl::StatusOr<std::unique_ptr<TokenDataset>> tokens = OpenTrainingData(c.config);
    if (!tokens.ok()) return tokens.status();
    c.tokens = std::move(*tokens);
  }
  // The trainer's thread count (bitwise-equal sums) and precision.
  absl::StatusOr<std::unique_ptr<Backend>> backend = MakeBackendForConfig(c.config);
  if (!backend.ok()) return backend.status();
  c.backend = std::move(*backend);
  absl::Status st;
  c.model = std::make_unique<Transformer>(c.dims, c.backend.get(), DType::kF32);
  st = LoadModelWeights(checkpoint, c.model.get());
  if (!st.ok()) return st;
  return c;
}

}  // namespace longctx
