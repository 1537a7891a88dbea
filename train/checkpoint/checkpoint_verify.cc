// Why: verifying a checkpoint directory — its marker, manifest, layout,
// shard names and file checksums — is what `checkpoint verify`, resume and
// every loader do before trusting bytes, and it needs no model or backend. It
// lives apart from checkpoint.cc (which loads into a Transformer) so that the
// checkpoint-manifest fuzz target (tests/fuzz/checkpoint_fuzz.cc) can run it
// on any bytes without linking the trainer; reading a step's trainer state and
// saved config lives here for the same reason (the Hugging Face import fuzz
// target reads them). Declared in checkpoint.h.
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/log.h"
#include "data/token_file.h"
#include "train/checkpoint/checkpoint.h"
#include "train/checkpoint/checkpoint_dir.h"
#include "train/checkpoint/checkpoint_reader.h"
#include "train/checkpoint/manifest.h"
#include "train/checkpoint/safetensors.h"
#include "train/config_loader.h"

namespace longctx {

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

absl::StatusOr<TrainConfig> LoadCheckpointConfig(const std::string& dir) {
  return LoadSavedTrainConfig(dir + "/" + kTrainConfigFile);
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

}  // namespace longctx
