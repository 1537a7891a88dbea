// Why: see manifest.h.
#include "train/checkpoint/manifest.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "data/token_file.h"
#include "train/checkpoint/checkpoint_dir.h"

namespace longctx {

absl::StatusOr<FileDigest> HashFile(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::DataLossError(absl::StrCat(path, ": cannot open: ", std::strerror(errno)));
  XxHash64Stream h;
  FileDigest d;
  std::vector<char> buf(1 << 20);
  while (true) {
    const ssize_t r = read(fd, buf.data(), buf.size());
    if (r < 0) {
      if (errno == EINTR) continue;
      const int e = errno;
      close(fd);
      return absl::DataLossError(absl::StrCat(path, ": read failed: ", std::strerror(e)));
    }
    if (r == 0) break;
    h.Update(buf.data(), static_cast<size_t>(r));
    d.size += r;
  }
  close(fd);
  d.xxh64 = h.Digest();
  return d;
}

std::string Hex64(uint64_t v) { return absl::StrFormat("%016x", v); }

const char* ParallelModeName(ParallelMode m) {
  switch (m) {
    case ZERO1: return "ZERO1";
    case FSDP: return "FSDP";
    default: return "DDP";
  }
}

absl::StatusOr<nlohmann::json> ReadManifest(const std::string& dir, bool* legacy) {
  const std::string path = dir + "/" + "manifest.json";
  *legacy = false;
  if (!std::filesystem::exists(path)) {
    *legacy = true;
    return nlohmann::json();
  }
  absl::StatusOr<std::string> text = ReadFileToString(path);
  if (!text.ok()) return absl::DataLossError(text.status().message());
  nlohmann::json j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || !j.contains("files") || !j["files"].is_object())
    return absl::DataLossError(absl::StrCat(path, ": not a checkpoint manifest (no \"files\" object)"));
  return j;
}

absl::Status VerifyAgainstManifest(const std::string& dir, const nlohmann::json& manifest, const std::string& file) {
  const std::string path = dir + "/" + file;
  const nlohmann::json& files = manifest["files"];
  if (!files.contains(file) || !files[file].is_object() || !files[file].contains("size") ||
      !files[file]["size"].is_number_integer() || !files[file].contains("xxh64") || !files[file]["xxh64"].is_string()) {
    const bool sharded = manifest.contains("layout") && manifest["layout"].is_object() &&
                         manifest["layout"].value("kind", std::string()) == "sharded";
    return absl::DataLossError(absl::StrCat(
        path, ": not listed (with size and xxh64) in ", dir, "/manifest.json",
        sharded ? " (a sharded checkpoint: its values are in shard-*.safetensors; `longctx checkpoint consolidate` "
                  "writes one model.safetensors)"
                : ""));
  }
  absl::StatusOr<FileDigest> d = HashFile(path);
  if (!d.ok()) return d.status();
  const int64_t size = files[file]["size"].get<int64_t>();
  const std::string want = files[file]["xxh64"].get<std::string>();
  if (d->size != size)
    return absl::DataLossError(absl::StrCat(path, ": corrupt checkpoint file: ", d->size, " bytes, the manifest says ",
                                            size));
  if (Hex64(d->xxh64) != want)
    return absl::DataLossError(absl::StrCat(path, ": corrupt checkpoint file: XXH64 ", Hex64(d->xxh64),
                                            ", the manifest says ", want));
  return absl::OkStatus();
}

absl::Status WriteManifest(const std::string& dir, int64_t step, int64_t world_size, ParallelMode mode,
                           const nlohmann::json& layout, const std::map<std::string, FileDigest>& digests) {
  nlohmann::json m;
  m["format"] = "longctx-checkpoint-1";
  m["step"] = step;
  m["world_size"] = world_size;
  m["mode"] = ParallelModeName(mode);
  m["layout"] = layout;
  m["checksum"] = "xxh64";
  nlohmann::json fj = nlohmann::json::object();
  for (const auto& [f, d] : digests) fj[f] = {{"size", d.size}, {"xxh64", Hex64(d.xxh64)}};
  m["files"] = fj;
  return WriteFileAtomic(dir + "/manifest.json", m.dump(2) + "\n");
}

}  // namespace longctx
