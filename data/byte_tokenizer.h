// Why: a byte-level vocabulary needs no external files, round-trips any input
// exactly and is what the tiny CPU experiments use (SPECS.md, "What tiny models
// on 2 CPU cores can ... learn"). Ids 0..255 are the bytes themselves.
#ifndef LONGCTX_DATA_BYTE_TOKENIZER_H_
#define LONGCTX_DATA_BYTE_TOKENIZER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/types/span.h"
#include "data/tokenizer.h"

namespace longctx {

// ids 0..255 = bytes, 256 = <bos>, 257 = <eos>, 258 = <pad>, 259 = <unk>
// (reserved, never produced by Encode); vocab_size 260.
//
// Decode: by default special ids (256..259) and ids outside [0, 260) are
// dropped, so Decode(Encode(s)) == s for every byte string s. With
// render_specials = true they are rendered as "<bos>", "<eos>", "<pad>",
// "<unk>" (and "<id:N>" for out-of-range ids), which is what sample dumps want.
class ByteTokenizer final : public Tokenizer {
 public:
  static constexpr int32_t kBos = 256;
  static constexpr int32_t kEos = 257;
  static constexpr int32_t kPad = 258;
  static constexpr int32_t kUnk = 259;
  static constexpr int32_t kVocabSize = 260;

  explicit ByteTokenizer(bool render_specials = false) : render_specials_(render_specials) {}

  std::vector<int32_t> Encode(std::string_view text) const override;
  std::string Decode(absl::Span<const int32_t> ids) const override;
  int32_t vocab_size() const override { return kVocabSize; }
  int32_t bos_id() const override { return kBos; }
  int32_t eos_id() const override { return kEos; }
  int32_t pad_id() const override { return kPad; }
  std::string name() const override { return "byte"; }

 private:
  bool render_specials_;
};

}  // namespace longctx

#endif  // LONGCTX_DATA_BYTE_TOKENIZER_H_
