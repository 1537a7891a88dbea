// Why: see checkpoint.h. Weights are copied buffer by buffer to host memory and
// streamed to safetensors with the layout's Hugging Face names; AdamW moments
// use the same names with ".exp_avg" / ".exp_avg_sq" suffixes.
#include "train/checkpoint/checkpoint.h"

#include <google/protobuf/text_format.h>

#include <vector>

#include "absl/strings/str_cat.h"
#include "model/hf_config.h"
#include "train/checkpoint/checkpoint_dir.h"
#include "train/config_loader.h"
#include "train/checkpoint/safetensors.h"

namespace longctx {
namespace {

// Host copies of every buffer of a store, plus safetensors entries into them.
struct HostStore {
  std::vector<std::vector<char>> buffers;
  std::vector<SafetensorsEntry> entries;
};

HostStore ToHost(const ParamStore& store, const std::string& suffix) {
  HostStore h;
  const ParamLayout& layout = store.layout();
  const size_t es = DTypeSize(store.dtype());
  for (int b = 0; b < layout.num_buffers(); ++b) {
    h.buffers.emplace_back(layout.buffer_size(b) * es);
    store.CopyToHost(b, h.buffers.back().data());
  }
  for (const ParamSlice& s : layout.slices()) {
    SafetensorsEntry e;
    e.name = s.name + suffix;
    e.dtype = store.dtype();
    e.shape = s.shape;
    e.data = h.buffers[s.buffer].data() + s.offset * es;
    h.entries.push_back(e);
  }
  return h;
}

absl::Status FromFile(const std::string& path, ParamStore* store, const std::string& suffix) {
  absl::StatusOr<SafetensorsReader> reader = SafetensorsReader::Open(path);
  if (!reader.ok()) return reader.status();
  const ParamLayout& layout = store->layout();
  const size_t es = DTypeSize(store->dtype());
  for (int b = 0; b < layout.num_buffers(); ++b) {
    std::vector<char> host(layout.buffer_size(b) * es);
    for (const ParamSlice& s : layout.slices()) {
      if (s.buffer != b) continue;
      absl::Status st = reader->ReadInto(s.name + suffix, host.data() + s.offset * es, store->dtype(), s.shape);
      if (!st.ok()) return st;
    }
    store->CopyFromHost(b, host.data());
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> SaveCheckpoint(const std::string& out_dir, int64_t step, const TrainConfig& config,
                                           const Transformer& model, const AdamW* optimizer,
                                           const nlohmann::json& trainer_state, int keep, int bos_id,
                                           int eos_id) {
  absl::StatusOr<CheckpointDirWriter> writer = CheckpointDirWriter::Begin(out_dir, step);
  if (!writer.ok()) return writer.status();
  const std::map<std::string, std::string> meta = {{"format", "pt"}};
  {
    HostStore w = ToHost(const_cast<Transformer&>(model).params(), "");
    absl::Status st = WriteSafetensors(writer->path(kModelFile), w.entries, meta);
    if (!st.ok()) return st;
  }
  if (optimizer != nullptr) {
    HostStore m = ToHost(const_cast<AdamW*>(optimizer)->m(), ".exp_avg");
    HostStore v = ToHost(const_cast<AdamW*>(optimizer)->v(), ".exp_avg_sq");
    m.entries.insert(m.entries.end(), v.entries.begin(), v.entries.end());
    absl::Status st = WriteSafetensors(writer->path(kOptimizerFile), m.entries, meta);
    if (!st.ok()) return st;
  }
  nlohmann::json hf = HfConfigJson(model.dims(), config.model(), bos_id, eos_id);
  absl::Status st = WriteFileAtomic(writer->path(kHfConfigFile), hf.dump(2) + "\n");
  if (st.ok()) st = WriteFileAtomic(writer->path(kTrainConfigFile), ToTextProto(config, /*include_defaults=*/true));
  if (st.ok()) st = WriteFileAtomic(writer->path(kTrainerStateFile), trainer_state.dump(2) + "\n");
  if (st.ok()) st = writer->Commit();
  if (!st.ok()) return st;
  const std::string final_path = writer->final_dir();
  st = PruneCheckpoints(out_dir, keep);
  if (!st.ok()) return st;
  return final_path;
}

absl::Status LoadModelWeights(const std::string& dir, Transformer* model) {
  return FromFile(dir + "/" + kModelFile, &model->params(), "");
}

absl::Status LoadOptimizerState(const std::string& dir, AdamW* optimizer) {
  absl::Status st = FromFile(dir + "/" + kOptimizerFile, &optimizer->m(), ".exp_avg");
  if (st.ok()) st = FromFile(dir + "/" + kOptimizerFile, &optimizer->v(), ".exp_avg_sq");
  return st;
}

absl::StatusOr<nlohmann::json> LoadTrainerState(const std::string& dir) {
  const std::string path = dir + "/" + kTrainerStateFile;
  absl::StatusOr<std::string> text = ReadFileToString(path);
  if (!text.ok()) return text.status();
  nlohmann::json j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return absl::DataLossError(absl::StrCat(path, ": not a JSON object"));
  return j;
}

absl::StatusOr<TrainConfig> LoadCheckpointConfig(const std::string& dir) {
  return LoadTrainConfig(dir + "/" + kTrainConfigFile, {});
}

}  // namespace longctx
