// Why: which checkpoint a restarted job continues from is a decision every
// rank must take alike, and it must never silently start over on top of a
// run: the newest complete checkpoint whose files match its manifest wins; an
// unfinished save is ignored with a warning; a corrupt one is skipped with a
// warning naming it and the one used instead; when every one is corrupt the
// job stops rather than train from step 0 into the same out_dir.
#ifndef LONGCTX_TRAIN_CHECKPOINT_RESUME_POINT_H_
#define LONGCTX_TRAIN_CHECKPOINT_RESUME_POINT_H_

#include <string>

#include "absl/status/statusor.h"
#include "launch/communicator.h"
#include "model/param_layout.h"
#include "train/train.pb.h"

namespace longctx {

// The checkpoint directory in OUT_DIR to resume from, "" to start fresh
// (collective). Each rank verifies the files it will read (its own shard
// when the world size is unchanged; checkpoint_reader.h) and all ranks agree,
// so they fall back together. DataLoss when every complete checkpoint is corrupt.
absl::StatusOr<std::string> NewestUsableCheckpoint(const std::string& out_dir, const ParamLayout& layout,
                                                   ParallelMode mode, Communicator& comm);

}  // namespace longctx

#endif  // LONGCTX_TRAIN_CHECKPOINT_RESUME_POINT_H_
