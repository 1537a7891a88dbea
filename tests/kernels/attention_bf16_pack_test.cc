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
#include <cstdlib>
#include <cstring>
#include <random>
#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/amx_bf16.h"
#include "kernels/cpu/attention_tiles.h"
#include "tests/support/test_seed.h"
#include "tests/support/hardware_skip.h"

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
  if (t == nullptr) LONGCTX_SKIP_WITHOUT(::longctx::test::kNoAvx512Bf16) << "this CPU has no AVX512-BF16";
  if (GetParam() != (std::string(t->name) == "amx-bf16")) LONGCTX_SKIP_WITHOUT(::longctx::test::kNoAmx) << "this CPU has no AMX";
  std::mt19937 rng(test::FreshSeed(20261124));
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
  if (!cpu::amx::Usable()) LONGCTX_SKIP_WITHOUT(::longctx::test::kNoAmx) << "this CPU has no AMX (or no tile permission)";
  std::mt19937 rng(test::FreshSeed(7));
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

// The packed backward's dQ writer (streaming stores on whole aligned lines,
// ordinary masked stores elsewhere) must write exactly scale * src, one fp32
// product per element, and nothing outside the rows' d columns: aligned and
// misaligned destinations, d a multiple of 16 and not.
TEST(AmxPackTest, StreamScaledRowsWritesTheScaledRowsOnly) {
  if (!cpu::amx::PairsUsable()) LONGCTX_SKIP_WITHOUT(::longctx::test::kNoAvx512Bf16) << "this CPU has no AVX512-BF16";
  std::mt19937 rng(test::FreshSeed(11));
  std::normal_distribution<float> dist(0.f, 1.f);
  for (const auto& [rows, d, offset] : {std::tuple{5, 64, 0}, std::tuple{3, 64, 1}, std::tuple{4, 48, 0},
                                        std::tuple{2, 17, 3}, std::tuple{1, 1, 0}, std::tuple{7, 256, 16}}) {
    const int src_ld = d + 3, dst_ld = d + 32;
    std::vector<float> src(static_cast<size_t>(rows) * src_ld);
    for (float& v : src) v = dist(rng);
    const float scale = 0.125f + std::abs(dist(rng));
    // 64-byte aligned storage; the rows start `offset` floats past a line.
    constexpr float kSentinel = -12345.f;
    const size_t n = static_cast<size_t>(rows) * dst_ld + 64;
    float* base = static_cast<float*>(std::aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64));
    ASSERT_NE(base, nullptr);
    std::fill(base, base + n, kSentinel);
    float* dst = base + offset;
    cpu::amx::StreamScaledRows(src.data(), src_ld, rows, d, scale, dst, dst_ld);
    for (size_t e = 0; e < n; ++e) {
      const ptrdiff_t rel = static_cast<ptrdiff_t>(e) - offset;
      const ptrdiff_t i = rel >= 0 ? rel / dst_ld : -1, x = rel >= 0 ? rel % dst_ld : -1;
      const bool inside = rel >= 0 && i < rows && x < d;
      const float want = inside ? scale * src[static_cast<size_t>(i * src_ld + x)] : kSentinel;
      uint32_t got_bits, want_bits;
      std::memcpy(&got_bits, base + e, 4);
      std::memcpy(&want_bits, &want, 4);
      ASSERT_EQ(got_bits, want_bits) << rows << " x " << d << " at offset " << offset << ": element " << e
                                     << (inside ? " (inside)" : " (outside)");
    }
    std::free(base);
  }
}

// The vdpbf16ps backward's fused step (amx::DotBackwardPairs: S = Q Kᵀ and
// dP = dO Vᵀ kept in registers, then the softmax pass) must write exactly
// what the two products (amx::DotProduct) followed by amx::BackwardPairs
// write, on fresh random operands and masks (rows seeing nothing, all, or a
// part of the keys; odd row counts; key widths that end mid-strip; zero
// columns past the products); and its P must be exp(S - lse) of a double
// product of the same bf16 operands, to bf16 accuracy.
TEST(DotBackwardPairsTest, SameBitsAsTheProductsThenThePassAndMatchesDouble) {
  if (!cpu::amx::PairsUsable()) LONGCTX_SKIP_WITHOUT(::longctx::test::kNoAvx512Bf16) << "this CPU has no AVX512-BF16";
  std::mt19937 rng(test::FreshSeed(20261127));
  std::normal_distribution<float> dist(0.f, 1.f);
  auto pair = [&](float lo, float hi) {
    uint32_t a, b;
    const float rl = RoundToBf16(lo), rh = RoundToBf16(hi);
    std::memcpy(&a, &rl, 4);
    std::memcpy(&b, &rh, 4);
    return (a >> 16) | (b & 0xFFFF0000u);
  };
  auto half = [](uint32_t u, int which) {
    const uint32_t b = which ? (u & 0xFFFF0000u) : (u << 16);
    float f;
    std::memcpy(&f, &b, 4);
    return f;
  };
  constexpr int kp = 32, b_ld = 160, pairs_ld = 208, rows_ld = 112;  // width <= 192
  for (int trial = 0; trial < 300; ++trial) {
    const int rows = 1 + static_cast<int>(rng() % 64), mq = (rows + 15) / 16 * 16;
    const int len = 16 * (1 + static_cast<int>(rng() % 9));  // up to 144: strips of 64, then 16-80 more
    const int width = (len + 31) / 32 * 32 + 32 * static_cast<int>(rng() % 2);
    std::vector<uint32_t> q(64 * kp), o(64 * kp), kt(kp * b_ld), vt(kp * b_ld);
    for (auto* v : {&q, &o, &kt, &vt})
      for (uint32_t& x : *v) x = pair(dist(rng), dist(rng));
    std::vector<float> lse(64), drow(64);
    for (float& x : lse) x = 4.f + dist(rng);
    for (float& x : drow) x = 0.3f * dist(rng);
    std::vector<int> ra(64), rb(64);
    for (int i = 0; i < 64; ++i) {
      const int kind = static_cast<int>(rng() % 4);
      ra[i] = kind == 0 ? 0 : static_cast<int>(rng() % (len + 1));
      rb[i] = kind == 1 ? len : ra[i] + static_cast<int>(rng() % (len - ra[i] + 1));
      if (kind == 3) rb[i] = ra[i];  // sees nothing
    }
    std::vector<float> s(static_cast<size_t>(mq) * b_ld), dp(s.size());
    std::vector<uint32_t> p_ref(32 * pairs_ld, 0xDEADBEEFu), ds_ref(p_ref), rows_ref(64 * rows_ld, 0xDEADBEEFu);
    std::vector<uint32_t> p_got(p_ref), ds_got(ds_ref), rows_got(rows_ref);
    cpu::amx::DotProduct(mq, len, kp, q.data(), kp, kt.data(), b_ld, s.data(), b_ld, false);
    cpu::amx::DotProduct(mq, len, kp, o.data(), kp, vt.data(), b_ld, dp.data(), b_ld, false);
    cpu::amx::BackwardPairs(s.data(), dp.data(), rows, b_ld, len, width, ra.data(), rb.data(), lse.data(),
                            drow.data(), p_ref.data(), ds_ref.data(), pairs_ld, rows_ref.data(), rows_ld);
    cpu::amx::DotBackwardPairs(q.data(), o.data(), kp, kp, kt.data(), vt.data(), b_ld, rows, len, width, ra.data(),
                               rb.data(), lse.data(), drow.data(), p_got.data(), ds_got.data(), pairs_ld,
                               rows_got.data(), rows_ld);
    const std::string what = "rows " + std::to_string(rows) + " len " + std::to_string(len) + " width " +
                             std::to_string(width) + " (trial " + std::to_string(trial) + ")";
    ASSERT_EQ(p_got, p_ref) << "P pairs differ, " << what;
    ASSERT_EQ(ds_got, ds_ref) << "dS pairs differ, " << what;
    ASSERT_EQ(rows_got, rows_ref) << "dS rows differ, " << what;
    // P against double: exp(sum over pairs of q * k - lse) where the row sees the key, 0 elsewhere.
    for (int i = 0; i < rows; ++i)
      for (int x = 0; x < width; ++x) {
        const float got = half(p_got[(i / 2) * pairs_ld + x], i % 2);
        double want = 0;
        if (x < len && x >= ra[i] && x < rb[i]) {
          double sum = 0;
          for (int pp = 0; pp < kp; ++pp)
            for (int e = 0; e < 2; ++e)
              sum += static_cast<double>(half(q[i * kp + pp], e)) * half(kt[pp * b_ld + x], e);
          want = std::exp(sum - lse[i]);
        }
        ASSERT_NEAR(got, want, 1e-30 + std::fabs(want) * 1.0 / 128) << "P(" << i << ", " << x << "), " << what;
      }
  }
}

INSTANTIATE_TEST_SUITE_P(Tables, Bf16PackTest, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return std::string(info.param ? "amx" : "avx512bf16");
                         });

}  // namespace
}  // namespace longctx
