// Why: see checkpoint.h. Weights are copied buffer by buffer to host memory and
// streamed to safetensors with the layout's Hugging Face names; AdamW moments
// use the same names with ".exp_avg" / ".exp_avg_sq" suffixes. The manifest
// (sizes and XXH64 of every file, hashed back from disk after writing) is the
// last file before the COMPLETE marker; loaders verify against it, because a
// flipped byte in a weight file otherwise loads silently.
#include "train/checkpoint/checkpoint.h"

#include <fcntl.h>
#include <google/protobuf/text_format.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "data/token_file.h"
#include "base/log.h"
#include "model/config.h"
#include "model/hf_config.h"
#include "train/checkpoint/checkpoint_dir.h"
#include "train/config_loader.h"
#include "train/checkpoint/checkpoint_reader.h"
#include "train/checkpoint/manifest.h"
#include "train/checkpoint/safetensors.h"

namespace longctx {
namespace {

// Host copies of every buffer of a store, plus safetensors entries into them.
struct HostStore {
  std::vector<std::vector<char>> buffers;
  std::vector<SafetensorsEntry> entries;
};

// Host copies of a store; an error naming the first tensor with a NaN or Inf
// (F32 stores), so a diverged run never saves weights that decode to garbage.
absl::StatusOr<HostStore> ToHost(const ParamStore& store, const std::string& suffix, int64_t step) {
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
    if (store.dtype() == DType::kF32) {
      const float* f = reinterpret_cast<const float*>(e.data);
      int64_t n = 1;
      for (int64_t d : s.shape) n *= d;
      for (int64_t i = 0; i < n; ++i)
        if (!std::isfinite(f[i]))
          return absl::FailedPreconditionError(absl::StrCat(
              "checkpoint at step ", step, ": '", e.name, "' has a non-finite value (", f[i], " at element ", i,
              "); not saving it (the previous checkpoint, if any, is kept)"));
    }
    h.entries.push_back(e);
  }
  return h;
}

// Every buffer of `part` into a full store, one buffer's host copy at a time.
absl::Status ReadWholeBuffers(CheckpointReader& r, CheckpointPart part, ParamStore* store) {
  const ParamLayout& layout = store->layout();
  if (store->dtype() != DType::kF32)
    return absl::InvalidArgumentError("checkpoint load: the store is not f32");
  for (int b = 0; b < layout.num_buffers(); ++b) {
    std::vector<float> host(static_cast<size_t>(layout.buffer_size(b)));
    if (absl::Status st = r.ReadRange(part, b, 0, layout.buffer_size(b), host.data()); !st.ok()) return st;
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
  std::vector<std::string> files = {kModelFile};
  {
    absl::StatusOr<HostStore> w = ToHost(const_cast<Transformer&>(model).params(), "", step);
    if (!w.ok()) return w.status();
    absl::Status st = WriteSafetensors(writer->path(kModelFile), w->entries, meta);
    if (!st.ok()) return st;
  }
  if (optimizer != nullptr) {
    absl::StatusOr<HostStore> m = ToHost(const_cast<AdamW*>(optimizer)->m(), ".exp_avg", step);
    if (!m.ok()) return m.status();
    absl::StatusOr<HostStore> v = ToHost(const_cast<AdamW*>(optimizer)->v(), ".exp_avg_sq", step);
    if (!v.ok()) return v.status();
    m->entries.insert(m->entries.end(), v->entries.begin(), v->entries.end());
    absl::Status st = WriteSafetensors(writer->path(kOptimizerFile), m->entries, meta);
    if (!st.ok()) return st;
    files.push_back(kOptimizerFile);
  }
  nlohmann::json hf = HfConfigJson(model.dims(), config.model(), bos_id, eos_id);
  absl::Status st = WriteFileAtomic(writer->path(kHfConfigFile), hf.dump(2) + "\n");
  if (st.ok()) st = WriteFileAtomic(writer->path(kTrainConfigFile), ToTextProto(config, /*include_defaults=*/true));
  if (st.ok()) st = WriteFileAtomic(writer->path(kTrainerStateFile), trainer_state.dump(2) + "\n");
  files.insert(files.end(), {kHfConfigFile, kTrainConfigFile, kTrainerStateFile});
  std::vector<int64_t> buffer_sizes;
  const ParamLayout& layout = const_cast<Transformer&>(model).params().layout();
  for (int b = 0; b < layout.num_buffers(); ++b) buffer_sizes.push_back(layout.buffer_size(b));
  std::map<std::string, FileDigest> digests;
  for (const std::string& f : files) {
    if (!st.ok()) break;
    absl::StatusOr<FileDigest> d = HashFile(writer->path(f));
    if (d.ok()) digests[f] = *d;
    else st = d.status();
  }
  const int64_t world = trainer_state.is_object() && trainer_state.contains("world_size") &&
                                trainer_state["world_size"].is_number_integer()
                            ? trainer_state["world_size"].get<int64_t>()
                            : 1;
  // One full copy of every buffer (written by rank 0); any world size and
  // mode reads the ranges it needs from it (checkpoint_reader.h).
  const nlohmann::json lay = {{"kind", "full"}, {"buffer_sizes", buffer_sizes}};
  if (st.ok()) st = WriteManifest(writer->tmp_dir(), step, world, config.mode(), lay, digests);
  if (st.ok()) st = writer->Commit();
  if (!st.ok()) return st;
  const std::string final_path = writer->final_dir();
  st = WriteFileAtomic(out_dir + "/" + kLatestPointerFile, CheckpointDirName(step) + "\n");
  if (!st.ok()) return st;
  st = PruneCheckpoints(out_dir, keep);
  if (!st.ok()) return st;
  return final_path;
}

absl::Status VerifyCheckpointForRank(const std::string& dir, const ParamLayout& layout, ParallelMode mode, int rank,
                                     int world) {
  if (absl::Status st = VerifyCheckpointStructure(dir); !st.ok()) return st;
  absl::StatusOr<CheckpointReader> r = CheckpointReader::Open(dir, layout);
  if (!r.ok()) return r.status();
  const std::vector<CheckpointShard> mine = RankRanges(layout, rank, world);
  const std::vector<CheckpointShard> all = WholeBuffers(layout);
  // Parameters: FSDP reads its range, DDP and ZeRO-1 every element; moments:
  // DDP every element, ZeRO-1 and FSDP their range.
  std::vector<std::string> files = r->FilesFor(mode == FSDP ? mine : all, /*params=*/true, /*moments=*/false);
  for (const std::string& f : r->FilesFor(mode == DDP ? all : mine, /*params=*/false, /*moments=*/true))
    files.push_back(f);
  for (const char* f : {kHfConfigFile, kTrainConfigFile, kTrainerStateFile}) files.push_back(f);
  return r->Verify(files);
}

absl::Status LoadModelWeights(const std::string& dir, Transformer* model, bool verify) {
  absl::StatusOr<CheckpointReader> r = CheckpointReader::Open(dir, model->layout());
  if (!r.ok()) return r.status();
  const std::vector<CheckpointShard> all = WholeBuffers(model->layout());
  if (verify) {
    if (r->manifest().is_null())
      LOG(WARNING) << dir << ": no " << kManifestFile << " (written before checksums); its weights are not verified";
    if (absl::Status st = r->Verify(r->FilesFor(all, /*params=*/true, /*moments=*/false)); !st.ok()) return st;
  }
  return ReadWholeBuffers(*r, CheckpointPart::kParams, &model->params());
}

absl::Status LoadOptimizerState(const std::string& dir, AdamW* optimizer, bool verify) {
  absl::StatusOr<CheckpointReader> r = CheckpointReader::Open(dir, optimizer->m().layout());
  if (!r.ok()) return r.status();
  if (verify)
    if (absl::Status st = r->Verify(r->FilesFor(WholeBuffers(optimizer->m().layout()), false, true)); !st.ok())
      return st;
  absl::Status st = ReadWholeBuffers(*r, CheckpointPart::kExpAvg, &optimizer->m());
  if (st.ok()) st = ReadWholeBuffers(*r, CheckpointPart::kExpAvgSq, &optimizer->v());
  return st;
}

absl::Status ConsolidateCheckpoint(const std::string& dir, const std::string& out) {
  if (dir.empty() || out.empty()) return absl::InvalidArgumentError("consolidate: --checkpoint and --out are required");
  if (std::filesystem::exists(out + "/" + kModelFile))
    return absl::AlreadyExistsError(absl::StrCat(out, ": already holds a ", kModelFile, "; choose an empty --out"));
  if (absl::Status st = VerifyCheckpointFiles(dir); !st.ok()) return st;
  absl::StatusOr<TrainConfig> config = LoadCheckpointConfig(dir);
  if (!config.ok()) return config.status();
  absl::StatusOr<nlohmann::json> state = LoadTrainerState(dir);
  if (!state.ok()) return state.status();
  absl::StatusOr<ModelDims> dims = ResolveModelConfig(config->model());
  if (!dims.ok()) return absl::Status(dims.status().code(), absl::StrCat(dir, "/", kTrainConfigFile, ": ",
                                                                         dims.status().message()));
  const ParamLayout layout(*dims);
  absl::StatusOr<CheckpointReader> reader = CheckpointReader::Open(dir, layout);
  if (!reader.ok()) return reader.status();
  std::error_code ec;
  std::filesystem::create_directories(out, ec);
  if (ec) return absl::UnavailableError(absl::StrCat("consolidate: cannot create ", out, ": ", ec.message()));
  // The weights (one HF-layout file, assembled from the shards when the
  // checkpoint is sharded: the whole model in memory once), the HF config and
  // what eval/generate/probe read (the run's config and trainer state); no
  // optimizer moments.
  if (reader->sharded()) {
    std::vector<std::vector<float>> host(static_cast<size_t>(layout.num_buffers()));
    for (int b = 0; b < layout.num_buffers(); ++b) {
      host[b].resize(static_cast<size_t>(layout.buffer_size(b)));
      if (absl::Status st = reader->ReadRange(CheckpointPart::kParams, b, 0, layout.buffer_size(b), host[b].data());
          !st.ok())
        return st;
    }
    std::vector<SafetensorsEntry> entries;
    for (const ParamSlice& s : layout.slices()) {
      SafetensorsEntry e;
      e.name = s.name;
      e.dtype = DType::kF32;
      e.shape = s.shape;
      e.data = host[s.buffer].data() + s.offset;
      entries.push_back(std::move(e));
    }
    if (absl::Status st = WriteSafetensors(out + "/" + kModelFile, entries, {{"format", "pt"}}); !st.ok()) return st;
  } else {
    absl::StatusOr<std::string> bytes = ReadFileToString(dir + "/" + kModelFile);
    if (!bytes.ok()) return bytes.status();
    if (absl::Status st = WriteFileAtomic(out + "/" + kModelFile, *bytes); !st.ok()) return st;
  }
  for (const char* f : {kHfConfigFile, kTrainConfigFile, kTrainerStateFile}) {
    absl::StatusOr<std::string> bytes = ReadFileToString(dir + "/" + f);
    if (!bytes.ok()) return bytes.status();
    if (absl::Status st = WriteFileAtomic(out + "/" + f, *bytes); !st.ok()) return st;
  }
  std::map<std::string, FileDigest> digests;
  for (const char* f : {kModelFile, kHfConfigFile, kTrainConfigFile, kTrainerStateFile}) {
    absl::StatusOr<FileDigest> d = HashFile(out + "/" + f);
    if (!d.ok()) return d.status();
    digests[f] = *d;
  }
  std::vector<int64_t> buffer_sizes;
  for (int b = 0; b < layout.num_buffers(); ++b) buffer_sizes.push_back(layout.buffer_size(b));
  return WriteManifest(out, (*state)["step"].get<int64_t>(), 1, config->mode(),
                       {{"kind", "full"}, {"buffer_sizes", buffer_sizes}}, digests);
}

}  // namespace longctx
