// Why: when ranks write a checkpoint in parallel, one rank's failure (a full
// disk, an I/O error, a non-finite shard, a corrupt file it read) must become
// every rank's failure with that rank's message: a rank that goes on alone
// would wait in the next collective forever, and an error that names only
// "a peer failed" cannot be acted on. One collective pair does it.
#ifndef LONGCTX_TRAIN_CHECKPOINT_RANK_AGREEMENT_H_
#define LONGCTX_TRAIN_CHECKPOINT_RANK_AGREEMENT_H_

#include "absl/status/status.h"
#include "launch/communicator.h"

namespace longctx {

// Collective. OK on every rank when `local` is OK on every rank; otherwise
// every rank returns the status of the lowest failing rank (its code, its
// message prefixed "rank R/N: " when the world has more than one rank;
// messages are cut at 4 KiB). An error of the collective itself is returned
// as is.
absl::Status AgreeOnStatus(Communicator& comm, const absl::Status& local);

}  // namespace longctx

#endif  // LONGCTX_TRAIN_CHECKPOINT_RANK_AGREEMENT_H_
