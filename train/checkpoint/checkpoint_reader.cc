// Why: see checkpoint_reader.h.
#include "train/checkpoint/checkpoint_reader.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "train/checkpoint/manifest.h"

namespace longctx {
namespace {

constexpr char kModelFileName[] = "model.safetensors";
constexpr char kOptimizerFileName[] = "optimizer.safetensors";

const char* FullSuffix(CheckpointPart p) {
  switch (p) {
    case CheckpointPart::kExpAvg: return ".exp_avg";
    case CheckpointPart::kExpAvgSq: return ".exp_avg_sq";
    default: return "";
  }
}

bool IsInt(const nlohmann::json& j) { return j.is_number_integer(); }

}  // namespace

const char* CheckpointPartName(CheckpointPart p) {
  switch (p) {
    case CheckpointPart::kExpAvg: return "exp_avg";
    case CheckpointPart::kExpAvgSq: return "exp_avg_sq";
    default: return "params";
  }
}

std::string ShardTensorName(CheckpointPart part, int buffer, int64_t begin, int64_t end) {
  return absl::StrCat("buffer.", buffer, ".", CheckpointPartName(part), "[", begin, ":", end, "]");
}

std::string ShardFileName(int rank, int world) {
  return absl::StrFormat("shard-%05d-of-%05d.safetensors", rank + 1, world);
}

std::vector<CheckpointShard> WholeBuffers(const ParamLayout& layout) {
  std::vector<CheckpointShard> out;
  for (int b = 0; b < layout.num_buffers(); ++b) out.push_back({b, 0, layout.buffer_size(b), {}, {}, {}});
  return out;
}

std::vector<CheckpointShard> RankRanges(const ParamLayout& layout, int rank, int world) {
  std::vector<CheckpointShard> out;
  for (int b = 0; b < layout.num_buffers(); ++b) {
    const ElementRange r = ShardOf(layout.buffer_size(b), rank, world);
    out.push_back({b, r.begin, r.end, {}, {}, {}});
  }
  return out;
}

absl::StatusOr<CheckpointReader> CheckpointReader::Open(const std::string& dir, const ParamLayout& layout) {
  CheckpointReader r;
  r.dir_ = dir;
  r.layout_ = &layout;
  absl::StatusOr<nlohmann::json> m = ReadManifest(dir, &r.legacy_);
  if (!m.ok()) return m.status();
  r.manifest_ = *m;
  if (r.legacy_) return r;
  const std::string where = absl::StrCat(dir, "/manifest.json");
  if (!r.manifest_.contains("layout") || !r.manifest_["layout"].is_object())
    return absl::DataLossError(absl::StrCat(where, ": no \"layout\" object"));
  const nlohmann::json& lay = r.manifest_["layout"];
  const std::string kind = lay.value("kind", std::string());
  if (kind != "full" && kind != "sharded")
    return absl::UnimplementedError(
        absl::StrCat(where, ": layout kind ", lay.value("kind", nlohmann::json()).dump(),
                     " is not one this build reads (\"full\" or \"sharded\")"));
  r.sharded_ = kind == "sharded";
  if (lay.contains("buffer_sizes")) {
    const nlohmann::json& bs = lay["buffer_sizes"];
    bool same = bs.is_array() && static_cast<int>(bs.size()) == layout.num_buffers();
    for (int b = 0; same && b < layout.num_buffers(); ++b)
      same = IsInt(bs[b]) && bs[b].get<int64_t>() == layout.buffer_size(b);
    if (!same)
      return absl::FailedPreconditionError(absl::StrCat(
          where, ": buffer sizes ", bs.dump(), " are not this model's (", layout.num_buffers(),
          " buffers); the checkpoint was written for a different model"));
  } else if (r.sharded_) {
    return absl::DataLossError(absl::StrCat(where, ": sharded layout without \"buffer_sizes\""));
  }
  if (!r.sharded_) return r;

  // Sharded: every buffer tiled exactly by the shards' ranges.
  if (!lay.contains("world_size") || !IsInt(lay["world_size"]) || lay["world_size"].get<int64_t>() < 1 ||
      lay["world_size"].get<int64_t>() > (1 << 20))
    return absl::DataLossError(absl::StrCat(where, ": sharded layout without a valid \"world_size\""));
  r.saved_world_ = static_cast<int>(lay["world_size"].get<int64_t>());
  if (lay.contains("parts")) {
    const nlohmann::json& parts = lay["parts"];
    r.has_moments_ = parts.is_array() && std::find(parts.begin(), parts.end(), "exp_avg") != parts.end() &&
                     std::find(parts.begin(), parts.end(), "exp_avg_sq") != parts.end();
  }
  if (!lay.contains("shards") || !lay["shards"].is_array() ||
      static_cast<int>(lay["shards"].size()) != r.saved_world_)
    return absl::DataLossError(absl::StrCat(where, ": sharded layout needs one \"shards\" entry per rank (",
                                            r.saved_world_, ")"));
  r.pieces_.assign(layout.num_buffers(), {});
  for (const nlohmann::json& s : lay["shards"]) {
    if (!s.is_object() || !s.contains("file") || !s["file"].is_string() || !s.contains("ranges") ||
        !s["ranges"].is_array())
      return absl::DataLossError(absl::StrCat(where, ": a shard entry without \"file\" and \"ranges\": ", s.dump()));
    const std::string file = s["file"].get<std::string>();
    if (file.find('/') != std::string::npos || file.empty() || file[0] == '.')
      return absl::DataLossError(absl::StrCat(where, ": shard file name \"", file, "\" is not a plain file name"));
    const int index = static_cast<int>(r.shard_files_.size());
    r.shard_files_.push_back(file);
    for (const nlohmann::json& rg : s["ranges"]) {
      if (!rg.is_array() || rg.size() != 3 || !IsInt(rg[0]) || !IsInt(rg[1]) || !IsInt(rg[2]))
        return absl::DataLossError(absl::StrCat(where, ": range ", rg.dump(), " of ", file,
                                                " is not [buffer, begin, end]"));
      const int64_t b = rg[0].get<int64_t>(), lo = rg[1].get<int64_t>(), hi = rg[2].get<int64_t>();
      if (b < 0 || b >= layout.num_buffers() || lo < 0 || hi <= lo || hi > layout.buffer_size(b))
        return absl::DataLossError(absl::StrCat(where, ": range ", rg.dump(), " of ", file,
                                                " is outside the model's buffers"));
      r.pieces_[b].push_back({index, lo, hi});
    }
  }
  for (int b = 0; b < layout.num_buffers(); ++b) {
    std::vector<Piece>& p = r.pieces_[b];
    std::sort(p.begin(), p.end(), [](const Piece& x, const Piece& y) { return x.begin < y.begin; });
    int64_t at = 0;
    for (const Piece& q : p) {
      if (q.begin != at)
        return absl::DataLossError(absl::StrCat(where, ": the shards' ranges of buffer ", b,
                                                q.begin > at ? " leave a gap at element " : " overlap at element ",
                                                std::min(at, q.begin)));
      at = q.end;
    }
    if (at != layout.buffer_size(b))
      return absl::DataLossError(absl::StrCat(where, ": the shards' ranges of buffer ", b, " end at element ", at,
                                              ", not at its size ", layout.buffer_size(b)));
  }
  return r;
}

std::vector<std::string> CheckpointReader::FilesFor(CheckpointPart part, int b, int64_t begin, int64_t end) const {
  std::vector<std::string> out;
  if (begin >= end) return out;
  if (!sharded_) {
    out.push_back(part == CheckpointPart::kParams ? kModelFileName : kOptimizerFileName);
    return out;
  }
  for (const Piece& q : pieces_[b])
    if (q.begin < end && begin < q.end) out.push_back(shard_files_[q.shard]);
  return out;
}

std::vector<std::string> CheckpointReader::FilesFor(const std::vector<CheckpointShard>& shards, bool params,
                                                    bool moments) const {
  std::set<std::string> files;
  for (const CheckpointShard& s : shards) {
    if (params)
      for (const std::string& f : FilesFor(CheckpointPart::kParams, s.buffer, s.begin, s.end)) files.insert(f);
    if (moments)
      for (const std::string& f : FilesFor(CheckpointPart::kExpAvg, s.buffer, s.begin, s.end)) files.insert(f);
  }
  return std::vector<std::string>(files.begin(), files.end());
}

absl::Status CheckpointReader::Verify(const std::vector<std::string>& files) {
  if (legacy_) return absl::OkStatus();
  for (const std::string& f : files) {
    if (verified_.count(f)) continue;
    if (absl::Status st = VerifyAgainstManifest(dir_, manifest_, f); !st.ok()) return st;
    verified_.insert(f);
  }
  return absl::OkStatus();
}

absl::StatusOr<const SafetensorsReader*> CheckpointReader::File(const std::string& name) {
  auto it = open_.find(name);
  if (it != open_.end()) return it->second.get();
  absl::StatusOr<SafetensorsReader> r = SafetensorsReader::Open(dir_ + "/" + name);
  if (!r.ok()) return r.status();
  auto p = std::make_unique<SafetensorsReader>(std::move(*r));
  const SafetensorsReader* raw = p.get();
  open_.emplace(name, std::move(p));
  return raw;
}

absl::Status CheckpointReader::ReadRange(CheckpointPart part, int b, int64_t begin, int64_t end, float* dst) {
  if (b < 0 || b >= layout_->num_buffers() || begin < 0 || end > layout_->buffer_size(b) || begin > end)
    return absl::InvalidArgumentError(absl::StrCat(dir_, ": elements [", begin, ", ", end, ") of buffer ", b,
                                                   " are outside the model"));
  if (begin == end) return absl::OkStatus();
  if (part != CheckpointPart::kParams && sharded_ && !has_moments_)
    return absl::NotFoundError(absl::StrCat(dir_, ": a weights-only checkpoint (no AdamW moments)"));
  if (!sharded_) {
    const std::string file = part == CheckpointPart::kParams ? kModelFileName : kOptimizerFileName;
    absl::StatusOr<const SafetensorsReader*> r = File(file);
    if (!r.ok()) return r.status();
    std::fill(dst, dst + (end - begin), 0.0f);  // a layout's slices tile its buffers; this is only hygiene
    for (const ParamSlice& s : layout_->slices()) {
      if (s.buffer != b) continue;
      const int64_t lo = std::max(begin, s.offset), hi = std::min(end, s.offset + s.numel());
      if (lo >= hi) continue;
      const std::string name = s.name + FullSuffix(part);
      absl::StatusOr<SafetensorsTensorInfo> info = (*r)->Info(name);
      if (!info.ok()) return info.status();
      if (info->shape != s.shape)
        return absl::InvalidArgumentError(absl::StrCat(dir_, "/", file, ": tensor '", name,
                                                       "' has another shape than the model's"));
      if (absl::Status st = (*r)->ReadElements(name, lo - s.offset, hi - lo, dst + (lo - begin)); !st.ok())
        return st;
    }
    return absl::OkStatus();
  }
  for (const Piece& q : pieces_[b]) {
    const int64_t lo = std::max(begin, q.begin), hi = std::min(end, q.end);
    if (lo >= hi) continue;
    const std::string& file = shard_files_[q.shard];
    absl::StatusOr<const SafetensorsReader*> r = File(file);
    if (!r.ok()) return r.status();
    const std::string name = ShardTensorName(part, b, q.begin, q.end);
    absl::StatusOr<SafetensorsTensorInfo> info = (*r)->Info(name);
    if (!info.ok()) return info.status();
    if (info->numel() != q.end - q.begin)
      return absl::DataLossError(absl::StrCat(dir_, "/", file, ": tensor '", name, "' holds ", info->numel(),
                                              " elements, its range ", q.end - q.begin));
    if (absl::Status st = (*r)->ReadElements(name, lo - q.begin, hi - lo, dst + (lo - begin)); !st.ok()) return st;
  }
  return absl::OkStatus();
}

absl::Status CheckpointReader::Load(const std::vector<CheckpointShard>& shards, bool params, bool moments,
                                    Backend& backend) {
  std::vector<float> staging;
  for (const CheckpointShard& s : shards) {
    const int64_t n = s.end - s.begin;
    if (n <= 0) continue;
    struct Want {
      CheckpointPart part;
      const Tensor* dst;
    };
    std::vector<Want> wants;
    if (params) wants.push_back({CheckpointPart::kParams, &s.params});
    if (moments) {
      wants.push_back({CheckpointPart::kExpAvg, &s.exp_avg});
      wants.push_back({CheckpointPart::kExpAvgSq, &s.exp_avg_sq});
    }
    for (const Want& w : wants) {
      const Tensor& t = *w.dst;
      if (t.data == nullptr || t.numel() != n || t.dtype != DType::kF32)
        return absl::InternalError(absl::StrCat("checkpoint load: the ", CheckpointPartName(w.part), " view of buffer ",
                                                s.buffer, " is not ", n, " f32 elements"));
      if (t.device == Device::kCpu) {
        if (absl::Status st = ReadRange(w.part, s.buffer, s.begin, s.end, static_cast<float*>(t.data)); !st.ok())
          return st;
      } else {
        staging.resize(static_cast<size_t>(n));
        if (absl::Status st = ReadRange(w.part, s.buffer, s.begin, s.end, staging.data()); !st.ok()) return st;
        backend.CopyFromHost(t, staging.data());
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace longctx
