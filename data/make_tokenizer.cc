// Why: the tokenizer factory in its own file, as launch/make_communicator.cc
// is for communicators: it is the one file that includes every tokenizer
// (byte, Llama-3 BPE, SentencePiece BPE), while each of those includes only
// the interface (tokenizer.h), so the interface and its implementations no
// longer include each other. See make_tokenizer.h.
#include "data/make_tokenizer.h"

#include <filesystem>
#include <memory>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "data/byte_tokenizer.h"
#include "data/llama3_tokenizer.h"
#include "data/sentencepiece_tokenizer.h"
#include "data/tokenizer_files.h"

namespace longctx {
namespace {

namespace fs = std::filesystem;

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
