// Why: see resume_point.h.
#include "train/checkpoint/resume_point.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "base/log.h"
#include "train/checkpoint/checkpoint.h"
#include "train/checkpoint/checkpoint_dir.h"
#include "train/checkpoint/rank_agreement.h"

namespace longctx {

absl::StatusOr<std::string> NewestUsableCheckpoint(const std::string& out_dir, const ParamLayout& layout,
                                                   ParallelMode mode, Communicator& comm) {
  const int rank = comm.rank();
  absl::StatusOr<std::vector<std::string>> complete = ListCompleteCheckpoints(out_dir);
  if (!complete.ok()) return complete.status();
  absl::StatusOr<std::vector<std::string>> incomplete = ListIncompleteCheckpoints(out_dir);
  if (!incomplete.ok()) return incomplete.status();
  const int64_t newest_complete_step = complete->empty() ? -1 : StepOfCheckpointDir(complete->back());
  for (const std::string& d : *incomplete)
    if (StepOfCheckpointDir(d) > newest_complete_step && rank == 0)
      LOG(WARNING) << d << " has no " << kCheckpointCompleteMarker << " marker (an unfinished save or a copy); ignoring it and "
                   << (complete->empty() ? std::string("starting from step 0")
                                         : absl::StrCat("resuming from ", complete->back()));
  std::string corrupt_note;
  for (int i = static_cast<int>(complete->size()) - 1; i >= 0; --i) {
    const std::string& dir = (*complete)[i];
    absl::Status verified =
        AgreeOnStatus(comm, VerifyCheckpointForRank(dir, layout, mode, rank, comm.world_size()));
    if (verified.ok()) {
      if (!corrupt_note.empty() && rank == 0)
        LOG(WARNING) << corrupt_note << "; falling back to the previous complete checkpoint " << dir;
      return dir;
    }
    if (verified.code() != absl::StatusCode::kDataLoss) return verified;
    corrupt_note = absl::StrCat(corrupt_note.empty() ? "" : absl::StrCat(corrupt_note, "; "), "checkpoint ", dir,
                                " is corrupt (", verified.message(), ")");
    if (i == 0)
      return absl::DataLossError(absl::StrCat(corrupt_note, "; no older complete checkpoint in ", out_dir,
                                              " to fall back to (refusing to start over from step 0 on top of it: "
                                              "move the directory away to start a new run)"));
  }
  return std::string();
}

}  // namespace longctx
