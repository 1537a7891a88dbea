// Why: two jobs training into one out_dir (a requeued Slurm job whose old
// copy still runs, a person starting the same command twice) would
// interleave their saves: each prunes the other's checkpoints and a resume
// could pick a step the other run wrote. So a training job holds an
// exclusive flock(2) on <out_dir>/.longctx.lock from start to exit; the second
// job fails at start naming the out_dir and the holder (pid, host, start
// time, written into the file by the holder). The kernel drops the lock when
// the holder's process dies, however it dies, so a SIGKILLed job never blocks
// its restart. One rank (rank 0) takes it for the whole job. Within one
// process the lock is counted, so a test holding two trainers on one out_dir
// in turn is not refused. flock works on local filesystems and on NFS (Linux
// maps it to a POSIX lock there); on a filesystem without locks, taking it
// fails with an error naming the filesystem's errno.
#ifndef LONGCTX_TRAIN_CHECKPOINT_OUT_DIR_LOCK_H_
#define LONGCTX_TRAIN_CHECKPOINT_OUT_DIR_LOCK_H_

#include <string>

#include "absl/status/statusor.h"

namespace longctx {

inline constexpr char kOutDirLockFile[] = ".longctx.lock";

class OutDirLock {
 public:
  // Creates out_dir if needed and takes the lock without waiting.
  // FailedPrecondition "out_dir X is in use by another longctx job (pid P on
  // host H, started T; lock file X/.longctx.lock): ..." when another process
  // holds it; other errors name the path and the errno text.
  static absl::StatusOr<OutDirLock> Acquire(const std::string& out_dir);

  OutDirLock(OutDirLock&& other) noexcept;
  OutDirLock& operator=(OutDirLock&& other) noexcept;
  OutDirLock(const OutDirLock&) = delete;
  OutDirLock& operator=(const OutDirLock&) = delete;
  ~OutDirLock();  // releases it

  const std::string& path() const { return path_; }

 private:
  OutDirLock() = default;
  void Release();
  std::string path_;  // canonical lock file path; empty when moved from
};

}  // namespace longctx

#endif  // LONGCTX_TRAIN_CHECKPOINT_OUT_DIR_LOCK_H_
