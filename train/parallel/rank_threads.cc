// Why: see rank_threads.h.
#include "train/parallel/rank_threads.h"

#include <algorithm>
#include <thread>

#include "absl/strings/str_format.h"

namespace longctx {

absl::StatusOr<RankThreads> ChooseThreadsPerRank(int requested, int local_ranks, int cores, bool force) {
  if (cores <= 0) cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  local_ranks = std::max(1, local_ranks);
  RankThreads r;
  if (requested < 0)
    return absl::InvalidArgumentError(absl::StrFormat("threads: %d is negative (0 = cores / local ranks)", requested));
  if (requested == 0) {
    r.threads = std::max(1, cores / local_ranks);
    if (local_ranks > cores)
      r.warning = absl::StrFormat(
          "warning: %d ranks on this node share %d cores: 1 thread per rank still oversubscribes the node by %dx",
          local_ranks, cores, (local_ranks + cores - 1) / cores);
    return r;
  }
  r.threads = requested;
  if (static_cast<int64_t>(requested) * local_ranks > cores) {
    const std::string msg = absl::StrFormat(
        "threads: %d ranks on this node x %d threads per rank = %d threads for %d cores; use threads=%d (or 0 for "
        "cores / local ranks)%s",
        local_ranks, requested, requested * local_ranks, cores, std::max(1, cores / local_ranks),
        force ? "" : ", or force it with --force_threads");
    if (!force) return absl::InvalidArgumentError(msg);
    r.warning = "warning: " + msg;
  }
  return r;
}

}  // namespace longctx
