// Why: see llama3_pretokenizer.h. At each position the seven alternatives of
// the pattern are tried in order, each reduced to what a backtracking engine
// returns for it:
//   1 (?i:'s|'t|'re|'ve|'m|'ll|'d)   apostrophe + one of the suffixes
//   2 [^\r\n\p{L}\p{N}]?\p{L}+       a letter run, optionally led by one
//                                     character that is not CR/LF/letter/number
//   3 \p{N}{1,3}                     one to three numbers
//   4  ?[^\s\p{L}\p{N}]+[\r\n]*       optional ' ', a run of "other", CR/LF run
//   5 \s*[\r\n]+                     whitespace up to and including the last
//                                     CR/LF of the whitespace run
//   6 \s+(?!\S)                      the whitespace run minus its last
//                                     character (all of it at the end of text)
//   7 \s+                            a single whitespace character (what is left)
// Every character is a letter, a number, whitespace or "other", so some
// alternative always matches at least one character: the pieces tile the text.
// Characters are decoded on the fly (ASCII from a table), so memory does not
// grow with the text.
#include "data/llama3_pretokenizer.h"

#include "data/unicode_classes.h"

namespace longctx {
namespace {

constexpr size_t kNone = static_cast<size_t>(-1);

char32_t AsciiLower(char32_t c) { return (c >= 'A' && c <= 'Z') ? c + ('a' - 'A') : c; }

}  // namespace

Llama3Splitter::Char Llama3Splitter::At(size_t pos) const {
  const auto b = static_cast<unsigned char>(text_[pos]);
  if (b < 0x80) return Char{b, CharClasses(b), 1};
  char32_t cp;
  const int len = DecodeUtf8(text_, pos, &cp);
  return Char{cp, CharClasses(cp), static_cast<uint32_t>(len)};
}

bool Llama3Splitter::Next(std::string_view* piece) {
  const size_t n = text_.size();
  const size_t i = pos_;
  if (i >= n) return false;
  auto letter = [](const Char& c) { return (c.cls & kCharLetter) != 0; };
  auto number = [](const Char& c) { return (c.cls & kCharNumber) != 0; };
  auto space = [](const Char& c) { return (c.cls & kCharSpace) != 0; };
  auto crlf = [](const Char& c) { return (c.cls & kCharCrLf) != 0; };
  auto other = [](const Char& c) { return (c.cls & (kCharLetter | kCharNumber | kCharSpace)) == 0; };

  const Char c0 = At(i);
  const size_t i1 = i + c0.len;
  size_t j = kNone;  // end of the match (exclusive byte offset)
  // 1: contractions.
  if (c0.cp == '\'' && i1 < n) {
    const Char c1 = At(i1);
    const char32_t a = AsciiLower(c1.cp);
    const size_t i2 = i1 + c1.len;
    if (a == 's' || a == 't' || a == 'm' || a == 'd') {
      j = i2;
    } else if (i2 < n) {
      const Char c2 = At(i2);
      const char32_t b = AsciiLower(c2.cp);
      if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) j = i2 + c2.len;
    }
  }
  // 2: optional non-CR/LF/letter/number character, then letters.
  if (j == kNone) {
    if (letter(c0)) {
      j = i1;
    } else if (!number(c0) && !crlf(c0) && i1 < n) {
      const Char c1 = At(i1);
      if (letter(c1)) j = i1 + c1.len;
    }
    if (j != kNone) {
      while (j < n) {
        const Char c = At(j);
        if (!letter(c)) break;
        j += c.len;
      }
    }
  }
  // 3: one to three numbers.
  if (j == kNone && number(c0)) {
    j = i1;
    for (int count = 1; count < 3 && j < n; ++count) {
      const Char c = At(j);
      if (!number(c)) break;
      j += c.len;
    }
  }
  // 4: optional space, "other" run, CR/LF run.
  if (j == kNone) {
    if (c0.cp == ' ' && i1 < n) {
      const Char c1 = At(i1);
      if (other(c1)) j = i1 + c1.len;
    }
    if (j == kNone && other(c0)) j = i1;
    if (j != kNone) {
      while (j < n) {
        const Char c = At(j);
        if (!other(c)) break;
        j += c.len;
      }
      while (j < n) {
        const Char c = At(j);
        if (!crlf(c)) break;
        j += c.len;
      }
    }
  }
  // 5-7: c0 is whitespace here.
  if (j == kNone) {
    size_t end = i, last_start = i, after_last_crlf = kNone;
    int count = 0;
    while (end < n) {
      const Char c = At(end);
      if (!space(c)) break;
      last_start = end;
      end += c.len;
      if (crlf(c)) after_last_crlf = end;
      ++count;
    }
    if (after_last_crlf != kNone) {
      j = after_last_crlf;  // 5
    } else if (end == n || count == 1) {
      j = end;  // 6 at the end of the text, or 7 for a single character
    } else {
      j = last_start;  // 6
    }
    if (j <= i) j = i1;  // unreachable: c0 is whitespace, so end > i
  }
  *piece = text_.substr(i, j - i);
  pos_ = j;
  return true;
}

std::vector<std::string_view> SplitLlama3(std::string_view text) {
  std::vector<std::string_view> out;
  Llama3Splitter splitter(text);
  for (std::string_view piece; splitter.Next(&piece);) out.push_back(piece);
  return out;
}

}  // namespace longctx
