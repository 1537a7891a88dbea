// Why: the bf16 tile products pack their fp32 operands into k-pairs before the
// product, and A arrives in two orientations (rows of A, or Aᵀ stored — the
// attention backward's Pᵀ dO and dSᵀ Q, the forward's P V) or, in general, at
// any strides. The AMX path packs
// Aᵀ with an in-register 16 x 16 transpose. Packing only rearranges and rounds,
// so the product of A given either way must be the same bits, for every shape
// (whole tiles and ragged m, n, k); and both must equal a double-precision
// product of the bf16-rounded operands to fp32 accumulation accuracy. Runs
// every bf16 table this CPU has (AMX, AVX512-BF16); skips where it has none.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/amx_bf16.h"
#include "kernels/cpu/attention_tiles.h"

namespace longctx {
namespace {

float RoundToBf16(float x) {  // round to nearest even, as vcvtneps2bf16 (finite inputs)
  uint32_t u;
  std::memcpy(&u, &x, 4);
  u = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u;
  float r;
  std::memcpy(&r, &u, 4);
  return r;
}

struct Shape {
  int m, n, k;
};

class Bf16PackTest : public ::testing::TestWithParam<bool> {};

TEST_P(Bf16PackTest, TransposedAEqualsRowMajorAAndTheBf16Reference) {
  const cpu::AttentionTileKernels<float>* t = cpu::AttentionTileKernelsBf16(GetParam());
  if (t == nullptr) GTEST_SKIP() << "this CPU has no AVX512-BF16";
  if (GetParam() != (std::string(t->name) == "amx-bf16")) GTEST_SKIP() << "this CPU has no AMX";
  std::mt19937 rng(20261124);
  std::normal_distribution<float> dist(0.f, 1.f);
  for (const Shape sh : {Shape{64, 64, 64}, Shape{64, 64, 128}, Shape{16, 16, 32}, Shape{37, 50, 13},
                         Shape{64, 64, 33}, Shape{5, 70, 100}, Shape{48, 17, 64}, Shape{1, 1, 1}, Shape{64, 128, 64}}) {
    const int m = sh.m, n = sh.n, k = sh.k;
    const std::string what = std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k);
    // A row-major [m][k] with a row stride > k; the same values stored transposed [k][m] with stride > m.
    const int lda = k + 3, ldat = m + 5, ldb = n + 2, ldc = n + 1;
    std::vector<float> a(static_cast<size_t>(m) * lda), at(static_cast<size_t>(k) * ldat), b(static_cast<size_t>(k) * ldb);
    // And at general strides (neither 1): A(i, x) = ag[i * (2 k + 1) + 2 x].
    const ptrdiff_t g_rs = 2 * k + 1, g_cs = 2;
    std::vector<float> ag(static_cast<size_t>(m) * g_rs, 0.f);
    for (int i = 0; i < m; ++i)
      for (int x = 0; x < k; ++x) ag[i * g_rs + x * g_cs] = at[x * ldat + i] = a[i * lda + x] = dist(rng);
    for (float& v : b) v = dist(rng);
    for (bool accumulate : {false, true}) {
      std::vector<float> c0(static_cast<size_t>(m) * ldc), c1, c2;
      for (float& v : c0) v = dist(rng);
      c2 = c1 = c0;
      const std::vector<float> init = c0;
      t->gemm(m, n, k, a.data(), lda, 1, b.data(), ldb, c0.data(), ldc, accumulate);
      t->gemm(m, n, k, at.data(), 1, ldat, b.data(), ldb, c1.data(), ldc, accumulate);
      t->gemm(m, n, k, ag.data(), g_rs, g_cs, b.data(), ldb, c2.data(), ldc, accumulate);
      for (int i = 0; i < m; ++i)
        for (int j = 0; j < n; ++j) {
          ASSERT_EQ(c0[i * ldc + j], c1[i * ldc + j]) << what << " C(" << i << "," << j << ") acc " << accumulate;
          ASSERT_EQ(c0[i * ldc + j], c2[i * ldc + j]) << what << " strided C(" << i << "," << j << ") acc " << accumulate;
          double want = accumulate ? init[i * ldc + j] : 0.0, scale = std::fabs(want);
          for (int x = 0; x < k; ++x) {
            const double p = static_cast<double>(RoundToBf16(a[i * lda + x])) * RoundToBf16(b[x * ldb + j]);
            want += p;
            scale += std::fabs(p);
          }
          // fp32 accumulation of k terms: |error| <= ~k u_fp32 sum|terms|.
          ASSERT_NEAR(c0[i * ldc + j], want, (k + 2) * 6e-8 * scale + 1e-30) << what << " C(" << i << "," << j << ")";
        }
      // Columns past n of C untouched (ldc > n).
      for (int i = 0; i < m; ++i) ASSERT_EQ(c0[i * ldc + n], init[i * ldc + n]) << what;
    }
  }
}

// The packed AMX driver's transposing packer (amx_bf16.h) against the
// element-by-element definition: out[p][i] = (bf16(scale A(i, 2p)),
// bf16(scale A(i, 2p + 1))), zero past m and k, whole 16 x 16 blocks written;
// nothing past them touched.
TEST(AmxPackTest, RowPairsTransposedMatchesTheDefinition) {
  if (!cpu::amx::Usable()) GTEST_SKIP() << "this CPU has no AMX (or no tile permission)";
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.f, 1.f);
  auto bits = [](float x) {
    uint32_t u;
    std::memcpy(&u, &x, 4);
    return u >> 16;
  };
  for (const auto& [m, k, scale] : {std::tuple{64, 64, 0.125f}, std::tuple{1, 64, 1.f}, std::tuple{17, 32, 0.3f},
                                   std::tuple{50, 128, 1.f}, std::tuple{64, 13, 0.7f}, std::tuple{33, 1, 2.f}}) {
    const int ld = k + 5, kp = (k + 1) / 2, rows_out = (kp + 15) / 16 * 16, cols_out = (m + 15) / 16 * 16;
    const int out_ld = cols_out + 16;  // room past the written blocks, which must stay untouched
    std::vector<float> a(static_cast<size_t>(m) * ld);
    for (float& v : a) v = dist(rng);
    std::vector<uint32_t> out(static_cast<size_t>(rows_out + 1) * out_ld, 0xDEADBEEFu);
    cpu::amx::PackRowPairsTransposed(a.data(), ld, m, k, scale, out.data(), out_ld);
    for (int p = 0; p < rows_out + 1; ++p)
      for (int i = 0; i < out_ld; ++i) {
        const uint32_t got = out[static_cast<size_t>(p) * out_ld + i];
        if (p >= rows_out || i >= cols_out) {
          ASSERT_EQ(got, 0xDEADBEEFu) << "written outside the blocks at pair " << p << " row " << i;
          continue;
        }
        auto elem = [&](int x) { return i < m && x < k ? bits(RoundToBf16(scale * a[i * ld + x])) : 0u; };
        ASSERT_EQ(got, elem(2 * p) | (elem(2 * p + 1) << 16))
            << m << "x" << k << " scale " << scale << ": pair " << p << " row " << i;
      }
  }
}

INSTANTIATE_TEST_SUITE_P(Tables, Bf16PackTest, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return std::string(info.param ? "amx" : "avx512bf16");
                         });

}  // namespace
}  // namespace longctx
