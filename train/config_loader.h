// Why: one text-format file describes a whole run and any field can be
// changed from the command line (`--model.hidden_size=128`), so experiments
// differ by a visible diff, not by edited copies. Everything that can be wrong
// with a config is reported here, before a byte of model memory is allocated,
// as one line naming the place: `configs/x.textproto:3:5: ...` for a typo in
// the file, `--model.foo: no such field in longctx.ModelConfig` for a bad flag,
// `data.seq_len: must be > 0 (got 0)` for a bad value.
#ifndef LONGCTX_TRAIN_CONFIG_LOADER_H_
#define LONGCTX_TRAIN_CONFIG_LOADER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "google/protobuf/message.h"
#include "train/train.pb.h"

namespace longctx {

// Reads `path` (text format), applies `overrides` in order, validates
// (ValidateTrainConfig and ValidateRunLimits).
// Overrides look like `section.field=value` (a leading `--` is accepted).
absl::StatusOr<TrainConfig> LoadTrainConfig(const std::string& path, const std::vector<std::string>& overrides);

// A config a checkpoint saved: ValidateTrainConfig only, so that a run saved
// before ValidateRunLimits existed stays readable (eval, probe, init_from);
// a new run's own config still has to meet them.
absl::StatusOr<TrainConfig> LoadSavedTrainConfig(const std::string& path);

// The text of config file `path`, at most `max_bytes` (kMaxConfigBytes) long.
// A directory, a device (/dev/zero, /dev/urandom) or a longer file is an error
// naming the path, never a run of defaults or a read without end.
inline constexpr int64_t kMaxConfigBytes = 4 << 20;
absl::StatusOr<std::string> ReadConfigText(const std::string& path, int64_t max_bytes = kMaxConfigBytes);

// Parses text-format `text`; errors are reported as `filename:LINE:COL: message`
// (1-based). No overrides, no validation.
absl::StatusOr<TrainConfig> ParseTrainConfigText(const std::string& text, const std::string& filename);

// Sets one field of `msg` by reflection from `path=value`, where path is a
// dot-separated chain of field names (message fields are descended into).
// Values: integers and floats in C syntax, bools true/false/1/0/yes/no, enums
// by name (case-insensitive) or number, strings verbatim; a repeated field is
// replaced by the comma-separated list (empty value = clear it).
// Errors start with `--path:`.
absl::Status ApplyOverride(google::protobuf::Message* msg, const std::string& assignment);

// The run-level checks plus ResolveModelConfig; each error names its field.
// model.num_layers above kMaxNumLayers is refused before any per-layer table is built.
inline constexpr int kMaxNumLayers = 1 << 16;
absl::Status ValidateTrainConfig(const TrainConfig& config);

// What a new run's config must also meet, each error naming both fields and
// their values: model.max_position_embeddings >= data.seq_len (the exported
// config.json records it) and optim.min_lr <= optim.lr.
absl::Status ValidateRunLimits(const TrainConfig& config);

// Text format of `config`. With include_defaults every field is written, with
// its default where unset (what a run directory records, so a later change of
// a default cannot change what an old run meant).
std::string ToTextProto(const TrainConfig& config, bool include_defaults = false);

}  // namespace longctx

#endif  // LONGCTX_TRAIN_CONFIG_LOADER_H_
