// Why: data order and synthetic samples must not change with the standard
// library or Abseil version, so longctx carries its own small generator:
// SplitMix64 (Steele, Lea, Flood 2014) with Lemire's unbiased bounded draw.
#ifndef LONGCTX_DATA_SPLITMIX64_H_
#define LONGCTX_DATA_SPLITMIX64_H_

#include <cstdint>

namespace longctx {

// The SplitMix64 finaliser: a strong 64-bit mixer (for deriving seeds).
inline uint64_t Mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, range), range >= 1 (Lemire's multiply-shift with rejection).
  uint64_t Below(uint64_t range) {
    unsigned __int128 m = static_cast<unsigned __int128>(Next()) * range;
    uint64_t low = static_cast<uint64_t>(m);
    if (low < range) {
      const uint64_t threshold = (0 - range) % range;
      while (low < threshold) {
        m = static_cast<unsigned __int128>(Next()) * range;
        low = static_cast<uint64_t>(m);
      }
    }
    return static_cast<uint64_t>(m >> 64);
  }

 private:
  uint64_t state_;
};

}  // namespace longctx

#endif  // LONGCTX_DATA_SPLITMIX64_H_
