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

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "data/token_file.h"
#include "kernels/log.h"
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

struct FileDigest {
  int64_t size = 0;
  uint64_t xxh64 = 0;
};

absl::StatusOr<FileDigest> HashFile(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::DataLossError(absl::StrCat(path, ": cannot open: ", std::strerror(errno)));
  XxHash64Stream h;
  FileDigest d;
  std::vector<char> buf(1 << 20);
  while (true) {
    const ssize_t r = read(fd, buf.data(), buf.size());
    if (r < 0) {
      if (errno == EINTR) continue;
      const int e = errno;
      close(fd);
      return absl::DataLossError(absl::StrCat(path, ": read failed: ", std::strerror(e)));
    }
    if (r == 0) break;
    h.Update(buf.data(), static_cast<size_t>(r));
    d.size += r;
  }
  close(fd);
  d.xxh64 = h.Digest();
  return d;
}

std::string Hex64(uint64_t v) { return absl::StrFormat("%016x", v); }

const char* ModeName(ParallelMode m) {
  switch (m) {
    case ZERO1: return "ZERO1";
    case FSDP: return "FSDP";
    default: return "DDP";
  }
}

absl::StatusOr<nlohmann::json> ReadManifest(const std::string& dir, bool* legacy) {
  const std::string path = dir + "/" + kManifestFile;
  *legacy = false;
  if (!std::filesystem::exists(path)) {
    *legacy = true;
    return nlohmann::json();
  }
  absl::StatusOr<std::string> text = ReadFileToString(path);
  if (!text.ok()) return absl::DataLossError(text.status().message());
  nlohmann::json j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || !j.contains("files") || !j["files"].is_object())
    return absl::DataLossError(absl::StrCat(path, ": not a checkpoint manifest (no \"files\" object)"));
  return j;
}

absl::Status VerifyAgainst(const std::string& dir, const nlohmann::json& manifest, const std::string& file) {
  const std::string path = dir + "/" + file;
  const nlohmann::json& files = manifest["files"];
  if (!files.contains(file) || !files[file].is_object() || !files[file].contains("size") ||
      !files[file]["size"].is_number_integer() || !files[file].contains("xxh64") || !files[file]["xxh64"].is_string())
    return absl::DataLossError(absl::StrCat(path, ": not listed (with size and xxh64) in ", dir, "/", kManifestFile));
  absl::StatusOr<FileDigest> d = HashFile(path);
  if (!d.ok()) return d.status();
  const int64_t size = files[file]["size"].get<int64_t>();
  const std::string want = files[file]["xxh64"].get<std::string>();
  if (d->size != size)
    return absl::DataLossError(absl::StrCat(path, ": corrupt checkpoint file: ", d->size, " bytes, the manifest says ",
                                            size));
  if (Hex64(d->xxh64) != want)
    return absl::DataLossError(absl::StrCat(path, ": corrupt checkpoint file: XXH64 ", Hex64(d->xxh64),
                                            ", the manifest says ", want));
  return absl::OkStatus();
}

absl::Status WriteManifest(const std::string& dir, int64_t step, const TrainConfig& config,
                           const std::vector<int64_t>& buffer_sizes, const nlohmann::json& trainer_state,
                           const std::vector<std::string>& files) {
  nlohmann::json m;
  m["format"] = "longctx-checkpoint-1";
  m["step"] = step;
  m["world_size"] = trainer_state.is_object() && trainer_state.contains("world_size") ? trainer_state["world_size"]
                                                                                        : nlohmann::json(1);
  m["mode"] = ModeName(config.mode());
  // One full copy of every buffer (written by rank 0); the strategies reshard
  // it on load for any world size.
  m["layout"] = {{"kind", "full"}, {"buffer_sizes", buffer_sizes}};
  m["checksum"] = "xxh64";
  nlohmann::json fj = nlohmann::json::object();
  for (const std::string& f : files) {
    absl::StatusOr<FileDigest> d = HashFile(dir + "/" + f);
    if (!d.ok()) return d.status();
    fj[f] = {{"size", d->size}, {"xxh64", Hex64(d->xxh64)}};
  }
  m["files"] = fj;
  return WriteFileAtomic(dir + "/" + kManifestFile, m.dump(2) + "\n");
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
  if (st.ok()) st = WriteManifest(writer->tmp_dir(), step, config, buffer_sizes, trainer_state, files);
  if (st.ok()) st = writer->Commit();
  if (!st.ok()) return st;
  const std::string final_path = writer->final_dir();
  st = WriteFileAtomic(out_dir + "/" + kLatestPointerFile, CheckpointDirName(step) + "\n");
  if (!st.ok()) return st;
  st = PruneCheckpoints(out_dir, keep);
  if (!st.ok()) return st;
  return final_path;
}

absl::Status VerifyCheckpointFile(const std::string& dir, const std::string& file) {
  bool legacy = false;
  absl::StatusOr<nlohmann::json> m = ReadManifest(dir, &legacy);
  if (!m.ok()) return m.status();
  if (legacy) {
    LOG(WARNING) << dir << ": no " << kManifestFile << " (written before checksums); " << file << " is not verified";
    return absl::OkStatus();
  }
  return VerifyAgainst(dir, *m, file);
}

absl::Status VerifyCheckpointFiles(const std::string& dir) {
  bool legacy = false;
  absl::StatusOr<nlohmann::json> m = ReadManifest(dir, &legacy);
  if (!m.ok()) return m.status();
  if (legacy) {
    LOG(WARNING) << dir << ": no " << kManifestFile << " (written before checksums); its files are not verified";
    return absl::OkStatus();
  }
  for (auto it = (*m)["files"].begin(); it != (*m)["files"].end(); ++it)
    if (absl::Status st = VerifyAgainst(dir, *m, it.key()); !st.ok()) return st;
  return absl::OkStatus();
}

absl::Status LoadModelWeights(const std::string& dir, Transformer* model) {
  if (absl::Status st = VerifyCheckpointFile(dir, kModelFile); !st.ok()) return st;
  return FromFile(dir + "/" + kModelFile, &model->params(), "");
}

absl::Status LoadOptimizerState(const std::string& dir, AdamW* optimizer) {
  if (absl::Status st = VerifyCheckpointFile(dir, kOptimizerFile); !st.ok()) return st;
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
  // 2^53: beyond any real run, and where doubles stop counting exactly.
  constexpr int64_t kMaxCount = int64_t{1} << 53;
  for (const char* field : {"step", "tokens_seen"}) {
    if (!j.contains(field)) {
      if (std::string(field) == "step") return absl::DataLossError(absl::StrCat(path, ": field \"step\" is missing"));
      continue;
    }
    const nlohmann::json& v = j[field];
    if (!v.is_number_integer())
      return absl::DataLossError(absl::StrCat(path, ": field \"", field, "\" is ", v.dump(), ", not an integer"));
    if (v.is_number_unsigned() ? v.get<uint64_t>() > static_cast<uint64_t>(kMaxCount)
                               : (v.get<int64_t>() < 0 || v.get<int64_t>() > kMaxCount))
      return absl::DataLossError(
          absl::StrCat(path, ": field \"", field, "\" is ", v.dump(), ", outside [0, 2^53]"));
  }
  return j;
}

absl::Status ConsolidateCheckpoint(const std::string& dir, const std::string& out) {
  if (dir.empty() || out.empty()) return absl::InvalidArgumentError("consolidate: --checkpoint and --out are required");
  if (std::filesystem::exists(out + "/" + kModelFile))
    return absl::AlreadyExistsError(absl::StrCat(out, ": already holds a ", kModelFile, "; choose an empty --out"));
  if (absl::Status st = VerifyCheckpointFiles(dir); !st.ok()) return st;
  bool legacy = false;
  absl::StatusOr<nlohmann::json> m = ReadManifest(dir, &legacy);
  if (!m.ok()) return m.status();
  if (!legacy && (!(*m).contains("layout") || (*m)["layout"].value("kind", std::string()) != "full"))
    return absl::UnimplementedError(absl::StrCat(dir, "/", kManifestFile, ": layout ", (*m).value("layout", nlohmann::json()).dump(),
                                                 " is not one this build can consolidate (\"full\")"));
  absl::StatusOr<TrainConfig> config = LoadCheckpointConfig(dir);
  if (!config.ok()) return config.status();
  absl::StatusOr<nlohmann::json> state = LoadTrainerState(dir);
  if (!state.ok()) return state.status();
  std::error_code ec;
  std::filesystem::create_directories(out, ec);
  if (ec) return absl::UnavailableError(absl::StrCat("consolidate: cannot create ", out, ": ", ec.message()));
  // The weights, the HF config and what eval/generate/probe read (the run's
  // config and trainer state); no optimizer moments.
  const std::vector<std::string> files = {kModelFile, kHfConfigFile, kTrainConfigFile, kTrainerStateFile};
  for (const std::string& f : files) {
    absl::StatusOr<std::string> bytes = ReadFileToString(dir + "/" + f);
    if (!bytes.ok()) return bytes.status();
    if (absl::Status st = WriteFileAtomic(out + "/" + f, *bytes); !st.ok()) return st;
  }
  std::vector<int64_t> buffer_sizes;
  if (!legacy) buffer_sizes = (*m)["layout"]["buffer_sizes"].get<std::vector<int64_t>>();
  nlohmann::json one = *state;
  one["world_size"] = 1;
  return WriteManifest(out, (*state)["step"].get<int64_t>(), *config, buffer_sizes, one, files);
}

absl::StatusOr<TrainConfig> LoadCheckpointConfig(const std::string& dir) {
  return LoadTrainConfig(dir + "/" + kTrainConfigFile, {});
}

}  // namespace longctx
