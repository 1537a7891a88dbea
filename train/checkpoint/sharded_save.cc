// Why: see sharded_save.h. Order: rank 0 makes the temporary directory and
// tells every rank its name; every rank writes and fsyncs its shard file and
// hashes it back from disk (rank 0 also writes the small files); all agree;
// the sizes, hashes and ranges are summed into rank 0's tables (each rank
// fills its own slots); rank 0 writes the manifest and commits; all agree
// again. Test hook: LONGCTX_TEST_FAIL_SHARD_WRITE=RANK:STEP makes that rank's
// shard write fail at that step (tests/checkpoint/shard_write_failure.sh).
#include "train/checkpoint/sharded_save.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>

#include "absl/strings/str_cat.h"
#include "model/hf_config.h"
#include "train/checkpoint/checkpoint.h"
#include "train/checkpoint/checkpoint_dir.h"
#include "train/checkpoint/manifest.h"
#include "train/checkpoint/rank_agreement.h"
#include "train/checkpoint/safetensors.h"
#include "train/config_loader.h"

namespace longctx {
namespace {

bool InjectedFailure(int rank, int64_t step) {
  const char* v = std::getenv("LONGCTX_TEST_FAIL_SHARD_WRITE");
  if (v == nullptr) return false;
  int r = -1;
  long long s = -1;
  return std::sscanf(v, "%d:%lld", &r, &s) == 2 && r == rank && s == step;
}

// Writes this rank's shard file; returns its digest.
absl::StatusOr<FileDigest> WriteShard(Communicator& comm, Backend& be, const std::string& path, int64_t step,
                                      const std::vector<CheckpointShard>& shards, bool moments) {
  if (InjectedFailure(comm.rank(), step))
    return absl::UnavailableError(absl::StrCat("checkpoint: write to '", path,
                                               "': injected failure (LONGCTX_TEST_FAIL_SHARD_WRITE)"));
  std::vector<SafetensorsEntry> entries;
  std::vector<std::vector<float>> host;  // staging when the views are not host memory
  host.reserve(shards.size() * 3);
  for (const CheckpointShard& s : shards) {
    const int64_t n = s.end - s.begin;
    if (n <= 0) continue;
    std::vector<std::pair<CheckpointPart, const Tensor*>> parts = {{CheckpointPart::kParams, &s.params}};
    if (moments) {
      parts.push_back({CheckpointPart::kExpAvg, &s.exp_avg});
      parts.push_back({CheckpointPart::kExpAvgSq, &s.exp_avg_sq});
    }
    for (const auto& [part, t] : parts) {
      if (t->data == nullptr || t->numel() != n || t->dtype != DType::kF32)
        return absl::InternalError(absl::StrCat("checkpoint: the ", CheckpointPartName(part), " view of buffer ",
                                                s.buffer, " is not ", n, " f32 elements"));
      const float* f = static_cast<const float*>(t->data);
      if (t->device != Device::kCpu) {
        host.emplace_back(static_cast<size_t>(n));
        be.CopyToHost(host.back().data(), *t);
        f = host.back().data();
      }
      // A diverged run never saves values that decode to garbage.
      for (int64_t i = 0; i < n; ++i)
        if (!std::isfinite(f[i]))
          return absl::FailedPreconditionError(absl::StrCat(
              "checkpoint at step ", step, ": ", CheckpointPartName(part), " of buffer ", s.buffer, " has a non-finite value (",
              f[i], " at element ", s.begin + i, "); not saving it (the previous checkpoint, if any, is kept)"));
      SafetensorsEntry e;
      e.name = ShardTensorName(part, s.buffer, s.begin, s.end);
      e.dtype = DType::kF32;
      e.shape = {n};
      e.data = f;
      entries.push_back(std::move(e));
    }
  }
  const std::map<std::string, std::string> meta = {{"format", "pt"},
                                                   {"longctx_shard_rank", std::to_string(comm.rank())},
                                                   {"longctx_world_size", std::to_string(comm.world_size())},
                                                   {"longctx_step", std::to_string(step)}};
  if (absl::Status st = WriteSafetensors(path, entries, meta); !st.ok()) return st;
  return HashFile(path);
}

}  // namespace

absl::StatusOr<std::string> SaveShardedCheckpoint(Communicator& comm, const std::string& out_dir, int64_t step,
                                                  const TrainConfig& config, const Transformer& model,
                                                  const std::vector<CheckpointShard>& shards,
                                                  const nlohmann::json& trainer_state, int keep, int bos_id,
                                                  int eos_id) {
  const int rank = comm.rank(), world = comm.world_size();
  Transformer& m = const_cast<Transformer&>(model);
  const ParamLayout& layout = m.layout();
  const int nb = layout.num_buffers();
  bool moments = false;
  for (const CheckpointShard& s : shards) moments = moments || s.exp_avg.data != nullptr;
  // Every rank agrees on weights-only or not (a rank with only empty ranges has no views).
  {
    int64_t any = moments ? 1 : 0;
    if (absl::Status st = comm.AllReduceMax(&any, 1); !st.ok()) return st;
    moments = any != 0;
  }

  // 1. The temporary directory (rank 0), its name to every rank.
  std::optional<CheckpointDirWriter> writer;
  absl::Status st;
  // Agreement on a step's outcome. On a failure the temporary directory is
  // removed (rank 0) before any rank returns: a rank that returns ends the job
  // (AbortJob), which would otherwise kill rank 0 before its cleanup.
  auto agree = [&](const absl::Status& local) -> absl::Status {
    if (!local.ok()) writer.reset();
    absl::Status a = AgreeOnStatus(comm, local);
    if (!a.ok()) {
      writer.reset();
      if (world > 1) comm.Barrier().IgnoreError();
    }
    return a;
  };
  std::vector<char> tmp_name(4096, 0);
  if (rank == 0) {
    absl::StatusOr<CheckpointDirWriter> w = CheckpointDirWriter::Begin(out_dir, step);
    if (w.ok()) {
      writer.emplace(std::move(*w));
      if (writer->tmp_dir().size() >= tmp_name.size())
        st = absl::InvalidArgumentError(absl::StrCat("checkpoint: out_dir path too long: ", out_dir));
      else
        std::memcpy(tmp_name.data(), writer->tmp_dir().data(), writer->tmp_dir().size());
    } else {
      st = w.status();
    }
  }
  if (absl::Status a = agree(st); !a.ok()) return a;
  if (absl::Status b = comm.BroadcastBytes(tmp_name.data(), static_cast<int64_t>(tmp_name.size()), 0); !b.ok())
    return b;
  const std::string tmp_dir(tmp_name.data());

  // 2. Every rank its shard, in parallel; rank 0 the small files too.
  const std::string shard_file = ShardFileName(rank, world);
  absl::StatusOr<FileDigest> digest = WriteShard(comm, *m.backend(), tmp_dir + "/" + shard_file, step, shards, moments);
  st = digest.status();
  if (st.ok() && rank == 0) {
    nlohmann::json hf = HfConfigJson(m.dims(), config.model(), bos_id, eos_id);
    st = WriteFileAtomic(writer->path(kHfConfigFile), hf.dump(2) + "\n");
    if (st.ok()) st = WriteFileAtomic(writer->path(kTrainConfigFile), ToTextProto(config, /*include_defaults=*/true));
    if (st.ok()) st = WriteFileAtomic(writer->path(kTrainerStateFile), trainer_state.dump(2) + "\n");
  }
  if (absl::Status a = agree(st); !a.ok()) return a;

  // 3. Sizes, hashes and ranges into rank 0's tables.
  std::vector<int64_t> table(static_cast<size_t>(world) * (2 + 2 * nb), 0);
  int64_t* mine = table.data() + static_cast<size_t>(rank) * (2 + 2 * nb);
  mine[0] = digest->size;
  std::memcpy(&mine[1], &digest->xxh64, sizeof(uint64_t));
  for (const CheckpointShard& s : shards) {
    if (s.buffer < 0 || s.buffer >= nb) return absl::InternalError("checkpoint: shard of an unknown buffer");
    mine[2 + 2 * s.buffer] = s.begin;
    mine[3 + 2 * s.buffer] = s.end;
  }
  if (absl::Status a = comm.AllReduceSum(table.data(), static_cast<int64_t>(table.size())); !a.ok()) return a;

  // 4. Rank 0: manifest, COMPLETE, rename, latest, prune.
  const std::string final_dir = (std::filesystem::path(out_dir) / CheckpointDirName(step)).string();
  st = absl::OkStatus();
  if (rank == 0) {
    std::map<std::string, FileDigest> digests;
    nlohmann::json shard_list = nlohmann::json::array();
    for (int r = 0; r < world; ++r) {
      const int64_t* row = table.data() + static_cast<size_t>(r) * (2 + 2 * nb);
      FileDigest d;
      d.size = row[0];
      std::memcpy(&d.xxh64, &row[1], sizeof(uint64_t));
      digests[ShardFileName(r, world)] = d;
      nlohmann::json ranges = nlohmann::json::array();
      for (int b = 0; b < nb; ++b)
        if (row[3 + 2 * b] > row[2 + 2 * b]) ranges.push_back({b, row[2 + 2 * b], row[3 + 2 * b]});
      shard_list.push_back({{"file", ShardFileName(r, world)}, {"rank", r}, {"ranges", ranges}});
    }
    for (const char* f : {kHfConfigFile, kTrainConfigFile, kTrainerStateFile}) {
      absl::StatusOr<FileDigest> d = HashFile(writer->path(f));
      if (!d.ok()) {
        st = d.status();
        break;
      }
      digests[f] = *d;
    }
    std::vector<int64_t> sizes;
    for (int b = 0; b < nb; ++b) sizes.push_back(layout.buffer_size(b));
    nlohmann::json parts = moments ? nlohmann::json({"params", "exp_avg", "exp_avg_sq"}) : nlohmann::json({"params"});
    const nlohmann::json lay = {{"kind", "sharded"}, {"world_size", world}, {"buffer_sizes", sizes},
                                {"parts", parts},    {"shards", shard_list}};
    if (st.ok()) st = WriteManifest(writer->tmp_dir(), step, world, config.mode(), lay, digests);
    if (st.ok()) st = writer->Commit();
    if (st.ok()) st = WriteFileAtomic(out_dir + "/" + kLatestPointerFile, CheckpointDirName(step) + "\n");
    if (st.ok()) st = PruneCheckpoints(out_dir, keep);
  }
  if (absl::Status a = agree(st); !a.ok()) return a;
  return final_dir;
}

}  // namespace longctx
