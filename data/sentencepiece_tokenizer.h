// Why: TinyLlama-1.1B (the SPECS.md baseline) uses the 32,000-id Llama-2
// SentencePiece BPE vocabulary; its pretraining data must be tokenized exactly
// as that tokenizer does. This implements SentencePiece BPE encoding with a
// dummy prefix and byte fallback from a JSON list of pieces with scores
// (scripts/convert_tokenizers.mjs writes one from the llama-tokenizer-js npm
// package).
#ifndef LONGCTX_DATA_SENTENCEPIECE_TOKENIZER_H_
#define LONGCTX_DATA_SENTENCEPIECE_TOKENIZER_H_

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

// The file ({"format": "longctx-sentencepiece-bpe", "version": 1, ...}):
//   "pieces": [{"piece": "<unk>", "score": 0, "type": "unknown"}, ...] in id
//   order; types "normal", "unknown" (exactly one), "control", "byte" (the 256
//   pieces "<0x00>".."<0xFF>"); "add_dummy_prefix", "byte_fallback" (must be
//   true), "bos_id", "eos_id", optional "pad_id" (default: the unknown id).
//
// Merges come from the scores as Hugging Face derives them from a SentencePiece
// model: every split l + r (at a code point boundary) of every normal piece of
// two or more code points with both halves in the vocabulary, ranked by the
// piece's score (higher first), then by the id of l, then the id of r.
//
// Encode: empty text → no ids. Otherwise (as llama-tokenizer-js and the HF
// Llama-2 tokenizer do) a space is prepended (add_dummy_prefix), every ' ' becomes
// "▁", each character becomes its piece or, when no piece is that character,
// the byte pieces of its UTF-8 bytes; then adjacent symbols are merged by rank
// (leftmost first among equal ranks) over the whole text — SentencePiece has no
// pre-tokenizer (we merge word by word only where that provably gives the same
// result, see split_before_space_). No BOS/EOS. Bytes that are not valid UTF-8 become their byte
// pieces. Note: SentencePiece's own C++ encoder breaks ties between different
// merges yielding the same piece by position instead of by (id l, id r); the
// two can differ on runs like "▁▁▁▁▁"; we follow the merge-rank rule of the
// reference encoder and of Hugging Face.
// Decode: normal pieces with "▁" → ' ', byte pieces → their byte, unknown and
// control ids and ids outside the vocabulary are skipped; one leading ' ' is
// removed when add_dummy_prefix is set. Decode(Encode(s)) == s for every s
// that has no "▁" (U+2581) of its own, which decodes as ' ' (as in SentencePiece).
class SentencePieceTokenizer final : public Tokenizer {
 public:
  static absl::StatusOr<std::unique_ptr<SentencePieceTokenizer>> FromJson(const nlohmann::json& j, std::string name);
  static absl::StatusOr<std::unique_ptr<SentencePieceTokenizer>> FromFile(const std::string& path, std::string name);

  std::vector<int32_t> Encode(std::string_view text) const override;
  std::string Decode(absl::Span<const int32_t> ids) const override;
  int32_t vocab_size() const override { return static_cast<int32_t>(pieces_.size()); }
  int32_t bos_id() const override { return bos_; }
  int32_t eos_id() const override { return eos_; }
  int32_t pad_id() const override { return pad_; }
  std::string name() const override { return name_; }

  // The id of a piece (as written in the vocabulary, e.g. "▁the"), or -1.
  int32_t PieceId(std::string_view piece) const;
  int64_t num_merges() const { return merges_.size(); }

 private:
  enum class Type : uint8_t { kNormal, kUnknown, kControl, kByte };
  SentencePieceTokenizer() = default;

  std::string name_;
  std::vector<std::string> pieces_;
  std::vector<Type> types_;
  absl::flat_hash_map<std::string, int32_t> piece_ids_;
  absl::flat_hash_map<char32_t, int32_t> char_ids_;  // one-character pieces
  std::array<int32_t, 256> byte_ids_{};
  std::vector<uint8_t> byte_values_;  // id → byte, for byte pieces
  int32_t space_id_ = -1;  // the piece "▁"
  // True when no normal piece has a "▁" right after another character (true
  // for Llama-2): then no merge can join a character with a following "▁", so
  // the text is merged word by word (same result, ~10x faster).
  bool split_before_space_ = false;
  int32_t bos_ = -1, eos_ = -1, pad_ = -1;
  bool add_dummy_prefix_ = true;
  BpeMerges merges_;
};

}  // namespace longctx

#endif  // LONGCTX_DATA_SENTENCEPIECE_TOKENIZER_H_
