// Why: resume, `checkpoint verify` and every loader read a step directory's
// manifest.json, trainer_state.json, COMPLETE marker and shard headers before
// trusting any weight, and those files may be truncated, hand-edited or from
// another version. Any directory must give OK or an error naming the file,
// never a crash or an exception. The input is a whole directory as a small
// archive: entries "NAME\nLENGTH\nBYTES" (NAME of [A-Za-z0-9._-], LENGTH in
// decimal), written into step-00000002/ of a scratch dir, which is then
// verified for structure and against its manifest (train/checkpoint/checkpoint.h).
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <string>

#include "train/checkpoint/checkpoint.h"
#include "train/checkpoint/manifest.h"
#include "tests/fuzz/fuzz_util.h"

namespace fs = std::filesystem;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string root =
      std::string(access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp") + "/longctx_fuzz_ckpt_" + std::to_string(getpid());
  const std::string dir = root + "/step-00000002";
  std::error_code ec;
  fs::remove_all(root, ec);
  fs::create_directories(dir);
  longctx::fuzz::UnpackArchive(data, size, dir);
  (void)longctx::VerifyCheckpointStructure(dir);
  (void)longctx::VerifyCheckpointFiles(dir);
  (void)longctx::LoadTrainerState(dir);
  bool legacy = false;
  (void)longctx::ReadManifest(dir, &legacy);
  fs::remove_all(root, ec);
  return 0;
}
