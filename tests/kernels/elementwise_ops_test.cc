// Why: the CPU elementwise kernels (fill/copy/axpy/scale/reductions, embedding,
// SwiGLU, AdamW) and the finite-difference checker itself, each pinned against
// a naive formula written independently of kernels/math, every backward against
// central finite differences in F64, and F32 against F64. Row-strided views use
// padded buffers whose gap elements must be neither read nor written.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "tests/support/finite_diff.h"
#include "tests/support/op_test_util.h"

namespace longctx {
namespace {

using namespace ::longctx::op_test;  // NOLINT: test helpers

// ---------------------------------------------------------------- the checker

// The gradient checker itself: it must pass an exact gradient, catch a small
// error, catch NaN, restore params bit-exactly and sample distinct coordinates.
TEST(FiniteDiffTest, CatchesWrongGradientsAndRestoresParams) {
  std::vector<double> p = RandomUniform(40, 1, -2.0, 2.0);
  const std::vector<double> p0 = p;
  int calls = 0;
  auto loss = [&] {
    ++calls;
    long double s = 0;
    for (size_t i = 0; i < p.size(); ++i) s += std::sin(p[i]) * (1.0 + i) + 0.5 * p[i] * p[i];
    return static_cast<double>(s);
  };
  std::vector<double> grad(p.size());
  for (size_t i = 0; i < p.size(); ++i) grad[i] = std::cos(p[i]) * (1.0 + i) + p[i];
  GradCheckResult ok = CheckGradient(loss, p.data(), p.size(), grad.data());
  EXPECT_LT(ok.max_rel_error, 1e-8) << ok.ToString();
  EXPECT_EQ(ok.checked, 40);
  EXPECT_EQ(calls, 80);
  EXPECT_EQ(std::memcmp(p.data(), p0.data(), p.size() * sizeof(double)), 0);

  std::vector<double> wrong = grad;
  wrong[17] *= 1.0 + 1e-5;
  GradCheckResult bad = CheckGradient(loss, p.data(), p.size(), wrong.data());
  EXPECT_GT(bad.max_rel_error, 5e-6) << bad.ToString();
  EXPECT_EQ(bad.worst_index, 17);

  wrong = grad;
  wrong[3] = std::numeric_limits<double>::quiet_NaN();
  EXPECT_FALSE(CheckGradient(loss, p.data(), p.size(), wrong.data()).max_rel_error < 1.0);

  test::GradCheckOptions opt;
  opt.samples = 7;
  opt.seed = 5;
  calls = 0;
  GradCheckResult sampled = CheckGradient(loss, p.data(), p.size(), wrong.data(), opt);
  EXPECT_EQ(sampled.checked, 7);
  EXPECT_EQ(calls, 14);
  EXPECT_EQ(test::MaxRelError(loss, p.data(), p.size(), grad.data(), 7, 1e-6, 5) < 1e-8, true);
}

// ---------------------------------------------------------------- elementwise

TYPED_TEST(TypedOpsTest, FillWritesExactlyTheView) {
  using T = TypeParam;
  Padded<T> x({37, 5, 7}, /*pad=*/6, /*off=*/2);
  x.Randomize(1);
  const std::vector<T> before = x.v;
  cpu::Fill(x.tensor(), 0.75);
  for (size_t i = 0; i < x.v.size(); ++i)
    ASSERT_EQ(x.v[i], x.in_view(i) ? T(0.75) : before[i]) << i;

  Padded<T> flat({100003});  // dense 1-D, threaded path
  flat.Randomize(2);
  cpu::Fill(flat.tensor(), -2.5);
  for (T v : flat.v) ASSERT_EQ(v, T(-2.5));
}

TYPED_TEST(TypedOpsTest, CopyBetweenDifferentlyStridedViews) {
  using T = TypeParam;
  Padded<T> src({300, 120}, 4, 1), dst({300, 120}, 9, 5);
  src.Randomize(3);
  dst.Randomize(4);
  const std::vector<T> dst0 = dst.v;
  cpu::Copy(dst.tensor(), src.tensor());
  EXPECT_EQ(dst.Dense(), src.Dense());
  for (size_t i = 0; i < dst.v.size(); ++i)
    if (!dst.in_view(i)) {
      ASSERT_EQ(dst.v[i], dst0[i]) << "gap " << i << " written";
    }

  Padded<T> a({200001}), b({200001});
  a.Randomize(5);
  cpu::Copy(b.tensor(), a.tensor());
  EXPECT_EQ(a.v, b.v);
}

TEST(ElementwiseTest, CopyConvertsBetweenF32AndF64) {
  Padded<double> src({40, 17}, 3, 2);
  src.Randomize(6);
  Padded<float> dst({40, 17});
  cpu::Copy(dst.tensor(), src.tensor());
  std::vector<double> s = src.Dense();
  for (size_t i = 0; i < s.size(); ++i) ASSERT_EQ(dst.v[i], static_cast<float>(s[i]));
  Padded<double> back({40, 17}, 1, 0);
  cpu::Copy(back.tensor(), dst.tensor());
  std::vector<double> bd = back.Dense();
  for (size_t i = 0; i < bd.size(); ++i) ASSERT_EQ(bd[i], static_cast<double>(dst.v[i]));
}

TEST(ElementwiseTest, CopySameDtypeIsBytewiseForIntegers) {
  std::vector<int32_t> a(1000), b(1000, 0);
  std::iota(a.begin(), a.end(), -500);
  cpu::Copy(Tensor(b.data(), DType::kI32, {1000}), Tensor(a.data(), DType::kI32, {1000}));
  EXPECT_EQ(a, b);
}

TYPED_TEST(TypedOpsTest, AxpyOnStridedViews) {
  using T = TypeParam;
  Padded<T> y({300, 2, 600}, 7, 3), x({300, 2, 600}, 2, 0);  // 360K elements: threaded
  y.Randomize(7);
  x.Randomize(8);
  const std::vector<T> y0 = y.v;
  const double alpha = -0.37;
  cpu::Axpy(y.tensor(), alpha, x.tensor());
  for (int64_t r = 0; r < y.rows; ++r)
    for (int64_t c = 0; c < y.row_size; ++c) {
      const double want = static_cast<double>(y0[y.off + r * y.ld + c]) + alpha * static_cast<double>(x.at(r, c));
      ASSERT_NEAR(y.at(r, c), want, sizeof(T) == 4 ? 1e-6 : 1e-15) << r << "," << c;
    }
  for (size_t i = 0; i < y.v.size(); ++i)
    if (!y.in_view(i)) {
      ASSERT_EQ(y.v[i], y0[i]);
    }
}

TYPED_TEST(TypedOpsTest, ScaleOnStrided3DView) {
  using T = TypeParam;
  Padded<T> x({500, 3, 50}, 5, 4);
  x.Randomize(9);
  const std::vector<T> x0 = x.v;
  cpu::Scale(x.tensor(), 3.0);
  for (size_t i = 0; i < x.v.size(); ++i) ASSERT_EQ(x.v[i], x.in_view(i) ? T(x0[i] * T(3)) : x0[i]) << i;
}

TYPED_TEST(TypedOpsTest, SumSquaresMatchesNaiveAndIgnoresGaps) {
  using T = TypeParam;
  for (int64_t pad : {0, 3}) {
    Padded<T> x({700, 4, 33}, pad, pad ? 1 : 0);
    x.Randomize(10);
    x.SetGaps(T(1e18));  // reading a gap would swamp the sum
    long double want = 0;
    for (T v : x.Dense()) want += static_cast<long double>(v) * v;
    const double got = cpu::SumSquares(x.tensor());
    EXPECT_NEAR(got, static_cast<double>(want), 1e-12 * static_cast<double>(want)) << "pad " << pad;
  }
}

TEST(ElementwiseTest, SumSquaresIsBitwiseReproducibleAcrossThreadCounts) {
  Padded<float> f({3000001});
  f.Randomize(11);
  Padded<double> d({2500, 1000}, 24, 8);
  d.Randomize(12);
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const double f1 = cpu::SumSquares(f.tensor()), d1 = cpu::SumSquares(d.tensor());
  for (int threads : {2, 3, 4, 7}) {
    omp_set_num_threads(threads);
    for (int rep = 0; rep < 3; ++rep) {
      const double f2 = cpu::SumSquares(f.tensor()), d2 = cpu::SumSquares(d.tensor());
      EXPECT_EQ(std::memcmp(&f1, &f2, sizeof(double)), 0) << threads << " threads: " << f1 << " vs " << f2;
      EXPECT_EQ(std::memcmp(&d1, &d2, sizeof(double)), 0) << threads << " threads: " << d1 << " vs " << d2;
    }
  }
  omp_set_num_threads(saved);
  long double want = 0;
  for (float v : f.v) want += static_cast<long double>(v) * v;
  EXPECT_NEAR(f1, static_cast<double>(want), 1e-12 * static_cast<double>(want));
}

TYPED_TEST(TypedOpsTest, AllFiniteAndSumSquaresSeeInjectedNanAndInf) {
  using T = TypeParam;
  const T nan = std::numeric_limits<T>::quiet_NaN(), inf = std::numeric_limits<T>::infinity();
  // Strided view: non-finite values in the gaps must not count.
  Padded<T> x({64, 9, 11}, 5, 2);
  x.Randomize(13);
  x.SetGaps(nan);
  EXPECT_TRUE(cpu::AllFinite(x.tensor()));
  EXPECT_TRUE(std::isfinite(cpu::SumSquares(x.tensor())));
  // Extreme finite values are finite.
  x.at(0, 0) = std::numeric_limits<T>::max();
  x.at(1, 1) = std::numeric_limits<T>::denorm_min();
  x.at(2, 2) = -std::numeric_limits<T>::max();
  EXPECT_TRUE(cpu::AllFinite(x.tensor()));
  x.Randomize(13);
  for (T bad : {nan, inf, -inf}) {
    for (int64_t r : {int64_t{0}, int64_t{31}, int64_t{63}}) {
      const int64_t c = r == 63 ? x.row_size - 1 : r % x.row_size;  // includes the very last element
      const T saved = x.at(r, c);
      x.at(r, c) = bad;
      EXPECT_FALSE(cpu::AllFinite(x.tensor())) << bad << " at row " << r;
      const double ss = cpu::SumSquares(x.tensor());
      if (std::isnan(bad)) {
        EXPECT_TRUE(std::isnan(ss)) << ss;
      } else {
        EXPECT_TRUE(std::isinf(ss)) << ss;
      }
      x.at(r, c) = saved;
    }
  }
  EXPECT_TRUE(cpu::AllFinite(x.tensor()));
  // Large dense tensor (threaded path).
  Padded<T> big({1000003});
  big.Randomize(14);
  EXPECT_TRUE(cpu::AllFinite(big.tensor()));
  for (int64_t i : {int64_t{0}, int64_t{500000}, int64_t{1000002}}) {
    big.v[i] = nan;
    EXPECT_FALSE(cpu::AllFinite(big.tensor())) << i;
    EXPECT_TRUE(std::isnan(cpu::SumSquares(big.tensor()))) << i;
    big.v[i] = T(0.5);
  }
}

TEST(ElementwiseDeathTest, UnsupportedDtypeAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  std::vector<int32_t> v(4);
  EXPECT_DEATH(cpu::Fill(Tensor(v.data(), DType::kI32, {4}), 1.0), "unsupported dtype");
}

// ---------------------------------------------------------------- embedding

TYPED_TEST(TypedOpsTest, EmbeddingForwardGathersRows) {
  using T = TypeParam;
  const int64_t vocab = 11, d = 7;
  std::vector<int32_t> ids = {3, 0, 10, 3, 7, 3, 1};
  const int64_t n = ids.size();
  Padded<T> table({vocab, d}, 2, 1), out({n, d}, 3, 0);
  table.Randomize(20);
  out.Randomize(21);
  const std::vector<T> out0 = out.v;
  EmbeddingParams p{Tensor(ids.data(), DType::kI32, {n}), table.tensor(), out.tensor()};
  ASSERT_TRUE(p.Validate().ok());
  cpu::EmbeddingForward(p);
  for (int64_t t = 0; t < n; ++t)
    for (int64_t c = 0; c < d; ++c) ASSERT_EQ(out.at(t, c), table.at(ids[t], c));
  for (size_t i = 0; i < out.v.size(); ++i)
    if (!out.in_view(i)) {
      ASSERT_EQ(out.v[i], out0[i]);
    }
}

TEST(EmbeddingDeathTest, IdOutsideVocabAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  std::vector<double> table(4 * 3, 1.0), out(2 * 3);
  std::vector<int32_t> ids = {1, 4};
  EmbeddingParams p{Tensor(ids.data(), DType::kI32, {2}), Tensor(table.data(), DType::kF64, {4, 3}),
                    Tensor(out.data(), DType::kF64, {2, 3})};
  EXPECT_DEATH(cpu::EmbeddingForward(p), "outside");
  EXPECT_DEATH(cpu::EmbeddingBackward(p), "outside");
}

TEST(EmbeddingTest, BackwardMatchesFiniteDifferences) {
  const int64_t vocab = 9, d = 5;
  std::vector<int32_t> ids = {2, 8, 2, 0, 5, 2, 8, 1};
  const int64_t n = ids.size();
  std::vector<double> table = RandomUniform(vocab * d, 22), g = RandomUniform(n * d, 23);
  std::vector<double> out(n * d);
  auto loss = [&] {
    cpu::EmbeddingForward({Tensor(ids.data(), DType::kI32, {n}), Tensor(table.data(), DType::kF64, {vocab, d}),
                           Tensor(out.data(), DType::kF64, {n, d})});
    return Dot(out, g);
  };
  // Accumulates into a pre-filled gradient.
  std::vector<double> prior = RandomUniform(vocab * d, 24), dtable = prior;
  cpu::EmbeddingBackward({Tensor(ids.data(), DType::kI32, {n}), Tensor(dtable.data(), DType::kF64, {vocab, d}),
                          Tensor(g.data(), DType::kF64, {n, d})});
  std::vector<double> grad(vocab * d);
  for (size_t i = 0; i < grad.size(); ++i) grad[i] = dtable[i] - prior[i];
  ExpectGradOk(CheckGradient(loss, table.data(), vocab * d, grad.data()), "d table");
  // Rows never looked up get nothing.
  for (int64_t c = 0; c < d; ++c) EXPECT_EQ(grad[3 * d + c], 0.0);
}

TYPED_TEST(TypedOpsTest, EmbeddingBackwardLargeIsExactAndDeterministic) {
  using T = TypeParam;
  const int64_t vocab = 50, d = 300, n = 4000;  // threaded over column blocks; many repeats
  std::vector<int32_t> ids(n);
  for (int64_t t = 0; t < n; ++t) ids[t] = static_cast<int32_t>((t * 7919) % vocab);
  Padded<T> dout({n, d}, 4, 2);
  dout.Randomize(25);
  std::vector<T> want = Cast<T>(RandomUniform(vocab * d, 26)), got = want;
  for (int64_t t = 0; t < n; ++t)  // same order as the kernel: tokens ascending
    for (int64_t c = 0; c < d; ++c) want[ids[t] * d + c] += dout.at(t, c);
  cpu::EmbeddingBackward({Tensor(ids.data(), DType::kI32, {n}), Tensor(got.data(), DTypeOf<T>(), {vocab, d}),
                          dout.tensor()});
  EXPECT_EQ(got, want);
}

// ---------------------------------------------------------------- SwiGLU

double NaiveSilu(double g) { return g / (1.0 + std::exp(-g)); }

TYPED_TEST(TypedOpsTest, SwiGluForwardMatchesNaive) {
  using T = TypeParam;
  const int64_t n = 37, f = 29;
  Padded<T> gu({n, 2 * f}, 3, 1), h({n, f}, 2, 0);
  gu.Randomize(30, -12.0, 12.0);
  // Extremes: saturated sigmoid on both sides, and around the clamp of the fast exp.
  const double extremes[] = {-100.0, -88.5, -87.0, -30.0, 30.0, 87.5, 89.0, 100.0, 1e-6, -1e-6};
  for (int i = 0; i < 10; ++i) gu.at(i, i) = static_cast<T>(extremes[i]);
  cpu::SwiGluForward({gu.tensor(), h.tensor(), {}, {}});
  for (int64_t t = 0; t < n; ++t)
    for (int64_t c = 0; c < f; ++c) {
      const double g = gu.at(t, c), u = gu.at(t, f + c);
      const double want = NaiveSilu(g) * u;
      // F32: the fast exp clamps its argument to [-87, 88], so silu(g < -87)
      // is off by < 1e-35 in absolute terms.
      ASSERT_NEAR(h.at(t, c), want, sizeof(T) == 4 ? 1e-6 * std::fabs(want) + 1e-30 : 1e-14 * std::fabs(want))
          << "g=" << g << " u=" << u;
    }
}

TEST(SwiGluTest, BackwardMatchesFiniteDifferences) {
  const int64_t n = 6, f = 7;
  Padded<double> gu({n, 2 * f}, 3, 2);
  gu.Randomize(31, -4.0, 4.0);
  Padded<double> h({n, f}, 1, 0);
  const std::vector<double> g = RandomUniform(n * f, 32);
  auto loss = [&] {
    cpu::SwiGluForward({gu.tensor(), h.tensor(), {}, {}});
    return Dot(h.Dense(), g);
  };
  std::vector<double> gcopy = g;
  Padded<double> dgu({n, 2 * f}, 3, 2);  // same layout as gu: gaps stay 0
  dgu.SetView(std::numeric_limits<double>::quiet_NaN());  // overwritten
  SwiGluParams p{gu.tensor(), {}, Tensor(gcopy.data(), DType::kF64, {n, f}), dgu.tensor()};
  ASSERT_TRUE(p.Validate(true).ok());
  cpu::SwiGluBackward(p);
  ExpectGradOk(CheckGradient(loss, gu.v.data(), gu.v.size(), dgu.v.data()), "d gate_up");
}

TEST(SwiGluTest, F32MatchesF64) {
  const int64_t n = 300, f = 257;  // threaded, not a multiple of the vector width
  Padded<float> gu32({n, 2 * f});
  gu32.Randomize(33, -8.0, 8.0);
  const std::vector<float> dh32 = Cast<float>(RandomUniform(n * f, 34));
  Padded<double> gu = gu32.Like<double>();  // the same (F32-representable) inputs
  std::vector<double> dh = Cast<double>(dh32);
  std::vector<double> h(n * f), dgu(n * 2 * f);
  std::vector<float> h32(n * f), dgu32(n * 2 * f);
  std::vector<float> dh32m = dh32;
  cpu::SwiGluForward({gu.tensor(), Tensor(h.data(), DType::kF64, {n, f}), {}, {}});
  cpu::SwiGluForward({gu32.tensor(), Tensor(h32.data(), DType::kF32, {n, f}), {}, {}});
  cpu::SwiGluBackward({gu.tensor(), {}, Tensor(dh.data(), DType::kF64, {n, f}),
                       Tensor(dgu.data(), DType::kF64, {n, 2 * f})});
  cpu::SwiGluBackward({gu32.tensor(), {}, Tensor(dh32m.data(), DType::kF32, {n, f}),
                       Tensor(dgu32.data(), DType::kF32, {n, 2 * f})});
  ExpectAllClose(h32, h, kF32Tol, "h");
  ExpectAllClose(dgu32, dgu, kF32Tol, "dgate_up");
}

// A BF16 dgate_up (the operand of bf16 products), and a BF16 h, hold exactly
// the F32 results rounded as Copy rounds, from strided inputs, rows longer than the
// op's internal block (f = 1100) and not a multiple of the vector width.
TEST(SwiGluTest, Bf16OutputIsTheRoundedF32Output) {
  const int64_t n = 9, f = 1100;
  Padded<float> gu({n, 2 * f}, 3, 1);
  gu.Randomize(35, -8.0, 8.0);
  std::vector<float> dh = Cast<float>(RandomUniform(n * f, 36)), dgu(n * 2 * f);
  const Tensor dht(dh.data(), DType::kF32, {n, f});
  cpu::SwiGluBackward({gu.tensor(), {}, dht, Tensor(dgu.data(), DType::kF32, {n, 2 * f})});
  std::vector<uint16_t> want(n * 2 * f), got(n * 2 * f, 0xFFFF);
  cpu::Copy(Tensor(want.data(), DType::kBF16, {n, 2 * f}), Tensor(dgu.data(), DType::kF32, {n, 2 * f}));
  const SwiGluParams p{gu.tensor(), {}, dht, Tensor(got.data(), DType::kBF16, {n, 2 * f})};
  ASSERT_TRUE(p.Validate(true).ok()) << p.Validate(true);
  cpu::SwiGluBackward(p);
  EXPECT_EQ(got, want);
  // The forward's BF16 h likewise.
  std::vector<float> h(n * f);
  std::vector<uint16_t> h_want(n * f), h_got(n * f, 0xFFFF);
  cpu::SwiGluForward({gu.tensor(), Tensor(h.data(), DType::kF32, {n, f}), {}, {}});
  cpu::Copy(Tensor(h_want.data(), DType::kBF16, {n, f}), Tensor(h.data(), DType::kF32, {n, f}));
  const SwiGluParams fwd{gu.tensor(), Tensor(h_got.data(), DType::kBF16, {n, f}), {}, {}};
  ASSERT_TRUE(fwd.Validate(false).ok()) << fwd.Validate(false);
  cpu::SwiGluForward(fwd);
  EXPECT_EQ(h_got, h_want);
  // Only with F32 inputs, and in gate_up's shape.
  SwiGluParams wrong = p;
  wrong.dgate_up = Tensor(got.data(), DType::kBF16, {n, f});
  EXPECT_NE(wrong.Validate(true).message().find("dgate_up BF16[9,1100] vs gate_up"), std::string::npos)
      << wrong.Validate(true);
  std::vector<double> gu64(n * 2 * f), dh64(n * f);
  const SwiGluParams f64{Tensor(gu64.data(), DType::kF64, {n, 2 * f}), {}, Tensor(dh64.data(), DType::kF64, {n, f}),
                         Tensor(got.data(), DType::kBF16, {n, 2 * f})};
  EXPECT_FALSE(f64.Validate(true).ok());
}

// ---------------------------------------------------------------- AdamW

TEST(AdamWTest, ThreeStepsMatchHandComputedValues) {
  // p0 = 1, grads 0.5, -0.25, 0.125 read with grad_scale 2; lr 0.1, b1 0.9,
  // b2 0.95, eps 1e-8, weight decay 0.01. Values computed by hand (40-digit
  // decimal arithmetic) from the formula in ops.h.
  const double want_p[3] = {0.89900000099999999, 0.87126405653272217, 0.83572463014338464};
  const double want_m[3] = {0.1, 0.04, 0.061};
  const double want_v[3] = {0.05, 0.06, 0.060125};
  const double grads[3] = {0.5, -0.25, 0.125};
  double p = 1.0, g = 0.0, m = 0.0, v = 0.0;
  for (int step = 1; step <= 3; ++step) {
    g = grads[step - 1];
    AdamWParams a;
    a.param = Tensor(&p, DType::kF64, {1});
    a.grad = Tensor(&g, DType::kF64, {1});
    a.m = Tensor(&m, DType::kF64, {1});
    a.v = Tensor(&v, DType::kF64, {1});
    a.lr = 0.1;
    a.beta1 = 0.9;
    a.beta2 = 0.95;
    a.eps = 1e-8;
    a.weight_decay = 0.01;
    a.grad_scale = 2.0;
    a.step = step;
    ASSERT_TRUE(a.Validate().ok());
    cpu::AdamW(a);
    EXPECT_NEAR(p, want_p[step - 1], 1e-15) << "step " << step;
    EXPECT_NEAR(m, want_m[step - 1], 1e-15) << "step " << step;
    EXPECT_NEAR(v, want_v[step - 1], 1e-15) << "step " << step;
  }
}

TYPED_TEST(TypedOpsTest, AdamWMatchesScalarReferenceOnLargeBuffer) {
  using T = TypeParam;
  const int64_t n = 100003;  // threaded
  std::vector<double> p = RandomUniform(n, 70), m(n, 0.0), v(n, 0.0);
  std::vector<T> pt = Cast<T>(p), mt(n, T(0)), vt(n, T(0));
  p = Cast<double>(pt);
  const double lr = 3e-3, b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 0.1, gs = 0.5;
  for (int step = 1; step <= 3; ++step) {
    std::vector<T> gt = Cast<T>(RandomUniform(n, 71 + step, -3.0, 3.0));
    gt[0] = T(0);  // v stays 0: sqrt(0) must be 0, not NaN
    gt[1] = T(1e-20);  // v ~ 1e-41, a denormal in F32
    gt[n - 1] = T(1e4);
    AdamWParams a;
    a.param = Tensor(pt.data(), DTypeOf<T>(), {n});
    a.grad = Tensor(gt.data(), DTypeOf<T>(), {n});
    a.m = Tensor(mt.data(), DTypeOf<T>(), {n});
    a.v = Tensor(vt.data(), DTypeOf<T>(), {n});
    a.lr = lr;
    a.beta1 = b1;
    a.beta2 = b2;
    a.eps = eps;
    a.weight_decay = wd;
    a.grad_scale = gs;
    a.step = step;
    cpu::AdamW(a);
    for (int64_t i = 0; i < n; ++i) {
      const double g = gt[i] * gs;
      m[i] = b1 * m[i] + (1 - b1) * g;
      v[i] = b2 * v[i] + (1 - b2) * g * g;
      const double mhat = m[i] / (1 - std::pow(b1, step)), vhat = v[i] / (1 - std::pow(b2, step));
      p[i] -= lr * (mhat / (std::sqrt(vhat) + eps) + wd * p[i]);
    }
  }
  ExpectAllClose(pt, p, sizeof(T) == 4 ? kF32Tol : 1e-13, "param");
  ExpectAllClose(mt, m, sizeof(T) == 4 ? kF32Tol : 1e-13, "m");
  ExpectAllClose(vt, v, sizeof(T) == 4 ? kF32Tol : 1e-13, "v");
}

}  // namespace
}  // namespace longctx
