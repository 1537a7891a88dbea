// Why: `longctx convert --from hf` reads a whole directory someone else wrote
// (a hub download, a transformers save_pretrained, a hand edit): config.json,
// model.safetensors.index.json and the safetensors shards it names. Any such
// directory must import or give an error naming the file, never a crash, an
// exception or a write outside --out; a directory that imports must give a
// checkpoint that verifies against its own manifest. The input is the
// directory as an archive (tests/fuzz/fuzz_util.h, UnpackArchive).
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <string>

#include "train/checkpoint/checkpoint.h"
#include "train/convert/hf_convert.h"
#include "tests/fuzz/fuzz_util.h"

namespace fs = std::filesystem;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string root =
      std::string(access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp") + "/longctx_fuzz_hf_" + std::to_string(getpid());
  const std::string hf = root + "/hf", out = root + "/out";
  std::error_code ec;
  fs::remove_all(root, ec);
  fs::create_directories(hf);
  longctx::fuzz::UnpackArchive(data, size, hf);
  longctx::HfImportOptions o;
  o.hf = hf;
  o.out = out;
  absl::StatusOr<longctx::HfImportResult> r = longctx::ImportFromHf(o);
  if (r.ok()) {
    // What import wrote, loading must accept: its manifest covers the files.
    if (!longctx::VerifyCheckpointFiles(out).ok()) __builtin_trap();
  } else if (r.status().message().empty()) {
    __builtin_trap();  // an error must say what and where
  }
  fs::remove_all(root, ec);
  return 0;
}
