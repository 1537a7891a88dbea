// Why: a run that dies mid-save (preemption, full disk, OOM kill) must never
// leave a checkpoint that looks complete but is not, and resuming must find
// the newest good one without guessing. So a checkpoint is a directory
// `<out_dir>/step-00000120/` (step zero-padded to 8 digits) that is built in
// `<out_dir>/.tmp-step-00000120-<pid>/`, fsynced file by file, given a
// `COMPLETE` marker last, and only then renamed into place. Readers trust a
// step directory only when it has the marker.
//
// Re-committing an existing step replaces it atomically with
// renameat2(RENAME_EXCHANGE) where the filesystem supports it; elsewhere the
// old directory is renamed aside (`.tmp-replaced-step-...-<pid>`), the new one
// renamed in, and the old one removed (a crash between the two renames leaves
// the step missing, never half-written; FindLatestCheckpoint then returns the
// previous step).
//
// Not safe for two processes committing into the same out_dir at once (only
// one rank should save), and stale-tmp pruning judges liveness by pid on this
// host, so a shared filesystem written from several hosts must not prune.
#ifndef LONGCTX_TRAIN_CHECKPOINT_DIR_H_
#define LONGCTX_TRAIN_CHECKPOINT_DIR_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace longctx {

// Name of the marker file written last into a committed checkpoint.
inline constexpr char kCheckpointCompleteMarker[] = "COMPLETE";

// "step-00000120" for step 120 (more digits when step >= 10^8).
std::string CheckpointDirName(int64_t step);

// The step of a checkpoint directory path ("/x/step-00000120" or
// "step-00000120/" -> 120); -1 when the last path component is not a
// canonical checkpoint name (also for ".tmp-step-..." and "step-12").
int64_t StepOfCheckpointDir(const std::string& path);

class CheckpointDirWriter {
 public:
  // Creates out_dir (and parents) if needed, and a fresh
  // `<out_dir>/.tmp-step-XXXXXXXX-<pid>` (a stale one of that name is removed).
  static absl::StatusOr<CheckpointDirWriter> Begin(const std::string& out_dir, int64_t step);

  CheckpointDirWriter(CheckpointDirWriter&& other) noexcept;
  CheckpointDirWriter& operator=(CheckpointDirWriter&& other) noexcept;
  CheckpointDirWriter(const CheckpointDirWriter&) = delete;
  CheckpointDirWriter& operator=(const CheckpointDirWriter&) = delete;
  // Without a successful Commit, removes the tmp directory.
  ~CheckpointDirWriter();

  // `file` inside the directory being written (the tmp directory before
  // Commit, the final directory after it). Subdirectories are the caller's to
  // create.
  std::string path(const std::string& file) const;
  const std::string& tmp_dir() const { return tmp_dir_; }
  const std::string& final_dir() const { return final_dir_; }
  int64_t step() const { return step_; }
  bool committed() const { return committed_; }

  // fsyncs every file and directory under the tmp dir, writes and fsyncs the
  // COMPLETE marker, renames tmp -> final (replacing an older final), and
  // fsyncs out_dir. Errors name the path and the errno text; after an error
  // the tmp directory is still removed by the destructor. Calling it twice is
  // FailedPrecondition.
  absl::Status Commit();

 private:
  CheckpointDirWriter() = default;

  std::string out_dir_;
  std::string tmp_dir_;
  std::string final_dir_;
  int64_t step_ = -1;
  bool committed_ = false;
};

// The path `<out_dir>/step-XXXXXXXX` of the highest step that has the
// COMPLETE marker. Ignores `.tmp-*`, directories without the marker and names
// that are not canonical checkpoint names. nullopt when there is none or
// out_dir does not exist.
absl::StatusOr<std::optional<std::string>> FindLatestCheckpoint(const std::string& out_dir);

// Every complete checkpoint directory of out_dir, ascending by step (what
// FindLatestCheckpoint picks the last of); empty when out_dir is missing.
absl::StatusOr<std::vector<std::string>> ListCompleteCheckpoints(const std::string& out_dir);
// Canonical step directories without the COMPLETE marker (a save that died
// after the rename of an older format, or a hand-made copy), ascending.
absl::StatusOr<std::vector<std::string>> ListIncompleteCheckpoints(const std::string& out_dir);

// Removes all but the newest `keep` complete checkpoints (keep <= 0 keeps
// them all) and every `.tmp-*` directory whose owning pid is no longer alive
// on this host, plus `.tmp-step-*-<our pid>` directories that no live
// CheckpointDirWriter of this process owns (left by an earlier run that had
// the same pid, common in containers). Step directories without the marker are left alone (they are
// not ours to judge). A missing out_dir is OK.
absl::Status PruneCheckpoints(const std::string& out_dir, int keep);

// Writes `contents` to `path` via `<path>.tmp-<pid>`: write, fsync, rename,
// fsync the parent directory. The tmp file is removed on failure.
absl::Status WriteFileAtomic(const std::string& path, const std::string& contents);

// The whole file. Errors name the path and the errno text.
absl::StatusOr<std::string> ReadFileToString(const std::string& path);

namespace checkpoint_internal {
// Replaces directory `to` (which may or may not exist) by directory `from`.
// With try_exchange, uses renameat2(RENAME_EXCHANGE) and falls back to the
// rename-aside protocol when the filesystem does not support it; without,
// always uses rename-aside. Exposed for tests.
absl::Status ReplaceDirectory(const std::string& from, const std::string& to, bool try_exchange);
}  // namespace checkpoint_internal

}  // namespace longctx

#endif  // LONGCTX_TRAIN_CHECKPOINT_DIR_H_
