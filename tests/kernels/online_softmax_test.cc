// Why: the tiled attention (kernels/cpu/attention*.cc) is exact only if the
// pieces it folds tile by tile are: the online-softmax bookkeeping
// (kernels/math/online_softmax.h: tile-by-tile equals whole-row, merges are
// exact, empty states are neutral), the fp32 exp and the cheaper exp of the
// bf16 tables (accuracy and special values), and the cache-line-aligned
// scratch the kernels' speed depends on. Split from attention_test.cc, which
// checks the kernels themselves.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/amx_bf16.h"
#include "kernels/cpu/attention_tiles.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/line_vector.h"
#include "kernels/math/online_softmax.h"
#include "tests/support/test_seed.h"
#include "tests/support/hardware_skip.h"

namespace longctx {
namespace {

TEST(OnlineSoftmax, FloatExpIsAccurateAndVectorFriendly) {
  double worst = 0;
  for (int i = 0; i <= 200000; ++i) {
    const float x = -87.0f * static_cast<float>(i) / 200000.0f;
    const double want = std::exp(static_cast<double>(x));
    worst = std::max(worst, std::fabs(math::Exp(x) - want) / want);
  }
  EXPECT_LT(worst, 3e-7);
  EXPECT_EQ(math::Exp(0.0f), 1.0f);
  EXPECT_EQ(math::Exp(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_EQ(math::Exp(-200.0f), 0.0f);
  EXPECT_EQ(math::Exp(-87.5f), 0.0f);  // below the normal range: flushed to exactly 0
  EXPECT_GT(math::Exp(-87.0f), 0.0f);
  EXPECT_EQ(math::Exp(200.0f), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(math::Exp(std::numeric_limits<float>::quiet_NaN())));
  // In a loop (the vectorized form GCC makes of it) the results are the same.
  std::vector<float> xs(1000), ys(1000);
  for (int i = 0; i < 1000; ++i) xs[i] = -0.09f * static_cast<float>(i) - 0.013f;
  for (int i = 0; i < 1000; ++i) ys[i] = math::Exp(xs[i]);
  for (int i = 0; i < 1000; i += 37) EXPECT_EQ(ys[i], math::Exp(xs[i])) << i;
  EXPECT_EQ(math::Exp(-std::numeric_limits<double>::infinity()), 0.0);
}

// The softmax passes of the bf16 tables use a cheaper exp (bf16 accuracy:
// P and dS are rounded to bf16 before any product). Checked through the table
// itself, on one score row, against the double exp: forward (exp and row sums)
// and backward (P = exp(s - lse), dS = P (dP - D)).
TEST(OnlineSoftmax, Bf16TablesExpIsAccurateToFarBelowBf16) {
  const cpu::AttentionTileKernels<float>* k = cpu::AttentionTileKernelsBf16();
  if (k == nullptr) LONGCTX_SKIP_WITHOUT(::longctx::test::kNoAvx512Bf16) << "this CPU has no AVX512-BF16: no bf16 tables";
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> xs;
  for (int i = 0; i <= 100000; ++i) xs.push_back(-87.0f * static_cast<float>(i) / 100000.0f);
  for (int i = 1; i <= 1000; ++i) xs.push_back(10.0f * static_cast<float>(i) / 1000.0f);  // backward: s - lse > 0
  const std::vector<float> special = {0.0f, -0.0f, -inf, -88.0f, -200.0f, 100.0f, inf,
                                      std::numeric_limits<float>::quiet_NaN()};
  xs.insert(xs.end(), special.begin(), special.end());
  const int len = static_cast<int>(xs.size());
  const int ra = 0, rb = len;
  // Forward pass: one row (key) over len queries, msafe = 0, l starts at 1.
  std::vector<float> s = xs, msafe(len, 0.f), l(len, 1.f);
  k->tile_exp_sum(s.data(), 1, len, len, &ra, &rb, msafe.data(), l.data());
  // Backward pass: len queries of one key each, lse = 0, D = 0.5, dP = 2.
  std::vector<float> p = xs, ds(len, 2.f), lse(len, 0.f), drow(len, 0.5f);
  std::vector<int> ras(len, 0), rbs(len, 1);
  k->tile_backward(p.data(), ds.data(), len, 1, 1, ras.data(), rbs.data(), lse.data(), drow.data());
  double worst = 0;
  for (int i = 0; i < len - static_cast<int>(special.size()); ++i) {
    const double want = std::exp(static_cast<double>(xs[i]));
    worst = std::max(worst, std::fabs(s[i] - want) / want);
    ASSERT_EQ(p[i], s[i]) << xs[i];  // one exp for both passes
    ASSERT_EQ(l[i], 1.f + s[i]) << xs[i];
    ASSERT_EQ(ds[i], s[i] * 1.5f) << xs[i];
  }
  // The fit's 2.9e-6 plus the rounding of x log2(e) (up to ~4e-6 near x = -87);
  // bf16's step is 3.9e-3.
  EXPECT_LT(worst, 1e-5);
  EXPECT_GT(worst, 1e-6);  // the cheaper function runs (the fp32 exp stays below 3e-7)
  const int base = len - static_cast<int>(special.size());
  EXPECT_EQ(s[base + 0], 1.f);  // exp(0) = 1 exactly
  EXPECT_EQ(s[base + 1], 1.f);
  EXPECT_EQ(s[base + 2], 0.f);  // -inf
  // Below the normal range (x < -87.34): an fp32 subnormal or 0, and 0 once
  // rounded to bf16 as every consumer of P rounds it (vcvtne2ps2bf16 flushes
  // subnormal inputs), so P's bf16 operand is that of an exact 0; dS = P (dP -
  // D) stays the fp32 product of that P (below 1e-37 here).
  EXPECT_TRUE(s[base + 3] == 0.f || std::fpclassify(s[base + 3]) == FP_SUBNORMAL) << s[base + 3];
  EXPECT_EQ(s[base + 4], 0.f);  // -200: past the subnormals too
  std::vector<float> below;
  for (int i = 0; i <= 400; ++i) below.push_back(-87.5f - 16.0f * static_cast<float>(i) / 400.0f);
  const int nb = static_cast<int>(below.size());
  std::vector<float> pb = below, lb(nb, 0.f), msb(nb, 0.f), dsb(nb, 2.f), lseb(nb, 0.f), drb(nb, 0.5f);
  std::vector<int> rab(nb, 0), rbb(nb, 1);
  const int rb_all = nb;
  k->tile_exp_sum(below.data(), 1, nb, nb, rab.data(), &rb_all, msb.data(), lb.data());
  k->tile_backward(pb.data(), dsb.data(), nb, 1, 1, rab.data(), rbb.data(), lseb.data(), drb.data());
  int subnormals = 0;
  for (int i = 0; i < nb; ++i) {
    for (float v : {below[i], pb[i]})
      ASSERT_TRUE(v == 0.f || std::fpclassify(v) == FP_SUBNORMAL) << "point " << i << ": " << v;
    ASSERT_EQ(pb[i], below[i]);  // one exp for both passes
    ASSERT_EQ(dsb[i], pb[i] * 1.5f);
    subnormals += std::fpclassify(below[i]) == FP_SUBNORMAL;
  }
  // The bf16 rounding the products' packers use, on those values of P: all 0.
  std::vector<float> all = below;
  all.push_back(std::numeric_limits<float>::denorm_min());
  all.push_back(std::nextafter(std::numeric_limits<float>::min(), 0.f));  // the largest subnormal
  if (all.size() % 2) all.push_back(0.f);
  std::vector<uint32_t> packed(all.size() / 2 + 16, 0xFFFFFFFFu);
  cpu::amx::PackPairsAlongRows(all.data(), static_cast<ptrdiff_t>(all.size()), 1, static_cast<int>(all.size()),
                               packed.data(), static_cast<int>(packed.size()));
  for (size_t i = 0; i < all.size() / 2; ++i) ASSERT_EQ(packed[i], 0u) << "pair " << i << ": " << all[2 * i];
  EXPECT_GT(subnormals, 50);  // the sweep reaches them (the exp does not force 0 there)
  EXPECT_EQ(s[base + 5], inf);
  EXPECT_EQ(s[base + 6], inf);
  EXPECT_TRUE(std::isnan(s[base + 7]));
}

// The fp32 tables' softmax passes compute the scalar table's exp lane by lane
// (attention_tiles_scalar.cc), so every table gives its bits over the whole
// domain: the polynomial's interval, the bottom of the normal range where
// 2^n * p lands on subnormals, the flush to 0 below -87.34, the clamp at 88,
// the special values; fresh random scores beside the sweep; rows seeing only
// part of the vectors (the masked edges).
TEST(OnlineSoftmax, Fp32TablesSoftmaxPassesEqualTheScalarTableBitwise) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> xs;
  for (int i = 0; i <= 20000; ++i) xs.push_back(-90.0f * static_cast<float>(i) / 20000.0f);
  for (int i = 0; i <= 4000; ++i) xs.push_back(-87.4f + 0.5f * static_cast<float>(i) / 4000.0f);  // near -87.34
  for (int i = 1; i <= 500; ++i) xs.push_back(90.0f * static_cast<float>(i) / 500.0f);  // s - lse > 0, the clamp
  std::mt19937 rng(test::FreshSeed(17));
  std::uniform_real_distribution<float> u(-100.f, 5.f);
  for (int i = 0; i < 3000; ++i) xs.push_back(u(rng));
  for (float v : {0.0f, -0.0f, -inf, inf, std::numeric_limits<float>::quiet_NaN(), -87.33654f, -87.33653f, 88.0f,
                  88.1f, std::numeric_limits<float>::denorm_min(), -std::numeric_limits<float>::min()})
    xs.push_back(v);
  const int len = static_cast<int>(xs.size());
  struct Out {
    std::vector<float> s, l, p, ds;
  };
  // One row over all queries, then rows seeing [3, len - 5) and [17, 22); the
  // backward on one row seeing [2, len - 3).
  auto run = [&](const cpu::AttentionTileKernels<float>& k) {
    Out o;
    const int rows = 3, ld = len + 16;
    o.s.assign(static_cast<size_t>(rows * ld), 0.f);
    for (int j = 0; j < rows; ++j) std::copy(xs.begin(), xs.end(), o.s.begin() + j * ld);
    const int ra[rows] = {0, 3, 17}, rb[rows] = {len, len - 5, 22};
    std::vector<float> msafe(len, 0.25f);
    o.l.assign(len, 1.f);
    k.tile_exp_sum(o.s.data(), rows, ld, len, ra, rb, msafe.data(), o.l.data());
    o.p = xs;
    o.ds.assign(len, 2.f);
    const int rab = 2, rbb = len - 3;
    const float lse = -0.5f, drow = 0.75f;
    k.tile_backward(o.p.data(), o.ds.data(), 1, len, len, &rab, &rbb, &lse, &drow);
    return o;
  };
  auto bits = [](const std::vector<float>& v) {
    std::vector<uint32_t> b(v.size());
    std::memcpy(b.data(), v.data(), v.size() * sizeof(float));
    return b;
  };
  const Out want = run(cpu::AttentionTileKernelsF32(cpu::AttentionIsa::kScalar));
  int compared = 0;
  for (cpu::AttentionIsa isa : {cpu::AttentionIsa::kAvx2, cpu::AttentionIsa::kAvx512}) {
    if (!cpu::AttentionIsaSupported(isa)) continue;
    const Out got = run(cpu::AttentionTileKernelsF32(isa));
    const char* name = cpu::AttentionIsaName(isa);
    EXPECT_EQ(bits(got.s), bits(want.s)) << name << ": P of the forward pass";
    EXPECT_EQ(bits(got.l), bits(want.l)) << name << ": row sums";
    EXPECT_EQ(bits(got.p), bits(want.p)) << name << ": P of the backward pass";
    EXPECT_EQ(bits(got.ds), bits(want.ds)) << name << ": dS";
    ++compared;
  }
  if (cpu::AttentionIsaSupported(cpu::AttentionIsa::kAvx2)) {
    EXPECT_GE(compared, 1);
  }
  // The sweep reaches subnormal P (exp of just above -87.34) and exact zeros.
  EXPECT_TRUE(std::any_of(want.p.begin(), want.p.end(), [](float v) { return v > 0 && v < 1.2e-38f; }));
}

// tile_max (the forward's running max over a transposed score tile) of every
// table this CPU runs against the scalar table's loop, on fresh random scores
// with NaNs among them (a NaN never enters the max), rows seeing ranges that
// start and end inside 16-lane vectors, rows seeing nothing, an odd row
// count, and tiles wider than the 64 lanes one pass of the AVX-512 loop
// folds. The max is exact, so the values must be equal (only a zero's sign
// may differ, which == ignores).
TEST(OnlineSoftmax, TileMaxOfEveryTableEqualsTheScalarLoop) {
  std::mt19937 rng(test::FreshSeed(23));
  std::uniform_real_distribution<float> score(-30.f, 30.f);
  std::vector<const cpu::AttentionTileKernels<float>*> tables;
  for (cpu::AttentionIsa isa : {cpu::AttentionIsa::kAvx2, cpu::AttentionIsa::kAvx512})
    if (cpu::AttentionIsaSupported(isa)) tables.push_back(&cpu::AttentionTileKernelsF32(isa));
  for (bool amx : {false, true})
    if (cpu::AttentionTileKernelsBf16(amx) != nullptr) tables.push_back(cpu::AttentionTileKernelsBf16(amx));
  if (tables.empty()) GTEST_SKIP() << "no vector tables on this CPU";
  const cpu::AttentionTileKernels<float>& scalar = cpu::AttentionTileKernelsF32(cpu::AttentionIsa::kScalar);
  int checked = 0;
  for (int trial = 0; trial < 60; ++trial) {
    const int rows = 1 + static_cast<int>(rng() % 257);
    const int len = 1 + static_cast<int>(rng() % (trial % 3 == 0 ? 150 : 64));
    const int ld = len + static_cast<int>(rng() % 20);
    std::vector<float> s(static_cast<size_t>(rows) * ld);
    for (float& v : s) v = rng() % 97 == 0 ? std::numeric_limits<float>::quiet_NaN() : score(rng);
    std::vector<int> ra(rows), rb(rows);
    for (int j = 0; j < rows; ++j) {
      switch (rng() % 4) {
        case 0:  // the whole row
          ra[j] = 0;
          rb[j] = len;
          break;
        case 1:  // nothing
          ra[j] = rb[j] = static_cast<int>(rng() % (len + 1));
          break;
        default: {
          const int a = static_cast<int>(rng() % len);
          ra[j] = a;
          rb[j] = a + 1 + static_cast<int>(rng() % (len - a));
        }
      }
    }
    std::vector<float> start(len);
    for (float& v : start) v = rng() % 5 == 0 ? -std::numeric_limits<float>::infinity() : score(rng);
    std::vector<float> want = start;
    scalar.tile_max(s.data(), rows, ld, ra.data(), rb.data(), want.data());
    for (const cpu::AttentionTileKernels<float>* t : tables) {
      std::vector<float> got = start;
      t->tile_max(s.data(), rows, ld, ra.data(), rb.data(), got.data());
      for (int x = 0; x < len; ++x)
        ASSERT_EQ(got[x], want[x]) << t->name << ": lane " << x << " of " << len << ", " << rows << " rows";
      ++checked;
    }
  }
  EXPECT_EQ(checked, 60 * static_cast<int>(tables.size()));
}

// The attention scratch is LineVector so that tile rows and vectors never
// straddle two cache lines (the largest single speed-up of the tiled attention); every buffer,
// of every size, starts on one. (std::vector's glibc allocation is 16-byte
// aligned: this fails for most of these sizes with the default allocator.)
TEST(LineVector, EveryBufferStartsOnACacheLine) {
  std::vector<cpu::LineVector<float>> floats;
  std::vector<cpu::LineVector<uint32_t>> pairs;
  for (size_t n = 1; n <= 300; n += 7) {
    floats.emplace_back(n, 1.f);
    pairs.emplace_back(n * 3, 2u);
  }
  for (const auto& v : floats) EXPECT_EQ(reinterpret_cast<uintptr_t>(v.data()) % 64, 0u) << v.size();
  for (const auto& v : pairs) EXPECT_EQ(reinterpret_cast<uintptr_t>(v.data()) % 64, 0u) << v.size();
  cpu::LineVector<float> grown(5, 3.f);
  grown.resize(100000, 4.f);  // reallocation keeps the alignment and the contents
  EXPECT_EQ(reinterpret_cast<uintptr_t>(grown.data()) % 64, 0u);
  EXPECT_EQ(grown[4], 3.f);
  EXPECT_EQ(grown[99999], 4.f);
}

TEST(OnlineSoftmax, TileByTileEqualsWholeRowAndMergeIsExact) {
  std::mt19937 rng(test::FreshSeed(3));
  std::normal_distribution<double> dist(0.0, 4.0);
  std::vector<double> s(97);
  for (double& x : s) x = dist(rng);
  double mx = -std::numeric_limits<double>::infinity(), sum = 0;
  for (double x : s) mx = std::max(mx, x);
  for (double x : s) sum += std::exp(x - mx);
  const double lse = mx + std::log(sum);
  // Folded in tiles of 10, with an output accumulator of sum exp(s - m) * s.
  auto fold = [&](size_t begin, size_t end, double* weighted) {
    math::SoftmaxState<double> st = math::SoftmaxInit<double>();
    double acc = 0;
    for (size_t t = begin; t < end; t += 10) {
      const size_t e = std::min(end, t + 10);
      double bmax = s[t];
      for (size_t j = t; j < e; ++j) bmax = std::max(bmax, s[j]);
      acc *= math::SoftmaxAdvance(st, bmax);
      double bsum = 0;
      for (size_t j = t; j < e; ++j) {
        bsum += math::Exp(s[j] - st.m);
        acc += math::Exp(s[j] - st.m) * s[j];
      }
      math::SoftmaxAccumulate(st, bsum);
    }
    if (weighted) *weighted = acc * math::SoftmaxInvSum(st);
    return st;
  };
  double mean_tiled = 0;
  const math::SoftmaxState<double> whole = fold(0, s.size(), &mean_tiled);
  EXPECT_NEAR(math::SoftmaxLse(whole), lse, 1e-12);
  double mean = 0;
  for (double x : s) mean += std::exp(x - lse) * x;
  EXPECT_NEAR(mean_tiled, mean, 1e-12);
  const math::SoftmaxState<double> merged = math::SoftmaxMerge(fold(0, 40, nullptr), fold(40, s.size(), nullptr));
  EXPECT_NEAR(math::SoftmaxLse(merged), lse, 1e-12);
  // Empty states are neutral and never produce NaN.
  const math::SoftmaxState<double> empty = math::SoftmaxInit<double>();
  EXPECT_NEAR(math::SoftmaxLse(math::SoftmaxMerge(empty, whole)), lse, 1e-12);
  EXPECT_EQ(math::SoftmaxLse(math::SoftmaxMerge(empty, empty)), -std::numeric_limits<double>::infinity());
  EXPECT_EQ(math::SoftmaxInvSum(empty), 0.0);
  EXPECT_EQ(math::SoftmaxSafeMax(-std::numeric_limits<double>::infinity()), 0.0);
  EXPECT_EQ(math::SoftmaxSafeMax(-2.5f), -2.5f);
  EXPECT_EQ(math::SoftmaxRescale(-std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_EQ(math::SoftmaxRescale(1.5f, 1.5f), 1.0f);
  EXPECT_NEAR(math::SoftmaxProb(s[5], lse) * sum, std::exp(s[5] - mx), 1e-12);
}

}  // namespace
}  // namespace longctx
