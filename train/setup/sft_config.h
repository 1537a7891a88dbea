// Why: the data.sft block of a config (train.proto SftDataConfig) is read in
// three places — the trainer builds its SFT schedule from it, the memory check
// sizes the activations for its longest micro-batch, and resume compares it
// with a checkpoint's — so the defaults (8,192 and 65,536 at 3:1), the
// validation and the micro-batch shapes live here once.
#ifndef LONGCTX_TRAIN_SFT_CONFIG_H_
#define LONGCTX_TRAIN_SFT_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "data/packer.h"
#include "data/sft_schedule.h"
#include "data/sft_token_file.h"
#include "train/train.pb.h"

namespace longctx {

// data.sft.path is set: the run trains on the SFT schedule.
bool IsSftConfig(const TrainConfig& config);

// The schedule options data.sft asks for (defaults filled in); errors name the
// data.sft field. pad_id: the tokenizer's.
absl::StatusOr<SftScheduleOptions> SftScheduleOptionsFor(const TrainConfig& config, int32_t pad_id = 0);

// data.sft.path as the .lsft file it names: the path itself, or PATH/sft.lsft
// for a `longctx data sft` output directory.
std::string SftDataFile(const TrainConfig& config);

// Reads SftDataFile(config); errors are prefixed "data.sft.path: ".
absl::StatusOr<SftDataset> OpenSftData(const TrainConfig& config);

// One micro-batch shape a training run uses: rows × seq_len tokens.
struct MicroBatchShape {
  int64_t batch = 0;
  int64_t seq_len = 0;
  bool operator==(const MicroBatchShape&) const = default;
};
// Every micro-batch shape of the run on `world` ranks: pretraining has one
// (data.batch_size × data.seq_len); SFT one per schedule length (its rows /
// (grad_accum × world), at least 1, × the length). Bad SFT options give the
// defaults' shapes (the trainer reports the options' error itself).
std::vector<MicroBatchShape> TrainingMicroBatchShapes(const TrainConfig& config, int world);

// The first micro-batch of the last training step of an SFT checkpoint
// (trainer_state.json's sft_last_step_cursor, the step's rows dealt as the
// trainer deals them over grad_accum × its world_size): what `longctx eval
// --batch=last_train` evaluates. Errors name the state field or data.sft.
absl::StatusOr<PackedBatch> SftLastStepFirstMicroBatch(const TrainConfig& config, const nlohmann::json& state,
                                                       int32_t pad_id);

// "8192x3,65536x1 (65536 tokens per step)" — for the run's banner line.
std::string SftScheduleSummary(const SftScheduleOptions& options);

}  // namespace longctx

#endif  // LONGCTX_TRAIN_SFT_CONFIG_H_
