// Why: the packed bf16 attention's tile products ran at 2-3x the time their
// tile products (TDPBF16PS) alone would take, and the tile unit's time did not
// hide the vector passes'. This measures, on the machine it runs on, what each
// tile-unit operation costs and what overlaps with what, so the attention's
// loops can be shaped by it (docs/BENCHMARKS.md, issue 16, session of 03:31
// UTC 2026-11-29). Not part of the build; a throwaway-style measurement kept
// with its figures:
//   g++ -O2 -march=sapphirerapids amx_tile_costs.cc -o amx_tile_costs && ./amx_tile_costs
// Each figure is the best of many rounds spread round-robin over ~10 s per
// group: the VM's tile unit runs at about a third of its speed for seconds at
// a time (another tenant's load), and the best round is the unshared speed.
// amx_product below is a copy of amx::Product (kernels/cpu/attention_tiles_avx512bf16.cc)
// so the products are timed on the loop the attention runs.
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

namespace {

struct RoundRobin {
  struct Test {
    std::string name;
    std::function<void()> run;
    double per;  // operations per run: the figure is ns per operation
    double best = 1e30;
  };
  std::vector<Test> tests;
  void Add(std::string name, std::function<void()> run, double per) { tests.push_back({name, run, per}); }
  void Run(const char* title, double seconds) {
    const auto start = std::chrono::steady_clock::now();
    while (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < seconds)
      for (Test& t : tests)
        for (int r = 0; r < 5; ++r) {
          const auto t0 = std::chrono::steady_clock::now();
          t.run();
          t.best = std::min(t.best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        }
    std::printf("%s\n", title);
    for (const Test& t : tests) std::printf("  %-46s %8.2f ns\n", t.name.c_str(), t.best / t.per * 1e9);
    tests.clear();
  }
};

struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};
TileConfig config;

void amx_product(int mt, int nt, int kp, const uint32_t* a, int a_ld, const uint32_t* b, int b_ld, float* c, int ldc,
                 bool accumulate) {
  const int a_stride = a_ld * 4, b_stride = b_ld * 4, c_stride = ldc * 4;
  for (int i0 = 0; i0 < mt; i0 += 32) {
    const bool two_rows = i0 + 16 < mt;
    for (int j0 = 0; j0 < nt; j0 += 32) {
      const bool two_cols = j0 + 16 < nt;
      float* c00 = c + i0 * ldc + j0;
      float* c01 = c00 + 16;
      float* c10 = c00 + 16 * ldc;
      float* c11 = c10 + 16;
      if (accumulate) {
        _tile_loadd(0, c00, c_stride);
        if (two_cols) _tile_loadd(1, c01, c_stride);
        if (two_rows) _tile_loadd(2, c10, c_stride);
        if (two_rows && two_cols) _tile_loadd(3, c11, c_stride);
      } else {
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
      }
      for (int p0 = 0; p0 < kp; p0 += 16) {
        const uint32_t* a0 = a + i0 * a_ld + p0;
        const uint32_t* b0 = b + p0 * b_ld + j0;
        _tile_loadd(4, a0, a_stride);
        _tile_loadd(6, b0, b_stride);
        _tile_dpbf16ps(0, 4, 6);
        if (two_cols) {
          _tile_loadd(7, b0 + 16, b_stride);
          _tile_dpbf16ps(1, 4, 7);
        }
        if (two_rows) {
          _tile_loadd(5, a0 + 16 * a_ld, a_stride);
          _tile_dpbf16ps(2, 5, 6);
          if (two_cols) _tile_dpbf16ps(3, 5, 7);
        }
      }
      _tile_stored(0, c00, c_stride);
      if (two_cols) _tile_stored(1, c01, c_stride);
      if (two_rows) _tile_stored(2, c10, c_stride);
      if (two_rows && two_cols) _tile_stored(3, c11, c_stride);
    }
  }
}

// A vector pass of the softmax passes' kind on 16 floats per step: load, one
// op, a degree-4 polynomial, one op, store; kind 3 ends in vcvtne2ps2bf16.
alignas(64) float vx[64 * 128], vy[64 * 128];
template <int kKind>
void VectorPass(int from, int n) {
  for (int i = from; i < from + n; ++i) {
    const __m512 x = _mm512_load_ps(vx + 16 * (i & 511));
    const __m512 f = kKind == 1 ? _mm512_reduce_ps(x, 1) : _mm512_mul_ps(x, x);
    __m512 y = _mm512_fmadd_ps(f, _mm512_set1_ps(0.1f), _mm512_set1_ps(0.2f));
    y = _mm512_fmadd_ps(y, f, _mm512_set1_ps(0.3f));
    y = _mm512_fmadd_ps(y, f, _mm512_set1_ps(0.4f));
    y = _mm512_fmadd_ps(y, f, _mm512_set1_ps(0.5f));
    y = kKind == 2 ? _mm512_scalef_ps(y, x) : _mm512_add_ps(y, x);
    if (kKind == 3)
      _mm512_store_si512(vy + 16 * (i & 511), (__m512i)_mm512_cvtne2ps_pbh(y, x));
    else
      _mm512_store_ps(vy + 16 * (i & 511), y);
  }
}

// Products into C tiles 0-3 (A tiles 4, 5; B tiles 6, 7), and stores of C
// tiles 0-3 to four consecutive 1 KiB tiles at f.
inline void FourProducts() {
  _tile_dpbf16ps(0, 4, 6);
  _tile_dpbf16ps(1, 4, 7);
  _tile_dpbf16ps(2, 5, 6);
  _tile_dpbf16ps(3, 5, 7);
}
inline void StoreFour(float* f) {
  _tile_stored(0, f, 64);
  _tile_stored(1, f + 256, 64);
  _tile_stored(2, f + 512, 64);
  _tile_stored(3, f + 768, 64);
}

alignas(64) uint32_t scratch[64 * 1024];
// Operands at the attention backward's sizes and strides (kernels/cpu/attention_packed_bf16.cc):
// Q, dO rows of a 1,792-row ring, Kᵀ, Vᵀ of a 128-key block, dS rows, K pairs,
// dOᵀ as rows of query pairs (row stride 1,040 pairs), P pairs of up to 8 tiles.
alignas(64) uint32_t q_rows[1792 * 32], kt[32 * 128], ds_rows[64 * 64], k_pairs[64 * 64],
    do_t[64 * 1040 + 1024], p_pairs[256 * 128];
alignas(64) float s_out[64 * 128], dq[1792 * 64], dv_t[64 * 128];

}  // namespace

int main() {
  if (syscall(SYS_arch_prctl, 0x1023, 18) != 0) {
    std::printf("no AMX tile state granted\n");
    return 1;
  }
  for (int t = 0; t < 8; ++t) {
    config.rows[t] = 16;
    config.colsb[t] = 64;
  }
  _tile_loadconfig(&config);
  for (uint32_t* p : {scratch, q_rows, kt, ds_rows, k_pairs, do_t, p_pairs}) (void)p;
  std::fill(std::begin(scratch), std::end(scratch), 0x3c003c00u);
  std::fill(std::begin(q_rows), std::end(q_rows), 0x3c003c00u);
  std::fill(std::begin(kt), std::end(kt), 0x3c003c00u);
  std::fill(std::begin(ds_rows), std::end(ds_rows), 0x3c003c00u);
  std::fill(std::begin(k_pairs), std::end(k_pairs), 0x3c003c00u);
  std::fill(std::begin(do_t), std::end(do_t), 0x3c003c00u);
  std::fill(std::begin(p_pairs), std::end(p_pairs), 0x3c003c00u);
  for (int i = 0; i < 64 * 128; ++i) vx[i] = -0.01f * static_cast<float>(i % 100);
  uint32_t* const a = scratch;
  float* const f = reinterpret_cast<float*>(scratch);
  constexpr int kN = 200;

  RoundRobin rr;
  rr.Add("tdpbf16ps, 4 independent C tiles", [] {
    for (int i = 0; i < kN; ++i) FourProducts();
  }, 4 * kN);
  rr.Add("tdpbf16ps, one C tile (a chain)", [] {
    for (int i = 0; i < kN; ++i) _tile_dpbf16ps(0, 4, 6);
  }, kN);
  rr.Add("tileloadd from L1", [a] {
    for (int i = 0; i < kN; ++i) {
      _tile_loadd(4, a, 64);
      _tile_loadd(5, a + 256, 64);
      _tile_loadd(6, a + 512, 64);
      _tile_loadd(7, a + 768, 64);
    }
  }, 4 * kN);
  rr.Add("tilestored to L1", [f] {
    for (int i = 0; i < kN; ++i) StoreFour(f);
  }, 4 * kN);
  rr.Add("8 tdpbf16ps + 4 tilestored, per tdpbf16ps", [f] {
    for (int i = 0; i < kN; ++i) {
      FourProducts();
      FourProducts();
      StoreFour(f);
    }
  }, 8 * kN);
  rr.Add("2x2 block, 2 k-steps, A/B loads, stores, per tdp", [a, f] {
    for (int i = 0; i < kN; ++i) {
      _tile_zero(0);
      _tile_zero(1);
      _tile_zero(2);
      _tile_zero(3);
      for (int k = 0; k < 2; ++k) {
        _tile_loadd(4, a + 4096, 64);
        _tile_loadd(6, a + 8192, 64);
        _tile_dpbf16ps(0, 4, 6);
        _tile_loadd(7, a + 8192 + 256, 64);
        _tile_dpbf16ps(1, 4, 7);
        _tile_loadd(5, a + 4096 + 256, 64);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
      }
      _tile_stored(0, f, 64);
      _tile_stored(1, f + 256, 64);
      _tile_stored(2, f + 512, 64);
      _tile_stored(3, f + 768, 64);
    }
  }, 8 * kN);
  rr.Run("tile-unit operations (ns each)", 10);

  constexpr int kB = 64, kV = 64;  // blocks of 8 tdpbf16ps; 16-float vectors per block
  auto tdp8 = [] {
    for (int k = 0; k < 2; ++k) {
      _tile_dpbf16ps(0, 4, 6);
      _tile_dpbf16ps(1, 4, 7);
      _tile_dpbf16ps(2, 5, 6);
      _tile_dpbf16ps(3, 5, 7);
    }
  };
  rr.Add("8 tdpbf16ps alone", [tdp8] { for (int b = 0; b < kB; ++b) tdp8(); }, kB);
  rr.Add("vector pass (mul, 4 fma, add) alone", [] { for (int b = 0; b < kB; ++b) VectorPass<0>(b * kV, kV); }, kB);
  rr.Add("  both, interleaved", [tdp8] { for (int b = 0; b < kB; ++b) { tdp8(); VectorPass<0>(b * kV, kV); } }, kB);
  rr.Add("vector pass with vreduceps alone", [] { for (int b = 0; b < kB; ++b) VectorPass<1>(b * kV, kV); }, kB);
  rr.Add("  both, interleaved", [tdp8] { for (int b = 0; b < kB; ++b) { tdp8(); VectorPass<1>(b * kV, kV); } }, kB);
  rr.Add("vector pass with vscalefps alone", [] { for (int b = 0; b < kB; ++b) VectorPass<2>(b * kV, kV); }, kB);
  rr.Add("  both, interleaved", [tdp8] { for (int b = 0; b < kB; ++b) { tdp8(); VectorPass<2>(b * kV, kV); } }, kB);
  rr.Add("vector pass with vcvtne2ps2bf16 alone", [] { for (int b = 0; b < kB; ++b) VectorPass<3>(b * kV, kV); }, kB);
  rr.Add("  both, interleaved", [tdp8] { for (int b = 0; b < kB; ++b) { tdp8(); VectorPass<3>(b * kV, kV); } }, kB);
  rr.Run("overlap of the tile unit with vector work (ns per block of 8 tdpbf16ps and/or 64 vectors)", 12);

  rr.Add("S = Qs K^T: 64 x 128, 2 k-steps", [] { amx_product(64, 128, 32, q_rows, 32, kt, 128, s_out, 128, false); }, 64);
  rr.Add("dQ += dS K: 64 x 64, 4 k-steps", [] { amx_product(64, 64, 64, ds_rows, 64, k_pairs, 64, dq, 64, true); }, 64);
  for (int tiles : {1, 2, 4, 8})
    rr.Add("dV^T += dO^T P: 64 x 128, " + std::to_string(2 * tiles) + " k-steps (" + std::to_string(tiles) + " tiles)",
           [tiles] { amx_product(64, 128, 32 * tiles, do_t, 1040, p_pairs, 128, dv_t, 128, true); }, 32 * 2 * tiles);
  rr.Run("amx::Product at the backward's shapes (ns per tdpbf16ps)", 12);
  return 0;
}
