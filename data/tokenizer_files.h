// Why: the Llama vocabularies are not in the repository (scripts/setup.sh
// fetches and converts them into <repo>/.cache/tokenizers), so MakeTokenizer,
// the tests and the tools need one agreed way to find those files and one
// message telling the user how to get them.
#ifndef LONGCTX_DATA_TOKENIZER_FILES_H_
#define LONGCTX_DATA_TOKENIZER_FILES_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"

namespace longctx {

// Directories searched for converted vocabularies, in order:
//   1. $LONGCTX_TOKENIZER_DIR, when set (then only this one);
//   2. P/share/longctx/tokenizers of an installed P/bin/longctx (cmake
//      --install copies .cache/tokenizers there; base/install_layout.h);
//   3. D/.cache/tokenizers for D = the directory of the running executable and
//      each of its ancestors (a build tree inside the repository finds
//      <repo>/.cache/tokenizers);
//   4. D/.cache/tokenizers for D = the current directory and its ancestors.
std::vector<std::string> TokenizerSearchDirs();

// The path of "<name>.json" (e.g. "llama3" → .../.cache/tokenizers/llama3.json)
// in the first search directory that has it; NotFound naming the directories
// searched and telling the user to run scripts/setup.sh otherwise.
absl::StatusOr<std::string> FindTokenizerFile(std::string_view name);

// Reads and parses a JSON file (NotFound / InvalidArgument with the path).
// Not a regular file, or longer than kMaxJsonFileBytes: InvalidArgument.
inline constexpr uint64_t kMaxJsonFileBytes = uint64_t{1} << 30;
absl::StatusOr<nlohmann::json> ReadJsonFile(const std::string& path);

}  // namespace longctx

#endif  // LONGCTX_DATA_TOKENIZER_FILES_H_
