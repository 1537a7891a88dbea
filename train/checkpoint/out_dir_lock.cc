// Why: see out_dir_lock.h. One open file description per lock file per
// process (flock locks belong to it), shared by a count under a mutex.
#include "train/checkpoint/out_dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace longctx {
namespace {

struct Held {
  int fd = -1;
  int count = 0;
};
std::mutex g_mu;
std::map<std::string, Held>& HeldLocks() {
  static auto* m = new std::map<std::string, Held>();
  return *m;
}

std::string Holder(int fd) {
  char buf[512] = {0};
  const ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
  std::string s = n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s.empty() ? std::string("holder unknown") : s;
}

}  // namespace

absl::StatusOr<OutDirLock> OutDirLock::Acquire(const std::string& out_dir) {
  if (out_dir.empty()) return absl::InvalidArgumentError("out_dir: empty");
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  if (ec) return absl::UnavailableError(absl::StrCat("out_dir: cannot create ", out_dir, ": ", ec.message()));
  std::filesystem::path p = std::filesystem::weakly_canonical(std::filesystem::path(out_dir) / kOutDirLockFile, ec);
  const std::string path = ec ? (std::filesystem::path(out_dir) / kOutDirLockFile).string() : p.string();
  std::lock_guard<std::mutex> l(g_mu);
  auto it = HeldLocks().find(path);
  if (it != HeldLocks().end()) {
    ++it->second.count;
    OutDirLock lock;
    lock.path_ = path;
    return lock;
  }
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0)
    return absl::Status(absl::ErrnoToStatusCode(errno),
                        absl::StrCat("out_dir ", out_dir, ": cannot open lock file ", path, ": ", std::strerror(errno)));
  while (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int e = errno;
    if (e == EINTR) continue;
    if (e == EWOULDBLOCK) {
      const std::string holder = Holder(fd);
      close(fd);
      return absl::FailedPreconditionError(absl::StrCat(
          "out_dir ", out_dir, " is in use by another longctx job (", holder, "; lock file ", path,
          "): two jobs in one out_dir would interleave their checkpoints; wait for it to end, stop it, or use "
          "another out_dir"));
    }
    close(fd);
    return absl::Status(absl::ErrnoToStatusCode(e),
                        absl::StrCat("out_dir ", out_dir, ": cannot lock ", path, ": ", std::strerror(e)));
  }
  // Ours: say who holds it, for the next job's message.
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  const std::time_t now = std::time(nullptr);
  char when[64] = {0};
  std::strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  const std::string who = absl::StrFormat("pid %d on host %s, started %s\n", getpid(), host, when);
  if (ftruncate(fd, 0) == 0) {
    const ssize_t w = pwrite(fd, who.data(), who.size(), 0);
    (void)w;  // the lock is what matters; the text is a courtesy
  }
  HeldLocks()[path] = {fd, 1};
  OutDirLock lock;
  lock.path_ = path;
  return lock;
}

OutDirLock::OutDirLock(OutDirLock&& other) noexcept : path_(std::exchange(other.path_, std::string())) {}

OutDirLock& OutDirLock::operator=(OutDirLock&& other) noexcept {
  if (this != &other) {
    Release();
    path_ = std::exchange(other.path_, std::string());
  }
  return *this;
}

OutDirLock::~OutDirLock() { Release(); }

void OutDirLock::Release() {
  if (path_.empty()) return;
  std::lock_guard<std::mutex> l(g_mu);
  auto it = HeldLocks().find(path_);
  if (it != HeldLocks().end() && --it->second.count == 0) {
    // Closing the last descriptor drops the flock; the file stays (removing
    // it would race with a job opening it now).
    close(it->second.fd);
    HeldLocks().erase(it);
  }
  path_.clear();
}

}  // namespace longctx
