// Why: resume, `checkpoint verify` and every loader read a step directory's
// manifest.json, trainer_state.json, COMPLETE marker and shard headers before
// trusting any weight, and those files may be truncated, hand-edited or from
// another version. Any directory must give OK or an error naming the file,
// never a crash or an exception. The input is a whole directory as a small
// archive: entries "NAME\nLENGTH\nBYTES" (NAME of [A-Za-z0-9._-], LENGTH in
// decimal), written into step-00000002/ of a scratch dir, which is then
// verified for structure and against its manifest (train/checkpoint/checkpoint.h).
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>

#include "train/checkpoint/checkpoint.h"
#include "train/checkpoint/manifest.h"

namespace fs = std::filesystem;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string root =
      std::string(access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp") + "/longctx_fuzz_ckpt_" + std::to_string(getpid());
  const std::string dir = root + "/step-00000002";
  std::error_code ec;
  fs::remove_all(root, ec);
  fs::create_directories(dir);
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
  (void)longctx::VerifyCheckpointStructure(dir);
  (void)longctx::VerifyCheckpointFiles(dir);
  (void)longctx::LoadTrainerState(dir);
  bool legacy = false;
  (void)longctx::ReadManifest(dir, &legacy);
  fs::remove_all(root, ec);
  return 0;
}
