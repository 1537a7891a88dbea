// Why: a checkpoint directory is trusted only as far as its manifest.json
// (world size, mode, layout, and the size and XXH64 of every file) vouches for
// it: a flipped byte in a weight file otherwise loads silently. The full-copy
// save (checkpoint.cc), the sharded save (sharded_save.cc), the range reader
// (checkpoint_reader.cc) and consolidate all read and write it, so its
// format lives here once.
//
// Format "longctx-checkpoint-1":
//   {"format", "step", "world_size", "mode": "DDP"|"ZERO1"|"FSDP", "checksum": "xxh64",
//    "layout": {"kind": "full", "buffer_sizes": [...]}                  one copy of every buffer
//            | {"kind": "sharded", "world_size": N, "buffer_sizes": [...],
//               "parts": ["params", "exp_avg", "exp_avg_sq"],
//               "shards": [{"file": "shard-00001-of-0000N.safetensors", "rank": 0,
//                           "ranges": [[buffer, begin, end], ...]}, ...]},
//    "files": {"NAME": {"size": BYTES, "xxh64": "16 hex digits"}, ...}}
#ifndef LONGCTX_TRAIN_CHECKPOINT_MANIFEST_H_
#define LONGCTX_TRAIN_CHECKPOINT_MANIFEST_H_

#include <cstdint>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "train/train.pb.h"

namespace longctx {

struct FileDigest {
  int64_t size = 0;
  uint64_t xxh64 = 0;
};

// Size and XXH64 of a file, read back from disk. DataLoss naming the path.
absl::StatusOr<FileDigest> HashFile(const std::string& path);
// 16 lower-case hex digits.
std::string Hex64(uint64_t v);
// "DDP", "ZERO1", "FSDP".
const char* ParallelModeName(ParallelMode m);

// DIR/manifest.json; *legacy = true (and an empty json) when there is none (a
// checkpoint written before manifests). DataLoss when it is not a manifest.
absl::StatusOr<nlohmann::json> ReadManifest(const std::string& dir, bool* legacy);
// Checks DIR/file against the manifest's size and XXH64. DataLoss naming the
// file (and saying so when a sharded checkpoint has no such file).
absl::Status VerifyAgainstManifest(const std::string& dir, const nlohmann::json& manifest, const std::string& file);
// Writes DIR/manifest.json atomically; `digests` lists every file of the
// checkpoint (the caller hashed them, possibly on other ranks).
absl::Status WriteManifest(const std::string& dir, int64_t step, int64_t world_size, ParallelMode mode,
                           const nlohmann::json& layout, const std::map<std::string, FileDigest>& digests);

}  // namespace longctx

#endif  // LONGCTX_TRAIN_CHECKPOINT_MANIFEST_H_
