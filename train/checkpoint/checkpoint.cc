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

absl::Status VerifyCheckpointFile(const std::string& dir, const std::string& file) {
  bool legacy = false;
  absl::StatusOr<nlohmann::json> m = ReadManifest(dir, &legacy);
  if (!m.ok()) return m.status();
  if (legacy) {
    LOG(WARNING) << dir << ": no " << kManifestFile << " (written before checksums); " << file << " is not verified";
    return absl::OkStatus();
  }
  return VerifyAgainstManifest(dir, *m, file);
}

absl::Status VerifyCheckpointStructure(const std::string& dir) {
  namespace fs = std::filesystem;
  const std::string where = absl::StrCat(dir, "/", kManifestFile);
  if (StepOfCheckpointDir(dir) >= 0 && !fs::is_regular_file(dir + "/" + kCheckpointCompleteMarker))
    return absl::DataLossError(absl::StrCat(dir, "/", kCheckpointCompleteMarker,
                                            ": missing: the save of this step did not finish (or the marker was "
                                            "removed), so it is not a complete checkpoint"));
  bool legacy = false;
  absl::StatusOr<nlohmann::json> read = ReadManifest(dir, &legacy);
  if (!read.ok()) return read.status();
  if (legacy)
    return absl::DataLossError(absl::StrCat(where, ": missing: without it the layout (full or sharded) and the "
                                            "files' sizes and checksums are unknown, so it can be neither verified "
                                            "nor resumed from"));
  const nlohmann::json& m = *read;
  const nlohmann::json& files = m["files"];
  auto listed = [&](const std::string& f) -> absl::Status {
    if (!files.contains(f))
      return absl::DataLossError(absl::StrCat(dir, "/", f, ": not listed in ", where, "'s \"files\""));
    if (!fs::is_regular_file(dir + "/" + f))
      return absl::DataLossError(absl::StrCat(dir, "/", f, ": missing (", where, " lists it)"));
    return absl::OkStatus();
  };
  if (!m.contains("world_size") || !m["world_size"].is_number_integer() || m["world_size"].get<int64_t>() < 1)
    return absl::DataLossError(absl::StrCat(where, ": \"world_size\" is ",
                                            m.value("world_size", nlohmann::json()).dump(), ", not a positive integer"));
  const int64_t world = m["world_size"].get<int64_t>();
  if (!m.contains("layout") || !m["layout"].is_object())
    return absl::DataLossError(absl::StrCat(where, ": no \"layout\" object"));
  const nlohmann::json& lay = m["layout"];
  const std::string kind = lay.value("kind", std::string());
  if (kind != "full" && kind != "sharded")
    return absl::UnimplementedError(absl::StrCat(where, ": layout kind ", lay.value("kind", nlohmann::json()).dump(),
                                                 " is not one this build reads (\"full\" or \"sharded\")"));
  std::vector<int64_t> sizes;
  if (!lay.contains("buffer_sizes") || !lay["buffer_sizes"].is_array())
    return absl::DataLossError(absl::StrCat(where, ": layout without a \"buffer_sizes\" array"));
  for (const nlohmann::json& b : lay["buffer_sizes"]) {
    if (!b.is_number_integer() || b.get<int64_t>() < 0)
      return absl::DataLossError(absl::StrCat(where, ": buffer size ", b.dump(), " is not a non-negative integer"));
    sizes.push_back(b.get<int64_t>());
  }
  // A training checkpoint (step-NNNNNNNN) holds what resume reads besides the
  // values, and its trainer state's world size is the manifest's.
  if (StepOfCheckpointDir(dir) >= 0) {
    for (const char* f : {kHfConfigFile, kTrainConfigFile, kTrainerStateFile})
      if (absl::Status st = listed(f); !st.ok()) return st;
    absl::StatusOr<nlohmann::json> state = LoadTrainerState(dir);
    if (!state.ok()) return state.status();
    if (state->contains("world_size") && (*state)["world_size"] != world)
      return absl::DataLossError(absl::StrCat(where, ": world_size ", world, ", but ", dir, "/", kTrainerStateFile,
                                              " says the run that saved it had ", (*state)["world_size"].dump(),
                                              " ranks"));
  }
  if (kind == "full") return listed(kModelFile);

  // Sharded: rank r's entry names rank r's file, the ranges tile every
  // buffer, and each file holds exactly the tensors of its ranges.
  if (!lay.contains("world_size") || !lay["world_size"].is_number_integer() || lay["world_size"].get<int64_t>() < 1 ||
      lay["world_size"].get<int64_t>() > (1 << 20))
    return absl::DataLossError(absl::StrCat(where, ": sharded layout without a valid \"world_size\""));
  const int64_t layout_world = lay["world_size"].get<int64_t>();
  if (world != layout_world)
    return absl::DataLossError(absl::StrCat(where, ": world_size ", world, ", but its sharded layout is of ",
                                            layout_world, " ranks"));
  if (!lay.contains("shards") || !lay["shards"].is_array() || static_cast<int64_t>(lay["shards"].size()) != world)
    return absl::DataLossError(absl::StrCat(where, ": a sharded layout of ", world, " ranks needs ", world,
                                            " \"shards\" entries, it has ",
                                            lay.contains("shards") && lay["shards"].is_array()
                                                ? std::to_string(lay["shards"].size())
                                                : std::string("none")));
  std::vector<std::string> parts = {CheckpointPartName(CheckpointPart::kParams)};
  if (lay.contains("parts") && lay["parts"].is_array())
    for (CheckpointPart p : {CheckpointPart::kExpAvg, CheckpointPart::kExpAvgSq})
      if (std::find(lay["parts"].begin(), lay["parts"].end(), CheckpointPartName(p)) != lay["parts"].end())
        parts.push_back(CheckpointPartName(p));
  struct Range {
    int64_t begin, end;
  };
  std::vector<std::vector<Range>> tiles(sizes.size());
  std::vector<std::vector<std::array<int64_t, 3>>> ranges_of(static_cast<size_t>(world));
  for (int64_t r = 0; r < world; ++r) {
    const nlohmann::json& s = lay["shards"][r];
    const std::string want = ShardFileName(static_cast<int>(r), static_cast<int>(world));
    if (!s.is_object() || !s.contains("file") || !s["file"].is_string() || !s.contains("ranges") ||
        !s["ranges"].is_array())
      return absl::DataLossError(absl::StrCat(where, ": shard ", r, " has no \"file\" and \"ranges\": ", s.dump()));
    const std::string file = s["file"].get<std::string>();
    if (!s.contains("rank") || s["rank"] != r)
      return absl::DataLossError(absl::StrCat(where, ": shard ", r, " (", file, ") says rank ",
                                              s.value("rank", nlohmann::json()).dump(), "; the shards are in rank order"));
    if (file != want)
      return absl::DataLossError(absl::StrCat(where, ": shard ", r, " (rank ", r, ") names ", file, "; rank ", r,
                                              "'s file is ", want));
    if (absl::Status st = listed(file); !st.ok()) return st;
    for (const nlohmann::json& rg : s["ranges"]) {
      if (!rg.is_array() || rg.size() != 3 || !rg[0].is_number_integer() || !rg[1].is_number_integer() ||
          !rg[2].is_number_integer())
        return absl::DataLossError(absl::StrCat(where, ": range ", rg.dump(), " of ", file, " is not [buffer, begin, end]"));
      const int64_t b = rg[0].get<int64_t>(), lo = rg[1].get<int64_t>(), hi = rg[2].get<int64_t>();
      if (b < 0 || b >= static_cast<int64_t>(sizes.size()) || lo < 0 || hi <= lo || hi > sizes[b])
        return absl::DataLossError(absl::StrCat(where, ": range ", rg.dump(), " of ", file,
                                                " is outside the layout's buffers (buffer_sizes)"));
      tiles[b].push_back({lo, hi});
      ranges_of[r].push_back({b, lo, hi});
    }
  }
  for (size_t b = 0; b < sizes.size(); ++b) {
    std::vector<Range>& t = tiles[b];
    std::sort(t.begin(), t.end(), [](const Range& x, const Range& y) { return x.begin < y.begin; });
    int64_t at = 0;
    for (const Range& q : t) {
      if (q.begin != at)
        return absl::DataLossError(absl::StrCat(where, ": the shards' ranges of buffer ", b,
                                                q.begin > at ? " leave a gap at element " : " overlap at element ",
                                                std::min(at, q.begin)));
      at = q.end;
    }
    if (at != sizes[b])
      return absl::DataLossError(absl::StrCat(where, ": the shards' ranges of buffer ", b, " end at element ", at,
                                              ", not at its size ", sizes[b]));
  }
  // A header that does not match the manifest is most often a damaged file:
  // then its checksum says so, which is the clearer message (hashing only on
  // this failure path keeps the check to the headers otherwise).
  auto header_problem = [&](const std::string& file, const std::string& what) -> absl::Status {
    if (absl::Status st = VerifyAgainstManifest(dir, m, file); !st.ok()) return st;
    return absl::DataLossError(what);
  };
  for (int64_t r = 0; r < world; ++r) {
    const std::string file = ShardFileName(static_cast<int>(r), static_cast<int>(world));
    absl::StatusOr<SafetensorsReader> f = SafetensorsReader::Open(dir + "/" + file);
    if (!f.ok()) return header_problem(file, std::string(f.status().message()));
    size_t expected = 0;
    for (const auto& [b, lo, hi] : ranges_of[r]) {
      for (CheckpointPart p : {CheckpointPart::kParams, CheckpointPart::kExpAvg, CheckpointPart::kExpAvgSq}) {
        if (std::find(parts.begin(), parts.end(), CheckpointPartName(p)) == parts.end()) continue;
        const std::string name = ShardTensorName(p, static_cast<int>(b), lo, hi);
        ++expected;
        absl::StatusOr<SafetensorsTensorInfo> info = f->Info(name);
        if (!info.ok() || info->numel() != hi - lo)
          return header_problem(file, absl::StrCat(
              dir, "/", file, ": ",
              info.ok() ? absl::StrCat("tensor '", name, "' holds ", info->numel(), " elements")
                        : absl::StrCat("no tensor '", name, "'"),
              ", but ", where, " gives rank ", r, " elements [", lo, ", ", hi, ") of buffer ", b));
      }
    }
    if (f->names().size() != expected)
      return header_problem(file, absl::StrCat(dir, "/", file, ": holds ", f->names().size(), " tensors, but ", where,
                                               "'s ranges for rank ", r, " account for ", expected));
  }
  return absl::OkStatus();
}

absl::Status VerifyCheckpointFiles(const std::string& dir) {
  if (absl::Status st = VerifyCheckpointStructure(dir); !st.ok()) return st;
  bool legacy = false;
  absl::StatusOr<nlohmann::json> m = ReadManifest(dir, &legacy);
  if (!m.ok()) return m.status();
  for (auto it = (*m)["files"].begin(); it != (*m)["files"].end(); ++it)
    if (absl::Status st = VerifyAgainstManifest(dir, *m, it.key()); !st.ok()) return st;
  return absl::OkStatus();
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

absl::StatusOr<TrainConfig> LoadCheckpointConfig(const std::string& dir) {
  return LoadSavedTrainConfig(dir + "/" + kTrainConfigFile);
}

}  // namespace longctx
