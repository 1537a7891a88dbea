// Why: whether the two vCPUs of the 2-core AMX VM share one tile unit (docs/BENCHMARKS.md,
// issue 16, session of 06:16 UTC 2026-11-29): a loop of independent tile products and one of
// AVX-512 FMAs, first on one pinned thread, then on both at once; ns per instruction.
//   g++ -O2 -march=sapphirerapids -pthread two_cores_tile_loop.cc && ./a.out
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <pthread.h>
#include <sched.h>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdint>
#include <thread>
#include <vector>
struct alignas(64) Cfg { uint8_t p=1, s=0; uint8_t r[14]={}; uint16_t c[16]={}; uint8_t rows[16]={}; };
static Cfg cfg;
double tdp_loop(long n) {  // returns ns per tdp
  _tile_loadconfig(&cfg);
  alignas(64) static thread_local uint8_t buf[16*64*8];
  _tile_loadd(4, buf, 64); _tile_loadd(5, buf, 64); _tile_loadd(6, buf, 64); _tile_loadd(7, buf, 64);
  _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
  auto t0 = std::chrono::steady_clock::now();
  for (long i = 0; i < n; ++i) {
    _tile_dpbf16ps(0, 4, 6); _tile_dpbf16ps(1, 4, 7); _tile_dpbf16ps(2, 5, 6); _tile_dpbf16ps(3, 5, 7);
  }
  auto t1 = std::chrono::steady_clock::now();
  _tile_stored(0, buf, 64);
  return std::chrono::duration<double, std::nano>(t1 - t0).count() / (4.0 * n);
}
double fma_loop(long n) {
  __m512 a[8]; for (int i = 0; i < 8; ++i) a[i] = _mm512_set1_ps(i * 0.001f);
  __m512 b = _mm512_set1_ps(0.999f), c = _mm512_set1_ps(0.0001f);
  auto t0 = std::chrono::steady_clock::now();
  for (long i = 0; i < n; ++i) {
    for (int k = 0; k < 8; ++k) { a[k] = _mm512_fmadd_ps(a[k], b, c); }
    __asm__ volatile("" : "+v"(a[0]), "+v"(a[1]), "+v"(a[2]), "+v"(a[3]), "+v"(a[4]), "+v"(a[5]), "+v"(a[6]), "+v"(a[7]));
  }
  auto t1 = std::chrono::steady_clock::now();
  float s = 0; for (int k = 0; k < 8; ++k) s += _mm512_reduce_add_ps(a[k]);
  if (s == 12345) puts("");
  return std::chrono::duration<double, std::nano>(t1 - t0).count() / (8.0 * n);
}
void pin(int cpu) { cpu_set_t s; CPU_ZERO(&s); CPU_SET(cpu, &s); pthread_setaffinity_np(pthread_self(), sizeof s, &s); }
int main() {
  syscall(SYS_arch_prctl, 0x1023, 18);
  for (int t = 0; t < 8; ++t) { cfg.rows[t] = 16; cfg.c[t] = 64; }
  for (int round = 0; round < 6; ++round) {
    double one_t, two_t[2], one_f, two_f[2];
    { std::thread th([&] { pin(0); one_t = tdp_loop(2000000); }); th.join(); }
    { std::vector<std::thread> v; for (int i = 0; i < 2; ++i) v.emplace_back([&, i] { pin(i); two_t[i] = tdp_loop(2000000); }); for (auto& x : v) x.join(); }
    { std::thread th([&] { pin(0); one_f = fma_loop(20000000); }); th.join(); }
    { std::vector<std::thread> v; for (int i = 0; i < 2; ++i) v.emplace_back([&, i] { pin(i); two_f[i] = fma_loop(20000000); }); for (auto& x : v) x.join(); }
    printf("tdp ns: 1 thread %.2f | 2 threads %.2f %.2f    fma ns/vec: 1 thread %.3f | 2 threads %.3f %.3f\n", one_t, two_t[0], two_t[1], one_f, two_f[0], two_f[1]);
  }
}
