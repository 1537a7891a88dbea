// Why: a checkpoint's values are either one full copy (layout "full":
// model.safetensors with Hugging Face names, optimizer.safetensors with
// ".exp_avg"/".exp_avg_sq" suffixes — DDP, consolidated and older
// checkpoints) or one file per rank of the world that saved it (layout
// "sharded": shard-0000k-of-0000N.safetensors with that rank's element range
// of every flat buffer; manifest.h). A rank of a new world (any size, any
// mode) wants elements [begin, end) of one buffer of one part whatever the
// layout: this reader maps the range onto the files that hold it and reads
// only the overlapping bytes (pread), so a sharded resume never holds more
// than its own shard. Verification hashes whole files, so each rank verifies
// the files it reads (CheckpointReader::Verify), once per file: with the same
// world size that is its own shard, in parallel with the other ranks; rank 0
// verifying everything would read the whole checkpoint on one rank.
#ifndef LONGCTX_TRAIN_CHECKPOINT_CHECKPOINT_READER_H_
#define LONGCTX_TRAIN_CHECKPOINT_CHECKPOINT_READER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/backend.h"
#include "model/param_layout.h"
#include "train/checkpoint/safetensors.h"
#include "train/train.pb.h"

namespace longctx {

enum class CheckpointPart { kParams, kExpAvg, kExpAvgSq };
// "params", "exp_avg", "exp_avg_sq".
const char* CheckpointPartName(CheckpointPart p);
// The tensor of a shard file holding elements [begin, end) of `part` of
// buffer b: "buffer.3.exp_avg[1000:2000]".
std::string ShardTensorName(CheckpointPart part, int buffer, int64_t begin, int64_t end);
// "shard-00002-of-00004.safetensors" for rank 1 of 4 (1-based, like HF shards).
std::string ShardFileName(int rank, int world);

// One rank's piece of one flat buffer: elements [begin, end) of buffer
// `buffer`, with 1-D views (end - begin elements, backend memory) of the
// parameters and the AdamW moments (exp_avg/exp_avg_sq may be null tensors in
// a weights-only use). What a sharded save writes and a sharded load fills.
struct CheckpointShard {
  int buffer = 0;
  int64_t begin = 0, end = 0;
  Tensor params, exp_avg, exp_avg_sq;
};

class CheckpointReader {
 public:
  // Reads DIR/manifest.json and checks its layout against the model's
  // (buffer count and sizes: FailedPrecondition "a different model"); a
  // sharded layout's ranges must tile every buffer exactly (DataLoss naming
  // the manifest otherwise). No manifest: layout "full", nothing verified.
  static absl::StatusOr<CheckpointReader> Open(const std::string& dir, const ParamLayout& layout);

  CheckpointReader(CheckpointReader&&) = default;
  CheckpointReader& operator=(CheckpointReader&&) = default;

  const std::string& dir() const { return dir_; }
  bool sharded() const { return sharded_; }
  // The world size that wrote the values (1 for a full copy).
  int saved_world() const { return saved_world_; }
  const nlohmann::json& manifest() const { return manifest_; }

  // Files (names inside dir) holding any element of [begin, end) of buffer b.
  std::vector<std::string> FilesFor(CheckpointPart part, int b, int64_t begin, int64_t end) const;
  // The files a rank needs to fill `shards` (params and/or moments).
  std::vector<std::string> FilesFor(const std::vector<CheckpointShard>& shards, bool params, bool moments) const;
  // Checks each file against the manifest (size and XXH64) unless already
  // verified by this reader; a checkpoint without a manifest passes.
  absl::Status Verify(const std::vector<std::string>& files);

  // Elements [begin, end) of buffer b of `part`, as f32, into dst (host).
  absl::Status ReadRange(CheckpointPart part, int b, int64_t begin, int64_t end, float* dst);
  // Fills the requested parts of every shard (through a host staging buffer
  // unless the backend is the CPU one). Does not verify: call Verify first.
  absl::Status Load(const std::vector<CheckpointShard>& shards, bool params, bool moments, Backend& backend);

 private:
  CheckpointReader() = default;
  absl::StatusOr<const SafetensorsReader*> File(const std::string& name);

  struct Piece {
    int shard = 0;  // index into shard_files_
    int64_t begin = 0, end = 0;
  };
  std::string dir_;
  nlohmann::json manifest_;
  bool legacy_ = false;
  bool sharded_ = false;
  bool has_moments_ = true;
  int saved_world_ = 1;
  const ParamLayout* layout_ = nullptr;
  std::vector<std::string> shard_files_;
  std::vector<std::vector<Piece>> pieces_;  // per buffer, ascending, tiling it
  std::map<std::string, std::unique_ptr<SafetensorsReader>> open_;
  std::set<std::string> verified_;
};

// Every buffer whole ([0, size), null views): the ranges of a full load, for FilesFor.
std::vector<CheckpointShard> WholeBuffers(const ParamLayout& layout);
// Rank `rank` of `world`'s ShardOf range of every buffer (null views; empty ranges too).
std::vector<CheckpointShard> RankRanges(const ParamLayout& layout, int rank, int world);

}  // namespace longctx

#endif  // LONGCTX_TRAIN_CHECKPOINT_CHECKPOINT_READER_H_
