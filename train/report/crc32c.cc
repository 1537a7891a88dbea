// Why: see crc32c.h.
#include "train/report/crc32c.h"

#include <array>

namespace longctx {
namespace {

constexpr std::array<uint32_t, 256> MakeTable() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    t[i] = c;
  }
  return t;
}
constexpr std::array<uint32_t, 256> kTable = MakeTable();

}  // namespace

uint32_t Crc32c(std::string_view data, uint32_t crc) {
  uint32_t c = ~crc;
  for (unsigned char b : data) c = kTable[(c ^ b) & 0xFF] ^ (c >> 8);
  return ~c;
}

}  // namespace longctx
