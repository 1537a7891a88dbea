// Why: see unicode_classes.h. ASCII is answered from a table (most input is
// ASCII); everything else asks ICU for the general category.
#include "data/unicode_classes.h"

#include <array>
#include <string>

#include <unicode/uchar.h>

namespace longctx {
namespace {

constexpr std::array<uint8_t, 128> MakeAsciiTable() {
  std::array<uint8_t, 128> t{};
  for (int c = 'a'; c <= 'z'; ++c) t[c] = kCharLetter;
  for (int c = 'A'; c <= 'Z'; ++c) t[c] = kCharLetter;
  for (int c = '0'; c <= '9'; ++c) t[c] = kCharNumber;
  for (int c : {'\t', '\n', '\v', '\f', '\r', ' '}) t[c] = kCharSpace;
  t['\r'] |= kCharCrLf;
  t['\n'] |= kCharCrLf;
  return t;
}
constexpr std::array<uint8_t, 128> kAscii = MakeAsciiTable();

bool IsJsSpace(char32_t cp) {
  switch (cp) {
    case 0x00A0: case 0x1680: case 0x2028: case 0x2029: case 0x202F:
    case 0x205F: case 0x3000: case 0xFEFF:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

}  // namespace

int DecodeUtf8(std::string_view s, size_t i, char32_t* cp) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) {
    *cp = b0;
    return 1;
  }
  int len;
  char32_t v;
  char32_t min;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    len = 2, v = b0 & 0x1F, min = 0x80;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    len = 3, v = b0 & 0x0F, min = 0x800;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    len = 4, v = b0 & 0x07, min = 0x10000;
  } else {
    *cp = kInvalidCodePoint;
    return 1;
  }
  if (i + len > s.size()) {
    *cp = kInvalidCodePoint;
    return 1;
  }
  for (int k = 1; k < len; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xC0) != 0x80) {
      *cp = kInvalidCodePoint;
      return 1;
    }
    v = (v << 6) | (b & 0x3F);
  }
  if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) {
    *cp = kInvalidCodePoint;
    return 1;
  }
  *cp = v;
  return len;
}

void AppendUtf8(char32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

uint8_t CharClasses(char32_t cp) {
  if (cp < 0x80) return kAscii[cp];
  if (cp > 0x10FFFF) return 0;
  if (IsJsSpace(cp)) return kCharSpace;
  const uint32_t mask = U_GET_GC_MASK(static_cast<UChar32>(cp));
  if (mask & U_GC_L_MASK) return kCharLetter;
  if (mask & U_GC_N_MASK) return kCharNumber;
  return 0;
}

}  // namespace longctx
