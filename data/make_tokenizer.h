// Why: callers that turn a spec string (DataConfig.tokenizer, --tokenizer)
// into a tokenizer need every implementation; code that only uses a Tokenizer
// needs the interface (tokenizer.h) alone. The factory is its own header so
// the interface never includes its implementations.
#ifndef LONGCTX_DATA_MAKE_TOKENIZER_H_
#define LONGCTX_DATA_MAKE_TOKENIZER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "data/tokenizer.h"

namespace longctx {

// Builds a tokenizer from a spec string (DataConfig.tokenizer):
//   "byte"    ByteTokenizer
//   "llama3"  Llama-3 (128,256 ids) from llama3.json, "llama2" Llama-2 (32,000
//             ids) from llama2.json, found as tokenizer_files.h describes
//             ($LONGCTX_TOKENIZER_DIR, else <repo>/.cache/tokenizers, which
//             scripts/setup.sh fills); missing → NotFound saying so
//   a path    (contains '/', ends in ".json" or names a file) a Hugging Face
//             tokenizer.json (byte-level BPE with the Llama-3 pre-tokenizer) or
//             a longctx-sentencepiece-bpe JSON; name() is "json:<absolute path>"
// Anything else → InvalidArgument listing the known names.
absl::StatusOr<std::unique_ptr<Tokenizer>> MakeTokenizer(const std::string& spec);

// The spec names MakeTokenizer understands, for help texts and errors.
std::vector<std::string> KnownTokenizerNames();

}  // namespace longctx

#endif  // LONGCTX_DATA_MAKE_TOKENIZER_H_
