// Why: the Llama-3 pre-tokenizer regex needs \p{L}, \p{N} and \s, and no C++
// regex library implements those (plus the lookahead) reliably, so the matcher
// in llama3_pretokenizer.cc is written by hand over these classes. Letters and
// numbers come from ICU's general categories at run time (libicu-dev; Debian 12
// ships ICU 72 = Unicode 15.0); \s is the fixed ECMAScript set because the
// reference encoder (llama3-tokenizer-js) runs that regex in JavaScript.
#ifndef LONGCTX_DATA_UNICODE_CLASSES_H_
#define LONGCTX_DATA_UNICODE_CLASSES_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace longctx {

// Returned by DecodeUtf8 for a byte that does not start a valid UTF-8 sequence
// (bad lead byte, truncated or overlong sequence, surrogate, > U+10FFFF).
inline constexpr char32_t kInvalidCodePoint = 0xFFFFFFFF;

// Decodes the code point starting at s[i] (i < s.size()): returns its length
// in bytes (1..4) and stores it in *cp; an invalid sequence yields length 1 and
// kInvalidCodePoint, so every byte of any input is consumed exactly once.
int DecodeUtf8(std::string_view s, size_t i, char32_t* cp);

// Appends the UTF-8 encoding of cp (<= U+10FFFF, not a surrogate) to *out.
void AppendUtf8(char32_t cp, std::string* out);

// Character classes of the Llama-3 pre-tokenizer, as bit flags.
enum CharClassBits : uint8_t {
  kCharLetter = 1,  // \p{L}: general category Lu, Ll, Lt, Lm or Lo
  kCharNumber = 2,  // \p{N}: Nd, Nl or No
  kCharSpace = 4,   // \s as ECMAScript defines it: TAB, LF, VT, FF, CR, SPACE,
                    // U+00A0, U+1680, U+2000..U+200A, U+2028, U+2029, U+202F,
                    // U+205F, U+3000, U+FEFF
  kCharCrLf = 8,    // '\r' or '\n' (also has kCharSpace)
};

// The classes of cp; kInvalidCodePoint and unassigned code points get 0.
uint8_t CharClasses(char32_t cp);

}  // namespace longctx

#endif  // LONGCTX_DATA_UNICODE_CLASSES_H_
