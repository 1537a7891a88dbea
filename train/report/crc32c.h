// Why: TFRecord framing (TensorBoard event files) protects every length and
// payload with a masked CRC32C (Castagnoli). Debian 12's Abseil (20220623) has
// no absl/crc, and a one-table software CRC is ~30 lines and fast enough for
// metrics (a few KB per step), so longctx carries its own, tested against the
// RFC 3720 vectors.
#ifndef LONGCTX_TRAIN_REPORT_CRC32C_H_
#define LONGCTX_TRAIN_REPORT_CRC32C_H_

#include <cstdint>
#include <string_view>

namespace longctx {

// CRC-32C (reflected polynomial 0x82F63B78, init and final xor 0xFFFFFFFF);
// Crc32c("123456789") == 0xE3069283. `crc` continues a previous result.
uint32_t Crc32c(std::string_view data, uint32_t crc = 0);

// TFRecord's masked CRC: rotate right by 15 bits, plus 0xa282ead8.
inline uint32_t MaskCrc32c(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }
inline uint32_t UnmaskCrc32c(uint32_t masked) {
  const uint32_t rot = masked - 0xa282ead8u;
  return (rot >> 17) | (rot << 15);
}

}  // namespace longctx

#endif  // LONGCTX_TRAIN_REPORT_CRC32C_H_
