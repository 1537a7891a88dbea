// Why: see sft_config.h.
#include "train/setup/sft_config.h"

#include <algorithm>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "train/batch_source.h"

namespace longctx {

bool IsSftConfig(const TrainConfig& config) { return !config.data().sft().path().empty(); }

absl::StatusOr<SftScheduleOptions> SftScheduleOptionsFor(const TrainConfig& config, int32_t pad_id) {
  const SftDataConfig& s = config.data().sft();
  SftScheduleOptions o;
  if (s.seq_lens_size() > 0) o.seq_lens.assign(s.seq_lens().begin(), s.seq_lens().end());
  if (s.counts_size() > 0) o.counts.assign(s.counts().begin(), s.counts().end());
  if (o.seq_lens.size() != o.counts.size())
    return absl::InvalidArgumentError(absl::StrCat("data.sft: ", o.seq_lens.size(), " seq_lens (",
                                                   absl::StrJoin(o.seq_lens, ","), ") but ", o.counts.size(),
                                                   " counts (", absl::StrJoin(o.counts, ","), "); give one count per length"));
  for (size_t i = 0; i < o.seq_lens.size(); ++i) {
    if (o.seq_lens[i] < 2)
      return absl::InvalidArgumentError(absl::StrCat("data.sft.seq_lens: ", o.seq_lens[i], " is below 2"));
    if (i > 0 && o.seq_lens[i] <= o.seq_lens[i - 1])
      return absl::InvalidArgumentError(
          absl::StrCat("data.sft.seq_lens: must be strictly ascending, got ", absl::StrJoin(o.seq_lens, ",")));
    if (o.counts[i] < 1)
      return absl::InvalidArgumentError(absl::StrCat("data.sft.counts: ", o.counts[i], " is below 1"));
  }
  if (s.tokens_per_batch() < 1)
    return absl::InvalidArgumentError(absl::StrCat("data.sft.tokens_per_batch: ", s.tokens_per_batch(), " is below 1"));
  if (s.tokens_per_batch() > int64_t{1} << 31)
    return absl::InvalidArgumentError(
        absl::StrCat("data.sft.tokens_per_batch: ", s.tokens_per_batch(), " is above 2^31 (a step's tokens are int32)"));
  o.tokens_per_batch = s.tokens_per_batch();
  if (s.long_examples() == "split") {
    o.split_long_examples = true;
  } else if (s.long_examples() == "drop") {
    o.drop_long_examples = true;
  } else if (s.long_examples() != "error") {
    return absl::InvalidArgumentError(absl::StrCat("data.sft.long_examples: \"", s.long_examples(),
                                                   "\" is not one of \"error\", \"split\", \"drop\""));
  }
  o.shuffle_seed = s.shuffle_seed();
  o.shuffle = true;
  o.pad_id = pad_id;
  return o;
}

std::string SftDataFile(const TrainConfig& config) {
  const std::string& p = config.data().sft().path();
  std::error_code ec;
  return std::filesystem::is_directory(p, ec) ? (std::filesystem::path(p) / "sft.lsft").string() : p;
}

absl::StatusOr<SftDataset> OpenSftData(const TrainConfig& config) {
  absl::StatusOr<SftDataset> d = SftDataset::Read(SftDataFile(config));
  if (!d.ok()) return absl::Status(d.status().code(), absl::StrCat("data.sft.path: ", d.status().message()));
  return d;
}

std::vector<MicroBatchShape> TrainingMicroBatchShapes(const TrainConfig& config, int world) {
  if (!IsSftConfig(config)) return {{config.data().batch_size(), config.data().seq_len()}};
  absl::StatusOr<SftScheduleOptions> o = SftScheduleOptionsFor(config);
  const SftScheduleOptions opts = o.ok() ? *o : SftScheduleOptions{};
  const int64_t micro = int64_t{std::max(1, config.grad_accum())} * std::max(1, world);
  std::vector<MicroBatchShape> shapes;
  for (int32_t L : opts.seq_lens) {
    const int64_t rows = std::max<int64_t>(1, opts.tokens_per_batch / L);
    shapes.push_back({std::max<int64_t>(1, rows / micro), L});
  }
  return shapes;
}

absl::StatusOr<PackedBatch> SftLastStepFirstMicroBatch(const TrainConfig& config, const nlohmann::json& state,
                                                       int32_t pad_id) {
  if (!state.contains("sft_last_step_cursor"))
    return absl::DataLossError("trainer_state.json has no sft_last_step_cursor (not an SFT run's checkpoint?)");
  absl::StatusOr<SftScheduleCursor> cursor = SftScheduleCursorFromJson(state.at("sft_last_step_cursor"));
  if (!cursor.ok()) return absl::DataLossError(absl::StrCat("trainer_state.json: ", cursor.status().message()));
  absl::StatusOr<SftDataset> data = OpenSftData(config);
  if (!data.ok()) return data.status();
  absl::StatusOr<SftScheduleOptions> o = SftScheduleOptionsFor(config, pad_id);
  if (!o.ok()) return o.status();
  absl::StatusOr<SftSchedule> schedule = SftSchedule::Create(&*data, *o);
  if (!schedule.ok()) return absl::Status(schedule.status().code(), absl::StrCat("data.sft: ", schedule.status().message()));
  if (absl::Status st = schedule->Seek(*cursor); !st.ok())
    return absl::DataLossError(absl::StrCat("trainer_state.json: sft_last_step_cursor: ", st.message()));
  PackedBatch whole;
  if (absl::Status st = schedule->NextInto(&whole); !st.ok()) return st;
  const int64_t world = state.contains("world_size") && state["world_size"].is_number_integer()
                            ? std::max<int64_t>(1, state["world_size"].get<int64_t>())
                            : 1;
  const int64_t micro = std::max(1, config.grad_accum()) * world;
  if (whole.batch_size % micro != 0)
    return absl::DataLossError(absl::StrCat("data.sft: the last step's ", whole.batch_size, " rows do not split into ",
                                            micro, " micro-batches (grad_accum x world_size)"));
  return SliceRows(whole, 0, static_cast<int32_t>(whole.batch_size / micro));
}

std::string SftScheduleSummary(const SftScheduleOptions& o) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < o.seq_lens.size(); ++i) parts.push_back(absl::StrCat(o.seq_lens[i], "x", o.counts[i]));
  return absl::StrCat(absl::StrJoin(parts, ","), " (", o.tokens_per_batch, " tokens per step)");
}

}  // namespace longctx
