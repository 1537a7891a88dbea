// Why: N ranks on one node share its cores. Left alone, every rank's OpenMP
// and OpenBLAS would start one thread per core, so 2 ranks on 2 cores would
// run 4 busy threads and thrash. The default is therefore cores / local ranks
// threads per rank; an explicit `threads` that oversubscribes the node is an
// error naming the numbers unless forced (then a warning).
#ifndef LONGCTX_TRAIN_PARALLEL_RANK_THREADS_H_
#define LONGCTX_TRAIN_PARALLEL_RANK_THREADS_H_

#include <string>

#include "absl/status/statusor.h"

namespace longctx {

struct RankThreads {
  int threads = 1;      // compute threads for this rank
  std::string warning;  // non-empty when the node is oversubscribed (forced)
};

// requested: TrainConfig.threads (0 = choose). local_ranks: ranks on this node
// (Communicator::local_world_size). cores: 0 = std::thread::hardware_concurrency.
// force: allow local_ranks × threads > cores with a warning.
absl::StatusOr<RankThreads> ChooseThreadsPerRank(int requested, int local_ranks, int cores, bool force);

}  // namespace longctx

#endif  // LONGCTX_TRAIN_PARALLEL_RANK_THREADS_H_
