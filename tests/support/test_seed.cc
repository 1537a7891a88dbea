// Why: the implementation of the per-run test seed (test_seed.h).
#include "tests/support/test_seed.h"

#include <cstdio>
#include <cstdlib>
#include <random>

#include "absl/strings/numbers.h"

namespace longctx::test {
namespace {

// splitmix64's finalizer: a bijection on 64 bits that mixes every input bit
// into every output bit.
uint64_t Mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

uint64_t ReadRunSeed() {
  const char* env = std::getenv("LONGCTX_TEST_SEED");
  uint64_t seed = 0;
  if (env != nullptr) {
    if (!absl::SimpleAtoi(env, &seed)) {
      std::fprintf(stderr, "LONGCTX_TEST_SEED=\"%s\": not a decimal integer (0 gives the tests' fixed seeds)\n", env);
      std::abort();
    }
  } else {
    std::random_device device;
    seed = (static_cast<uint64_t>(device()) << 32 | device()) | 1;  // never 0: 0 means the fixed seeds
  }
  std::printf("[test seed] LONGCTX_TEST_SEED=%llu reproduces this process's random inputs%s\n",
              static_cast<unsigned long long>(seed), seed == 0 ? " (the fixed seeds)" : "");
  std::fflush(stdout);
  return seed;
}

}  // namespace

uint64_t RunSeed() {
  static const uint64_t seed = ReadRunSeed();
  return seed;
}

uint32_t FreshSeed(uint64_t base) {
  const uint64_t run = RunSeed();
  if (run == 0) return static_cast<uint32_t>(base);
  return static_cast<uint32_t>(Mix(base ^ Mix(run)) >> 32);
}

}  // namespace longctx::test
