// Why: a checkpoint is a directory with what longctx needs to resume exactly
// (the full TrainConfig, parameters, AdamW moments, step and data cursor) and
// config.json. DDP (and a consolidated checkpoint) holds one full copy a
// Hugging Face tool reads as-is (model.safetensors with Llama tensor names);
// ZeRO-1/FSDP write one shard file per rank in parallel (sharded_save.h), which
// `longctx checkpoint consolidate` turns into that single file. Loading reads
// either layout (checkpoint_reader.h). It is written to a temporary directory and renamed into place only
// when complete (train/checkpoint/checkpoint_dir.h), so a crash never leaves a partial
// checkpoint that looks valid.
#ifndef LONGCTX_TRAIN_CHECKPOINT_H_
#define LONGCTX_TRAIN_CHECKPOINT_H_

#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "model/transformer.h"
#include "optim/adamw.h"
#include "train/train.pb.h"

namespace longctx {

inline constexpr char kModelFile[] = "model.safetensors";
inline constexpr char kOptimizerFile[] = "optimizer.safetensors";
inline constexpr char kHfConfigFile[] = "config.json";
inline constexpr char kTrainConfigFile[] = "longctx_config.textproto";
inline constexpr char kTrainerStateFile[] = "trainer_state.json";
// Written last (before COMPLETE): world size, mode, layout, and every file's
// size and XXH64, so loading can tell a corrupt file from a good one.
inline constexpr char kManifestFile[] = "manifest.json";
// <out_dir>/latest: the name of the newest committed checkpoint directory
// ("step-00000120\n"), replaced atomically after each save (for scripts; the
// trainer itself scans for the newest complete, verified checkpoint).
inline constexpr char kLatestPointerFile[] = "latest";

// Writes <out_dir>/step-NNNNNNNN atomically and prunes to `keep` checkpoints.
// `optimizer` may be null (weights-only checkpoint). Returns the final path.
absl::StatusOr<std::string> SaveCheckpoint(const std::string& out_dir, int64_t step, const TrainConfig& config,
                                           const Transformer& model, const AdamW* optimizer,
                                           const nlohmann::json& trainer_state, int keep, int bos_id,
                                           int eos_id);

// What a resume from DIR relies on besides the bytes of the files, checked
// without the model: a step-NNNNNNNN directory has its COMPLETE marker, its
// config, run config and trainer state, and a trainer-state world size equal
// to the manifest's; manifest.json is present; a full layout lists
// model.safetensors; a sharded one has world_size equal to its layout's, one
// shard entry per rank in rank order naming that rank's file, every file
// listed in "files", ranges that tile every buffer exactly, and each shard
// file holding exactly the tensors of its ranges. DataLoss naming DIR and the
// file at fault (Unimplemented for a layout kind this build does not read).
absl::Status VerifyCheckpointStructure(const std::string& dir);
// VerifyCheckpointStructure, then every file listed in DIR/manifest.json
// against its recorded size and XXH64. DataLoss naming the file on a mismatch
// or missing file (a directory without manifest.json is one).
absl::Status VerifyCheckpointFiles(const std::string& dir);
// Checks one file of DIR against the manifest (same rules as above).
absl::Status VerifyCheckpointFile(const std::string& dir, const std::string& file);

// VerifyCheckpointStructure, then the files rank `rank` of `world` in `mode` reads to resume from DIR, plus
// config.json, the run's config and trainer_state.json, checked against the
// manifest: parameters — FSDP its range, DDP and ZeRO-1 every element;
// moments — DDP every element, ZeRO-1 and FSDP their range (of whichever
// layout DIR has). DataLoss naming a corrupt file; FailedPrecondition when
// DIR was written for another model.
absl::Status VerifyCheckpointForRank(const std::string& dir, const ParamLayout& layout, ParallelMode mode, int rank,
                                     int world);

// Loads the full parameters into the model from either layout (model.safetensors,
// names and shapes must match, or every shard file), after verifying the
// files read against the manifest unless verify is false (the caller did).
absl::Status LoadModelWeights(const std::string& dir, Transformer* model, bool verify = true);
// Loads the full AdamW moments (optimizer.safetensors or every shard file).
absl::Status LoadOptimizerState(const std::string& dir, AdamW* optimizer, bool verify = true);
// trainer_state.json, with "step" (required) and "tokens_seen" (if present)
// checked to be integers in [0, 2^53]: errors name the file and the field.
absl::StatusOr<nlohmann::json> LoadTrainerState(const std::string& dir);
absl::StatusOr<TrainConfig> LoadCheckpointConfig(const std::string& dir);

// `longctx checkpoint consolidate`: verifies checkpoint DIR and writes OUT with
// one HF-layout model.safetensors + config.json, the run's config and trainer
// state (what eval, generate and probe read) and a manifest; no optimizer
// state. A sharded checkpoint's parameter ranges are assembled into whole
// tensors (the full model in memory once); a full one is copied.
absl::Status ConsolidateCheckpoint(const std::string& dir, const std::string& out);

}  // namespace longctx

#endif  // LONGCTX_TRAIN_CHECKPOINT_H_
