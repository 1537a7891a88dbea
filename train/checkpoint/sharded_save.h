// Why: under ZeRO-1 and FSDP each rank holds its own range of every flat
// buffer's AdamW moments (FSDP: of the parameters too). Gathering them to one
// rank for a single-file save costs a full model (and two full moments) of
// memory on that rank and serialises the write; instead every rank writes its
// shard — parameters, exp_avg and exp_avg_sq of its range of each buffer —
// into the one temporary step directory at the same time and fsyncs it, and
// rank 0 writes the manifest from every rank's file size and XXH64 (gathered
// over the communicator) and the layout (which rank holds which range of which
// buffer), then COMPLETE, the rename and `latest` (checkpoint_dir.h). No rank
// ever holds more than its own shard. A failure on any rank (full disk, I/O
// error, a non-finite value) fails the save on every rank with that rank's
// message, and the temporary directory is removed; the previous checkpoint
// stays. The directory must be visible to every rank (one filesystem, shared
// between hosts for a multi-node job).
#ifndef LONGCTX_TRAIN_CHECKPOINT_SHARDED_SAVE_H_
#define LONGCTX_TRAIN_CHECKPOINT_SHARDED_SAVE_H_

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "launch/communicator.h"
#include "model/transformer.h"
#include "train/checkpoint/checkpoint_reader.h"
#include "train/train.pb.h"

namespace longctx {

// Collective (every rank of comm). `shards`: this rank's pieces (their
// parameter and moment views; null moment views make a weights-only
// checkpoint, on every rank alike). `model` gives the config.json (rank 0);
// its parameter buffers are not read. Returns <out_dir>/step-NNNNNNNN on every
// rank, or the same error on every rank.
absl::StatusOr<std::string> SaveShardedCheckpoint(Communicator& comm, const std::string& out_dir, int64_t step,
                                                  const TrainConfig& config, const Transformer& model,
                                                  const std::vector<CheckpointShard>& shards,
                                                  const nlohmann::json& trainer_state, int keep, int bos_id,
                                                  int eos_id);

}  // namespace longctx

#endif  // LONGCTX_TRAIN_CHECKPOINT_SHARDED_SAVE_H_
