// Why: Llama-3 splits text into "pretokens" with one regex before BPE, and the
// split decides the ids as much as the merges do. No regex engine available to
// us handles \p{L}/\p{N} and the lookahead, so this is a hand-written matcher
// for exactly that pattern, with the semantics of a backtracking engine
// (alternatives tried in order, leftmost match first) as used by the reference
// encoders.
#ifndef LONGCTX_DATA_LLAMA3_PRETOKENIZER_H_
#define LONGCTX_DATA_LLAMA3_PRETOKENIZER_H_

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace longctx {

// The pattern, as it appears in Meta's tokenizer.json (Split, Isolated):
inline constexpr std::string_view kLlama3SplitRegex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// Splits text into consecutive non-empty pieces whose concatenation is text.
// Classes: see unicode_classes.h (\s is ECMAScript's; the contraction group is
// ASCII-case-insensitive, i.e. 's 'S 't 'T 're 'RE 'rE 'Re ... ). A byte that
// is not valid UTF-8 counts as one character of none of the classes.
// The string end counts as "end of input" for \s+(?!\S); callers that split
// text around special tokens call this once per segment, as the reference does.
std::vector<std::string_view> SplitLlama3(std::string_view text);

// The same split, one piece at a time, without per-character buffers (for long
// documents): while (splitter.Next(&piece)) ...
class Llama3Splitter {
 public:
  explicit Llama3Splitter(std::string_view text) : text_(text) {}
  // The next piece, or false at the end of the text.
  bool Next(std::string_view* piece);

 private:
  struct Char {
    char32_t cp;
    uint8_t cls;  // CharClassBits
    uint32_t len;
  };
  Char At(size_t pos) const;  // the character starting at byte pos < size

  std::string_view text_;
  size_t pos_ = 0;
};

}  // namespace longctx

#endif  // LONGCTX_DATA_LLAMA3_PRETOKENIZER_H_
