// Why: see checkpoint_dir.h. Plain POSIX calls (open/fsync/rename/renameat2)
// where durability matters, std::filesystem for listing and recursive removal;
// every failure becomes a Status naming the path and the errno text.
#include "train/checkpoint/checkpoint_dir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <mutex>
#include <set>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace longctx {
namespace {

namespace fs = std::filesystem;

absl::Status ErrnoStatus(int e, const std::string& what, const std::string& path) {
  return absl::Status(absl::ErrnoToStatusCode(e),
                      absl::StrCat("checkpoint: ", what, " '", path, "': ",
                                   std::generic_category().message(e)));
}

absl::Status EcStatus(const std::error_code& ec, const std::string& what, const std::string& path) {
  if (ec.category() == std::generic_category() || ec.category() == std::system_category()) {
    return ErrnoStatus(ec.value(), what, path);
  }
  return absl::InternalError(absl::StrCat("checkpoint: ", what, " '", path, "': ", ec.message()));
}

std::string Join(const std::string& dir, const std::string& name) {
  return (fs::path(dir) / name).string();
}

std::string ParentDir(const std::string& path) {
  fs::path p = fs::path(path).parent_path();
  return p.empty() ? std::string(".") : p.string();
}

bool IsAllDigits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

absl::Status FsyncFd(int fd, const std::string& path, bool is_dir) {
  if (fsync(fd) != 0) {
    const int e = errno;
    // Some filesystems cannot fsync a directory; the rename is still atomic.
    if (!(is_dir && (e == EINVAL || e == EBADF))) return ErrnoStatus(e, "fsync of", path);
  }
  return absl::OkStatus();
}

absl::Status FsyncPath(const std::string& path, bool is_dir) {
  const int fd = open(path.c_str(), (is_dir ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, "cannot open for fsync", path);
  absl::Status st = FsyncFd(fd, path, is_dir);
  if (close(fd) != 0 && st.ok()) st = ErrnoStatus(errno, "close of", path);
  return st;
}

absl::Status WriteAll(int fd, const std::string& contents, const std::string& path) {
  const char* p = contents.data();
  size_t left = contents.size();
  while (left > 0) {
    const ssize_t w = write(fd, p, left);
    if (w < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, "write to", path);
    }
    p += w;
    left -= static_cast<size_t>(w);
  }
  return absl::OkStatus();
}

// Creates (truncates) `path`, writes, fsyncs, closes.
absl::Status WriteAndSync(const std::string& path, const std::string& contents) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoStatus(errno, "cannot create", path);
  absl::Status st = WriteAll(fd, contents, path);
  if (st.ok()) st = FsyncFd(fd, path, /*is_dir=*/false);
  if (close(fd) != 0 && st.ok()) st = ErrnoStatus(errno, "close of", path);
  return st;
}

absl::Status RemoveAll(const std::string& path) {
  std::error_code ec;
  fs::remove_all(path, ec);
  if (ec) return EcStatus(ec, "cannot remove", path);
  return absl::OkStatus();
}

bool Exists(const std::string& path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0;
}

bool HasCompleteMarker(const std::string& dir) {
  struct stat st;
  return lstat(Join(dir, kCheckpointCompleteMarker).c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// Tmp dirs of live CheckpointDirWriters in this process (canonical paths),
// so pruning can tell our own abandoned tmp dirs (a restarted container
// often reuses the same pid) from ones being written right now.
std::mutex g_active_mu;
std::set<std::string>& ActiveTmpDirs() {
  static std::set<std::string>* s = new std::set<std::string>();
  return *s;
}
std::string Canonical(const std::string& path) {
  std::error_code ec;
  fs::path p = fs::weakly_canonical(path, ec);
  return ec ? path : p.string();
}
void RegisterActive(const std::string& tmp) {
  std::lock_guard<std::mutex> l(g_active_mu);
  ActiveTmpDirs().insert(Canonical(tmp));
}
void UnregisterActive(const std::string& tmp) {
  const std::string c = Canonical(tmp);
  std::lock_guard<std::mutex> l(g_active_mu);
  ActiveTmpDirs().erase(c);
}
bool IsActive(const std::string& tmp) {
  const std::string c = Canonical(tmp);
  std::lock_guard<std::mutex> l(g_active_mu);
  return ActiveTmpDirs().count(c) != 0;
}

struct Found {
  int64_t step;
  std::string path;
};

// Complete (or, with complete=false, incomplete) checkpoints in out_dir,
// ascending by step; empty if out_dir is missing.
absl::StatusOr<std::vector<Found>> ListComplete(const std::string& out_dir, bool complete = true) {
  std::vector<Found> out;
  std::error_code ec;
  fs::directory_iterator it(out_dir, ec);
  if (ec) {
    if (ec == std::errc::no_such_file_or_directory) return out;
    return EcStatus(ec, "cannot list", out_dir);
  }
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) return EcStatus(ec, "cannot list", out_dir);
    const std::string name = it->path().filename().string();
    const int64_t step = StepOfCheckpointDir(name);
    if (step < 0) continue;
    std::error_code dec;
    if (!it->is_directory(dec)) continue;
    const std::string p = Join(out_dir, name);
    if (HasCompleteMarker(p) != complete) continue;
    out.push_back({step, p});
  }
  if (ec) return EcStatus(ec, "cannot list", out_dir);
  std::sort(out.begin(), out.end(), [](const Found& a, const Found& b) { return a.step < b.step; });
  return out;
}

}  // namespace

std::string CheckpointDirName(int64_t step) { return absl::StrFormat("step-%08d", step); }

int64_t StepOfCheckpointDir(const std::string& path) {
  std::string s = path;
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  const size_t slash = s.rfind('/');
  const std::string name = slash == std::string::npos ? s : s.substr(slash + 1);
  constexpr size_t kPrefix = 5;  // "step-"
  if (name.size() < kPrefix + 8 || name.compare(0, kPrefix, "step-") != 0) return -1;
  const std::string digits = name.substr(kPrefix);
  if (!IsAllDigits(digits) || digits.size() > 18) return -1;
  const int64_t step = std::stoll(digits);
  // Only the canonical spelling counts: "step-000000120" would alias step 120.
  if (CheckpointDirName(step) != name) return -1;
  return step;
}

// ---------------------------------------------------------------------------

absl::StatusOr<CheckpointDirWriter> CheckpointDirWriter::Begin(const std::string& out_dir,
                                                               int64_t step) {
  if (out_dir.empty()) return absl::InvalidArgumentError("checkpoint: empty output directory");
  if (step < 0) {
    return absl::InvalidArgumentError(absl::StrCat("checkpoint: negative step ", step));
  }
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) return EcStatus(ec, "cannot create output directory", out_dir);
  CheckpointDirWriter w;
  w.out_dir_ = out_dir;
  w.step_ = step;
  w.final_dir_ = Join(out_dir, CheckpointDirName(step));
  const std::string tmp =
      Join(out_dir, absl::StrCat(".tmp-", CheckpointDirName(step), "-", getpid()));
  if (Exists(tmp)) {
    if (absl::Status st = RemoveAll(tmp); !st.ok()) return st;
  }
  if (mkdir(tmp.c_str(), 0755) != 0) return ErrnoStatus(errno, "cannot create", tmp);
  RegisterActive(tmp);
  w.tmp_dir_ = tmp;  // set last: from here on the destructor cleans up
  return w;
}

CheckpointDirWriter::CheckpointDirWriter(CheckpointDirWriter&& other) noexcept {
  *this = std::move(other);
}

CheckpointDirWriter& CheckpointDirWriter::operator=(CheckpointDirWriter&& other) noexcept {
  if (this != &other) {
    if (!committed_ && !tmp_dir_.empty()) {
      RemoveAll(tmp_dir_).IgnoreError();
      UnregisterActive(tmp_dir_);
    }
    out_dir_ = std::move(other.out_dir_);
    tmp_dir_ = std::exchange(other.tmp_dir_, std::string());
    final_dir_ = std::move(other.final_dir_);
    step_ = other.step_;
    committed_ = other.committed_;
  }
  return *this;
}

CheckpointDirWriter::~CheckpointDirWriter() {
  if (!committed_ && !tmp_dir_.empty()) {
    RemoveAll(tmp_dir_).IgnoreError();
    UnregisterActive(tmp_dir_);
  }
}

std::string CheckpointDirWriter::path(const std::string& file) const {
  return Join(committed_ ? final_dir_ : tmp_dir_, file);
}

absl::Status CheckpointDirWriter::Commit() {
  if (tmp_dir_.empty()) {
    return absl::FailedPreconditionError("checkpoint: Commit on a moved-from writer");
  }
  if (committed_) {
    return absl::FailedPreconditionError(
        absl::StrCat("checkpoint: '", final_dir_, "' already committed"));
  }
  // 1. Everything the caller wrote, files first, then their directories.
  std::vector<std::string> dirs;
  std::error_code ec;
  fs::recursive_directory_iterator it(tmp_dir_, ec);
  if (ec) return EcStatus(ec, "cannot list", tmp_dir_);
  for (; it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) return EcStatus(ec, "cannot list", tmp_dir_);
    std::error_code tec;
    const fs::file_status s = it->symlink_status(tec);
    if (tec) return EcStatus(tec, "cannot stat", it->path().string());
    if (fs::is_regular_file(s)) {
      if (absl::Status st = FsyncPath(it->path().string(), false); !st.ok()) return st;
    } else if (fs::is_directory(s)) {
      dirs.push_back(it->path().string());
    }
  }
  if (ec) return EcStatus(ec, "cannot list", tmp_dir_);
  for (const std::string& d : dirs) {
    if (absl::Status st = FsyncPath(d, true); !st.ok()) return st;
  }
  // 2. The marker, last, then the directory entry that holds it.
  if (absl::Status st = WriteAndSync(Join(tmp_dir_, kCheckpointCompleteMarker),
                                     absl::StrCat("step ", step_, "\n"));
      !st.ok()) {
    return st;
  }
  if (absl::Status st = FsyncPath(tmp_dir_, true); !st.ok()) return st;
  // 3. Publish, and make the rename durable.
  if (absl::Status st = checkpoint_internal::ReplaceDirectory(tmp_dir_, final_dir_, true); !st.ok()) {
    return st;
  }
  committed_ = true;
  UnregisterActive(tmp_dir_);
  return FsyncPath(out_dir_, true);
}

namespace checkpoint_internal {

absl::Status ReplaceDirectory(const std::string& from, const std::string& to, bool try_exchange) {
  if (try_exchange) {
    if (renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_EXCHANGE) == 0) {
      // `from` now holds the old directory.
      return RemoveAll(from);
    }
    const int e = errno;
    if (e != EINVAL && e != ENOSYS && e != EOPNOTSUPP && e != ENOENT) {
      return ErrnoStatus(e, absl::StrCat("cannot exchange '", from, "' with"), to);
    }
    // ENOENT: `to` does not exist yet (or `from` is missing; rename reports it).
  }
  std::string aside;
  if (Exists(to)) {
    const fs::path tp(to);
    aside = Join(ParentDir(to),
                 absl::StrCat(".tmp-replaced-", tp.filename().string(), "-", getpid()));
    if (Exists(aside)) {
      if (absl::Status st = RemoveAll(aside); !st.ok()) return st;
    }
    if (rename(to.c_str(), aside.c_str()) != 0) {
      return ErrnoStatus(errno, absl::StrCat("cannot move aside old '", to, "' to"), aside);
    }
  }
  if (rename(from.c_str(), to.c_str()) != 0) {
    const int e = errno;
    if (!aside.empty()) rename(aside.c_str(), to.c_str());  // best effort: put the old one back
    return ErrnoStatus(e, absl::StrCat("cannot rename '", from, "' to"), to);
  }
  if (!aside.empty()) return RemoveAll(aside);
  return absl::OkStatus();
}

}  // namespace checkpoint_internal

// ---------------------------------------------------------------------------

absl::StatusOr<std::optional<std::string>> FindLatestCheckpoint(const std::string& out_dir) {
  absl::StatusOr<std::vector<Found>> found = ListComplete(out_dir);
  if (!found.ok()) return found.status();
  if (found->empty()) return std::optional<std::string>();
  return std::optional<std::string>(found->back().path);
}

absl::StatusOr<std::vector<std::string>> ListCompleteCheckpoints(const std::string& out_dir) {
  absl::StatusOr<std::vector<Found>> found = ListComplete(out_dir);
  if (!found.ok()) return found.status();
  std::vector<std::string> out;
  for (const Found& f : *found) out.push_back(f.path);
  return out;
}

absl::StatusOr<std::vector<std::string>> ListIncompleteCheckpoints(const std::string& out_dir) {
  absl::StatusOr<std::vector<Found>> found = ListComplete(out_dir, /*complete=*/false);
  if (!found.ok()) return found.status();
  std::vector<std::string> out;
  for (const Found& f : *found) out.push_back(f.path);
  return out;
}

absl::Status PruneCheckpoints(const std::string& out_dir, int keep) {
  absl::StatusOr<std::vector<Found>> found = ListComplete(out_dir);
  if (!found.ok()) return found.status();
  const pid_t self = getpid();
  // Old checkpoints: rename out of the namespace first (so a crash mid-removal
  // cannot leave a step dir whose marker outlived its weights), then remove.
  if (keep > 0 && found->size() > static_cast<size_t>(keep)) {
    for (size_t i = 0; i + keep < found->size(); ++i) {
      const Found& f = (*found)[i];
      const std::string doomed =
          Join(out_dir, absl::StrCat(".tmp-pruned-", CheckpointDirName(f.step), "-", self));
      if (Exists(doomed)) {
        if (absl::Status st = RemoveAll(doomed); !st.ok()) return st;
      }
      if (rename(f.path.c_str(), doomed.c_str()) != 0) {
        return ErrnoStatus(errno, absl::StrCat("cannot move old checkpoint '", f.path, "' to"),
                           doomed);
      }
      if (absl::Status st = RemoveAll(doomed); !st.ok()) return st;
    }
  }
  // Stale tmp dirs of processes that no longer exist.
  std::error_code ec;
  fs::directory_iterator it(out_dir, ec);
  if (ec) {
    if (ec == std::errc::no_such_file_or_directory) return absl::OkStatus();
    return EcStatus(ec, "cannot list", out_dir);
  }
  std::vector<std::string> stale;
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) return EcStatus(ec, "cannot list", out_dir);
    const std::string name = it->path().filename().string();
    if (name.rfind(".tmp-", 0) != 0) continue;
    const size_t dash = name.rfind('-');
    const std::string pid_text = name.substr(dash + 1);
    if (!IsAllDigits(pid_text) || pid_text.size() > 9) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(pid_text));
    if (pid <= 0) continue;
    if (pid == self) {
      // Ours: stale unless a live writer in this process owns it. Only
      // writer tmp dirs; ".tmp-replaced-"/".tmp-pruned-" of our pid may be
      // mid-operation in another thread.
      if (name.rfind(".tmp-step-", 0) != 0 || IsActive(it->path().string())) continue;
    } else if (kill(pid, 0) == 0 || errno != ESRCH) {
      continue;  // alive (or not ours to signal)
    }
    stale.push_back(it->path().string());
  }
  if (ec) return EcStatus(ec, "cannot list", out_dir);
  for (const std::string& p : stale) {
    if (absl::Status st = RemoveAll(p); !st.ok()) return st;
  }
  return absl::OkStatus();
}

absl::Status WriteFileAtomic(const std::string& path, const std::string& contents) {
  const std::string tmp = absl::StrCat(path, ".tmp-", getpid());
  if (absl::Status st = WriteAndSync(tmp, contents); !st.ok()) {
    unlink(tmp.c_str());
    return st;
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    unlink(tmp.c_str());
    return ErrnoStatus(e, absl::StrCat("cannot rename '", tmp, "' to"), path);
  }
  return FsyncPath(ParentDir(path), true);
}

absl::StatusOr<std::string> ReadFileToString(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, "cannot open", path);
  std::string out;
  char buf[1 << 16];
  while (true) {
    const ssize_t r = read(fd, buf, sizeof(buf));
    if (r < 0) {
      if (errno == EINTR) continue;
      const int e = errno;
      close(fd);
      return ErrnoStatus(e, "read of", path);
    }
    if (r == 0) break;
    out.append(buf, static_cast<size_t>(r));
  }
  close(fd);
  return out;
}

}  // namespace longctx
