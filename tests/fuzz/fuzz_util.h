// Why: every reader under fuzz takes a path, not a buffer (they mmap, pread or
// stream files), so each input is written to one scratch file per process —
// in /dev/shm when there is one, so the fuzzer does not wait on a disk.
#ifndef LONGCTX_TESTS_FUZZ_FUZZ_UTIL_H_
#define LONGCTX_TESTS_FUZZ_FUZZ_UTIL_H_

#include <unistd.h>

#include <algorithm>
#include <cctype>
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

// Writes the files of a directory archive into dir (which must exist): up to
// 16 entries "NAME\nLENGTH\nBYTES", NAME of [A-Za-z0-9._-] (others skipped,
// so no entry escapes dir), LENGTH in decimal (at most 7 digits; a shorter
// remainder is taken as it is). The targets that read a whole directory (a
// checkpoint step, a Hugging Face model) take their input in this form.
inline void UnpackArchive(const uint8_t* data, size_t size, const std::string& dir) {
  const std::string in(reinterpret_cast<const char*>(data), size);
  size_t at = 0;
  for (int entries = 0; entries < 16 && at < in.size(); ++entries) {
    const size_t nl = in.find('\n', at);
    if (nl == std::string::npos) break;
    const std::string name = in.substr(at, nl - at);
    const size_t nl2 = in.find('\n', nl + 1);
    if (nl2 == std::string::npos) break;
    size_t len = 0;
    bool number = nl2 > nl + 1 && nl2 - nl - 1 <= 7;
    for (size_t i = nl + 1; number && i < nl2; ++i) {
      if (in[i] < '0' || in[i] > '9') number = false;
      len = len * 10 + static_cast<size_t>(in[i] - '0');
    }
    if (!number) break;
    const size_t begin = nl2 + 1, n = std::min(len, in.size() - begin);
    bool ok_name = !name.empty() && name.size() < 64 && name != "." && name != "..";
    for (char c : name)
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-')) ok_name = false;
    if (ok_name) {
      FILE* f = std::fopen((dir + "/" + name).c_str(), "wb");
      if (f == nullptr) std::abort();  // the harness is broken
      if (n > 0 && std::fwrite(in.data() + begin, 1, n, f) != n) std::abort();
      std::fclose(f);
    }
    at = begin + n;
  }
}

}  // namespace longctx::fuzz

#endif  // LONGCTX_TESTS_FUZZ_FUZZ_UTIL_H_
