// Why: an exported checkpoint is only usable with its tokenizer, and
// transformers' AutoTokenizer reads tokenizer.json (the `tokenizers` library's
// format) plus tokenizer_config.json (special tokens, chat template). longctx
// keeps the Llama vocabularies in .cache/tokenizers/ (data/tokenizer_files.h):
// llama3.json is already a tokenizer.json (byte-level BPE) and is copied with
// Meta's BOS post-processor added; llama2.json is a SentencePiece-BPE piece
// list, converted the way transformers' LlamaConverter does (vocab = pieces,
// merges = every split of a piece into two pieces, ordered by the piece's
// score, byte fallback, "▁" normalizer, matching decoder).
#ifndef LONGCTX_TRAIN_CONVERT_HF_TOKENIZER_FILES_H_
#define LONGCTX_TRAIN_CONVERT_HF_TOKENIZER_FILES_H_

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"

namespace longctx {

// Writes tokenizer.json, tokenizer_config.json and special_tokens_map.json
// into out_dir for tokenizer "llama3" or "llama2"; returns the file names.
// Any other tokenizer (byte, a path) has no Hugging Face counterpart: returns
// an empty list (the export says so).
absl::StatusOr<std::vector<std::string>> WriteHfTokenizerFiles(const std::string& tokenizer, int model_max_length,
                                                              const std::string& out_dir);

// The tokenizer.json of the llama2 vocabulary (SentencePiece BPE -> HF BPE).
nlohmann::json Llama2TokenizerJson(const nlohmann::json& pieces_file);

}  // namespace longctx

#endif  // LONGCTX_TRAIN_CONVERT_HF_TOKENIZER_FILES_H_
