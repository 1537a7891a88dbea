// Throwaway: amx::DotProduct in cache, 1 thread, against the oneDNN bf16 peak
// measured in the same process (2048^3, best of 15) — is the micro-kernel or the
// attention around it what this VM loses?
#include <chrono>
#include <cstdio>
#include <vector>
#include <random>
#include <algorithm>
#include <cstdint>
#include "kernels/cpu/amx_bf16.h"
using namespace longctx;
int main() {
  std::mt19937 rng(1);
  auto run = [&](int mt, int nt, int kp, int reps) {
    std::vector<uint32_t> a(mt * kp), b(kp * nt);
    for (auto& x : a) x = 0x3f803f80u ^ (rng() & 0x007f007fu);
    for (auto& x : b) x = 0x3f803f80u ^ (rng() & 0x007f007fu);
    std::vector<float> c(mt * nt);
    double best = 1e30;
    for (int round = 0; round < 7; ++round) {
      auto t0 = std::chrono::steady_clock::now();
      for (int r = 0; r < reps; ++r) cpu::amx::DotProduct(mt, nt, kp, a.data(), kp, b.data(), nt, c.data(), nt, r > 0);
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    const double flops = 4.0 * mt * nt * kp * reps;  // 2 per pair element x 2
    std::printf("DotProduct %4d x %4d x %4d pairs: %.1f GFLOP/s\n", mt, nt, kp, flops / best / 1e9);
  };
  for (int i = 0; i < 2; ++i) {
    run(64, 64, 32, 20000);
    run(64, 128, 32, 10000);
    run(128, 64, 32, 10000);
    run(64, 64, 64, 10000);
    run(384, 256, 256, 100);
  }
}
