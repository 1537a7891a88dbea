// Why: every reader under fuzz takes a path, not a buffer (they mmap, pread or
// stream files), so each input is written to one scratch file per process —
// in /dev/shm when there is one, so the fuzzer does not wait on a disk.
#ifndef LONGCTX_TESTS_FUZZ_FUZZ_UTIL_H_
#define LONGCTX_TESTS_FUZZ_FUZZ_UTIL_H_

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>

namespace longctx::fuzz {

// Writes data to this process's scratch file ending in `suffix`; returns its path.
// The file is removed when the process exits normally.
inline std::string WriteScratch(const uint8_t* data, size_t size, const std::string& suffix) {
  static const std::string dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
  const std::string path = dir + "/longctx_fuzz_" + std::to_string(getpid()) + suffix;
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) std::abort();  // the harness itself is broken: stop loudly
  if (size > 0 && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
  static std::set<std::string>* written = [] {
    auto* w = new std::set<std::string>();
    std::atexit([] {
      for (const std::string& p : *written) std::remove(p.c_str());
    });
    return w;
  }();
  written->insert(path);
  return path;
}

}  // namespace longctx::fuzz

#endif  // LONGCTX_TESTS_FUZZ_FUZZ_UTIL_H_
