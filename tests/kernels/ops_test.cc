// Why: the CPU kernels are the reference every other backend is tested
// against, so each is pinned here three ways: forward values against a naive
// formula written independently of kernels/math, every backward against central
// finite differences in F64 (tests/support/finite_diff.h), and F32 against F64.
// Row-strided views are exercised with padded buffers whose gap elements must be
// neither read nor written; large sizes exercise the threaded paths.
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

namespace longctx {
namespace {

using test::CheckGradient;
using test::Dot;
using test::GradCheckResult;
using test::RandomUniform;

constexpr double kGradTol = 1e-6;  // max relative error of a finite-difference check
constexpr double kF32Tol = 1e-5;   // F32 vs F64, relative

template <class T>
DType DTypeOf() {
  return sizeof(T) == 4 ? DType::kF32 : DType::kF64;
}

template <class T, class U>
std::vector<T> Cast(const std::vector<U>& v) {
  return std::vector<T>(v.begin(), v.end());
}

// A buffer holding a tensor whose dimension 0 is strided: rows of row_size
// elements, ld apart, the first at offset off. Gap elements are part of v, so
// tests can check the kernels neither read nor write them.
template <class T>
struct Padded {
  std::vector<int64_t> dims;
  int64_t rows = 0, row_size = 1, ld = 0, off = 0;
  std::vector<T> v;

  Padded(std::vector<int64_t> d, int64_t pad = 0, int64_t offset = 0) : dims(std::move(d)), off(offset) {
    rows = dims[0];
    for (size_t i = 1; i < dims.size(); ++i) row_size *= dims[i];
    ld = row_size + pad;
    v.assign(static_cast<size_t>(off + rows * ld + pad), T(0));
  }
  template <class U>
  Padded<U> Like() const {
    Padded<U> p(dims, ld - row_size, off);
    p.v = Cast<U>(v);
    return p;
  }
  Tensor tensor() {
    Tensor t;
    t.data = v.data() + off;
    t.dtype = DTypeOf<T>();
    t.ndim = static_cast<int>(dims.size());
    for (int i = 0; i < t.ndim; ++i) t.shape[i] = dims[i];
    t.row_stride = ld == row_size ? 0 : ld;
    return t;
  }
  T& at(int64_t r, int64_t c) { return v[off + r * ld + c]; }
  bool in_view(int64_t i) const {
    i -= off;
    return i >= 0 && i / ld < rows && i % ld < row_size;
  }
  void Randomize(uint64_t seed, double lo = -1.0, double hi = 1.0) {
    v = Cast<T>(RandomUniform(static_cast<int64_t>(v.size()), seed, lo, hi));
  }
  // The view's elements, densely.
  std::vector<T> Dense() const {
    std::vector<T> d;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < row_size; ++c) d.push_back(v[off + r * ld + c]);
    return d;
  }
  // Gap elements set to value (e.g. 0 in an analytic gradient, whose numeric
  // counterpart is 0 because the op never reads the gaps).
  void SetGaps(T value) {
    for (size_t i = 0; i < v.size(); ++i)
      if (!in_view(static_cast<int64_t>(i))) v[i] = value;
  }
  void SetView(T value) {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < row_size; ++c) at(r, c) = value;
  }
};

// |got - want| <= rtol * (|want| + 0.1 * max|want|), element by element:
// relative for the large elements, and relative to the tensor's scale for the
// small ones (a GEMM or reduction output can be a cancellation of much larger
// terms, whose F32 rounding is relative to those terms, not to the result).
template <class A, class B>
void ExpectAllClose(const std::vector<A>& got, const std::vector<B>& want, double rtol, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double scale = 0;
  for (const B& w : want) scale = std::max(scale, std::fabs(static_cast<double>(w)));
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = static_cast<double>(got[i]), w = static_cast<double>(want[i]);
    ASSERT_LE(std::fabs(g - w), rtol * (std::fabs(w) + 0.1 * scale))
        << what << "[" << i << "]: got " << g << " want " << w;
  }
}

void ExpectGradOk(const GradCheckResult& r, const char* what) {
  EXPECT_GT(r.checked, 0) << what;
  EXPECT_LT(r.max_rel_error, kGradTol) << what << ": " << r.ToString();
}

template <class T>
class TypedOpsTest : public ::testing::Test {};
using FloatTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(TypedOpsTest, FloatTypes);

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

// ---------------------------------------------------------------- RmsNorm

template <class T>
struct RmsNormBuffers {
  Padded<T> x, y, dy, dx;
  std::vector<T> w, rstd, dw;
  RmsNormBuffers(int64_t n, int64_t d, int64_t pad)
      : x({n, d}, pad, 1), y({n, d}, pad + 1, 0), dy({n, d}, pad, 2), dx({n, d}, pad, 1), w(d), rstd(n), dw(d) {}
  RmsNormParams Params(double eps, bool accumulate) {
    const int64_t n = x.rows, d = x.row_size;
    RmsNormParams p;
    p.x = x.tensor();
    p.weight = Tensor(w.data(), DTypeOf<T>(), {d});
    p.y = y.tensor();
    p.rstd = Tensor(rstd.data(), DTypeOf<T>(), {n});
    p.eps = eps;
    p.dy = dy.tensor();
    p.dx = dx.tensor();
    p.dweight = Tensor(dw.data(), DTypeOf<T>(), {d});
    p.accumulate_dx = accumulate;
    return p;
  }
};

TYPED_TEST(TypedOpsTest, RmsNormForwardMatchesNaive) {
  using T = TypeParam;
  const int64_t n = 9, d = 13;
  const double eps = 1e-5;
  RmsNormBuffers<T> b(n, d, 3);
  b.x.Randomize(40);
  b.w = Cast<T>(RandomUniform(d, 41, 0.5, 1.5));
  const std::vector<T> y0 = b.y.v;
  RmsNormParams p = b.Params(eps, false);
  ASSERT_TRUE(p.Validate(false).ok());
  cpu::RmsNormForward(p);
  for (int64_t r = 0; r < n; ++r) {
    double ms = 0;
    for (int64_t c = 0; c < d; ++c) ms += static_cast<double>(b.x.at(r, c)) * b.x.at(r, c);
    const double rstd = 1.0 / std::sqrt(ms / d + eps);
    const double tol = sizeof(T) == 4 ? 1e-6 : 1e-14;
    EXPECT_NEAR(b.rstd[r], rstd, tol * rstd);
    for (int64_t c = 0; c < d; ++c) {
      const double want = b.x.at(r, c) * rstd * static_cast<double>(b.w[c]);
      ASSERT_NEAR(b.y.at(r, c), want, tol * (std::fabs(want) + 1e-3)) << r << "," << c;
    }
  }
  for (size_t i = 0; i < b.y.v.size(); ++i)
    if (!b.y.in_view(i)) {
      ASSERT_EQ(b.y.v[i], y0[i]);
    }
}

TEST(RmsNormTest, BackwardMatchesFiniteDifferences) {
  const int64_t n = 5, d = 8;
  const double eps = 1e-5;
  RmsNormBuffers<double> b(n, d, 2);
  b.x.Randomize(42);
  b.x.SetGaps(0.0);  // the checker also differentiates the gaps: their gradient is 0
  b.w = RandomUniform(d, 43, 0.5, 1.5);
  const std::vector<double> g = RandomUniform(n * d, 44);
  auto loss = [&] {
    cpu::RmsNormForward(b.Params(eps, false));
    return Dot(b.y.Dense(), g);
  };
  loss();
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < d; ++c) b.dy.at(r, c) = g[r * d + c];
  b.dx.SetView(std::numeric_limits<double>::quiet_NaN());  // overwritten when !accumulate
  const std::vector<double> prior = RandomUniform(d, 45);
  b.dw = prior;  // dweight accumulates
  cpu::RmsNormBackward(b.Params(eps, false));
  std::vector<double> dw(d);
  for (int64_t c = 0; c < d; ++c) dw[c] = b.dw[c] - prior[c];
  ExpectGradOk(CheckGradient(loss, b.x.v.data(), b.x.v.size(), b.dx.v.data()), "dx");
  ExpectGradOk(CheckGradient(loss, b.w.data(), d, dw.data()), "dweight");

  // accumulate_dx adds the same gradient onto what is there.
  std::vector<double> once = b.dx.Dense();
  b.dx.SetView(0.5);
  b.dw = prior;
  cpu::RmsNormBackward(b.Params(eps, true));
  std::vector<double> twice = b.dx.Dense();
  for (size_t i = 0; i < once.size(); ++i) ASSERT_NEAR(twice[i], once[i] + 0.5, 1e-15) << i;
}

TEST(RmsNormTest, LargeF32MatchesF64AndSampledFiniteDifferences) {
  const int64_t n = 701, d = 96;  // threaded; 701 rows in uneven backward chunks
  const double eps = 1e-6;
  RmsNormBuffers<double> b(n, d, 0);
  b.x.Randomize(46, -2.0, 2.0);
  b.w = RandomUniform(d, 47, 0.5, 1.5);
  b.dy.Randomize(48);
  RmsNormBuffers<float> f(n, d, 0);
  f.x.v = Cast<float>(b.x.v);
  f.w = Cast<float>(b.w);
  f.dy.v = Cast<float>(b.dy.v);
  b.x.v = Cast<double>(f.x.v);  // same (rounded) inputs for both
  b.w = Cast<double>(f.w);
  b.dy.v = Cast<double>(f.dy.v);
  cpu::RmsNormForward(b.Params(eps, false));
  cpu::RmsNormBackward(b.Params(eps, false));
  cpu::RmsNormForward(f.Params(eps, false));
  cpu::RmsNormBackward(f.Params(eps, false));
  ExpectAllClose(f.y.v, b.y.v, kF32Tol, "y");
  ExpectAllClose(f.rstd, b.rstd, kF32Tol, "rstd");
  ExpectAllClose(f.dx.v, b.dx.v, kF32Tol, "dx");
  ExpectAllClose(f.dw, b.dw, kF32Tol, "dweight");

  const std::vector<double> g = b.dy.Dense();
  std::vector<double> y(n * d), rstd(n);
  auto loss = [&] {
    RmsNormParams p = b.Params(eps, false);
    p.y = Tensor(y.data(), DType::kF64, {n, d});
    p.rstd = Tensor(rstd.data(), DType::kF64, {n});
    cpu::RmsNormForward(p);
    return Dot(y, g);
  };
  test::GradCheckOptions opt;
  opt.samples = 150;
  ExpectGradOk(CheckGradient(loss, b.x.v.data(), n * d, b.dx.v.data(), opt), "dx (sampled)");
  ExpectGradOk(CheckGradient(loss, b.w.data(), d, b.dw.data()), "dweight");
}

// ---------------------------------------------------------------- RoPE

// Explicit 2x2 rotation of the pair (j, j + rd/2) by the angle from the formula.
std::vector<double> NaiveRope(const std::vector<double>& x, const std::vector<int32_t>& pos, int64_t heads,
                              int64_t hd, int rd, double theta, double scale, int direction) {
  std::vector<double> out = x;
  const int half = rd / 2;
  for (size_t t = 0; t < pos.size(); ++t)
    for (int64_t h = 0; h < heads; ++h)
      for (int j = 0; j < half; ++j) {
        const double angle = direction * scale * pos[t] * std::pow(theta, -2.0 * j / rd);
        const double rot[2][2] = {{std::cos(angle), -std::sin(angle)}, {std::sin(angle), std::cos(angle)}};
        const size_t i1 = (t * heads + h) * hd + j, i2 = i1 + half;
        out[i1] = rot[0][0] * x[i1] + rot[0][1] * x[i2];
        out[i2] = rot[1][0] * x[i1] + rot[1][1] * x[i2];
      }
  return out;
}

// Positions with segment restarts, jumps and a long context (block re-seeding
// and the angle-addition recurrence are both exercised).
std::vector<int32_t> RopePositions(int64_t n) {
  std::vector<int32_t> pos(n);
  for (int64_t t = 0; t < n; ++t) {
    if (t < 70) pos[t] = t;                       // segment 0..69 crosses a 64-token block
    else if (t < 80) pos[t] = t - 70;             // restart
    else if (t < 150) pos[t] = 1000000 + (t - 80);  // long-context positions
    else pos[t] = static_cast<int32_t>((t * 37) % 101);  // arbitrary
  }
  return pos;
}

TYPED_TEST(TypedOpsTest, RopeMatchesExplicitRotation) {
  using T = TypeParam;
  const int64_t n = 170, heads = 3, hd = 10;
  const int rd = 6;  // dims 6..9 pass through
  const double theta = 500000.0, scale = 0.25;
  std::vector<int32_t> pos = RopePositions(n);
  for (int direction : {1, -1}) {
    Padded<T> x({n, heads, hd}, 7, 3);  // e.g. q inside a fused row
    x.Randomize(50);
    const std::vector<T> x0 = x.v;
    std::vector<double> dense = Cast<double>(x.Dense());
    RopeParams p;
    p.x = x.tensor();
    p.positions = Tensor(pos.data(), DType::kI32, {n});
    p.theta = theta;
    p.rotary_dim = rd;
    p.position_scale = scale;
    p.direction = direction;
    ASSERT_TRUE(p.Validate().ok());
    cpu::Rope(p);
    const std::vector<double> want = NaiveRope(dense, pos, heads, hd, rd, theta, scale, direction);
    const std::vector<T> got = x.Dense();
    // F64: angles near 2.5e5 rad carry ~1e-11 of rounding in any formula.
    const double tol = sizeof(T) == 4 ? 1e-6 : 1e-9;
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_NEAR(got[i], want[i], tol) << "element " << i << " token " << i / (heads * hd);
      if (static_cast<int64_t>(i % hd) >= rd) {
        ASSERT_EQ(got[i], static_cast<T>(dense[i])) << "pass-through " << i;
      }
    }
    for (size_t i = 0; i < x.v.size(); ++i)
      if (!x.in_view(i)) {
        ASSERT_EQ(x.v[i], x0[i]);
      }
  }
}

TEST(RopeTest, BackwardIsDirectionMinusOneAndMatchesFiniteDifferences) {
  const int64_t n = 75, heads = 2, hd = 8;
  std::vector<int32_t> pos = RopePositions(n);
  Padded<double> x({n, heads, hd}, 4, 1);
  x.Randomize(51);
  const std::vector<double> g = RandomUniform(n * heads * hd, 52);
  Padded<double> y({n, heads, hd}, 4, 1);
  auto rope = [&](Tensor t, int direction) {
    RopeParams p;
    p.x = t;
    p.positions = Tensor(pos.data(), DType::kI32, {n});
    p.theta = 10000.0;
    p.position_scale = 0.5;
    p.direction = direction;
    cpu::Rope(p);
  };
  auto loss = [&] {
    y.v = x.v;
    rope(y.tensor(), 1);
    return Dot(y.Dense(), g);
  };
  Padded<double> dx({n, heads, hd}, 4, 1);  // gaps stay 0
  for (int64_t t = 0; t < n; ++t)
    for (int64_t c = 0; c < heads * hd; ++c) dx.at(t, c) = g[t * heads * hd + c];
  rope(dx.tensor(), -1);
  ExpectGradOk(CheckGradient(loss, x.v.data(), x.v.size(), dx.v.data()), "dx");

  // Rotating back undoes the rotation.
  Padded<double> z = x.Like<double>();
  rope(z.tensor(), 1);
  rope(z.tensor(), -1);
  ExpectAllClose(z.v, x.v, 1e-13, "round trip");
}

TEST(RopeTest, F32MatchesF64AtLongContextPositions) {
  const int64_t n = 3000, heads = 4, hd = 64;  // threaded
  std::vector<int32_t> pos(n);
  for (int64_t t = 0; t < n; ++t) pos[t] = static_cast<int32_t>(t < 1500 ? 2000000 + t : t - 1500);
  std::vector<double> x = RandomUniform(n * heads * hd, 53);
  std::vector<float> x32 = Cast<float>(x);
  x = Cast<double>(x32);
  for (auto [data, dt] : {std::pair<void*, DType>{x.data(), DType::kF64}, {x32.data(), DType::kF32}}) {
    RopeParams p;
    p.x = Tensor(data, dt, {n, heads, hd});
    p.positions = Tensor(pos.data(), DType::kI32, {n});
    p.theta = 1000000.0;
    cpu::Rope(p);
  }
  ExpectAllClose(x32, x, kF32Tol, "rope");
}

// ---------------------------------------------------------------- LM head loss

struct NaiveCe {
  double sum = 0;
  std::vector<double> losses;
};

NaiveCe NaiveLmHeadLoss(const Padded<double>& x, const std::vector<double>& w, const std::vector<int32_t>& tgt,
                        int64_t vocab) {
  NaiveCe r;
  const int64_t d = x.row_size;
  for (int64_t t = 0; t < x.rows; ++t) {
    if (tgt[t] < 0) {
      r.losses.push_back(0.0);
      continue;
    }
    std::vector<long double> logits(vocab);
    long double mx = -INFINITY;
    for (int64_t v = 0; v < vocab; ++v) {
      long double s = 0;
      for (int64_t c = 0; c < d; ++c) s += static_cast<long double>(x.v[x.off + t * x.ld + c]) * w[v * d + c];
      logits[v] = s;
      mx = std::max(mx, s);
    }
    long double se = 0;
    for (long double l : logits) se += std::exp(l - mx);
    const long double loss = mx + std::log(se) - logits[tgt[t]];
    r.losses.push_back(static_cast<double>(loss));
    r.sum += static_cast<double>(loss);
  }
  return r;
}

template <class T>
LmHeadLossParams LmParams(Padded<T>& x, std::vector<T>& w, std::vector<int32_t>& tgt, int64_t vocab, int64_t chunk) {
  LmHeadLossParams p;
  p.x = x.tensor();
  p.weight = Tensor(w.data(), DTypeOf<T>(), {vocab, x.row_size});
  p.targets = Tensor(tgt.data(), DType::kI32, {x.rows});
  p.chunk_tokens = chunk;
  return p;
}

TYPED_TEST(TypedOpsTest, LmHeadLossMatchesNaiveLogSumExp) {
  using T = TypeParam;
  const int64_t n = 11, d = 6, vocab = 13;
  std::vector<int32_t> tgt = {3, -1, 12, 0, -1, -1, -1, -1, 7, 5, -1};  // tokens 4..7: a fully ignored chunk of 4
  Padded<double> xd({n, d}, 3, 1);
  xd.Randomize(60, -2.0, 2.0);
  std::vector<double> wd = RandomUniform(vocab * d, 61, -2.0, 2.0);
  const NaiveCe want = NaiveLmHeadLoss(xd, wd, tgt, vocab);
  Padded<T> x = xd.Like<T>();
  std::vector<T> w = Cast<T>(wd);
  for (int64_t chunk : {1, 4, 5, 100}) {
    std::vector<T> losses(n, T(-9));
    LmHeadLossParams p = LmParams(x, w, tgt, vocab, chunk);
    p.losses = Tensor(losses.data(), DTypeOf<T>(), {n});
    ASSERT_TRUE(p.Validate().ok());
    const double got = cpu::LmHeadLoss(p);
    const double tol = sizeof(T) == 4 ? 1e-5 : 1e-12;
    EXPECT_NEAR(got, want.sum, tol * want.sum) << "chunk " << chunk;
    for (int64_t t = 0; t < n; ++t) {
      if (tgt[t] < 0) {
        EXPECT_EQ(losses[t], T(0)) << t;
      } else {
        EXPECT_NEAR(losses[t], want.losses[t], tol * want.losses[t]) << t;
      }
    }
  }
  // Large logits do not overflow (stable log-sum-exp).
  Padded<T> big = xd.Like<T>();
  for (T& v : big.v) v *= T(300);
  LmHeadLossParams p = LmParams(big, w, tgt, vocab, 4);
  const double l = cpu::LmHeadLoss(p);
  EXPECT_TRUE(std::isfinite(l)) << l;
  EXPECT_GT(l, 0.0);
}

TEST(LmHeadLossTest, GradientsMatchFiniteDifferences) {
  const int64_t n = 11, d = 6, vocab = 13;
  std::vector<int32_t> tgt = {3, -1, 12, 0, -1, -1, -1, -1, 7, 5, -1};
  const double grad_scale = 0.7;
  Padded<double> x({n, d}, 2, 1);
  x.Randomize(62);
  x.SetGaps(0.0);
  std::vector<double> w = RandomUniform(vocab * d, 63);
  for (int64_t chunk : {4, 3, 64}) {
    SCOPED_TRACE(testing::Message() << "chunk " << chunk);
    auto loss = [&] { return grad_scale * cpu::LmHeadLoss(LmParams(x, w, tgt, vocab, chunk)); };
    Padded<double> dx({n, d}, 2, 1);
    dx.SetView(std::numeric_limits<double>::quiet_NaN());  // overwritten, ignored rows included
    const std::vector<double> prior = RandomUniform(vocab * d, 64);
    std::vector<double> dw = prior;  // accumulated
    LmHeadLossParams p = LmParams(x, w, tgt, vocab, chunk);
    p.dx = dx.tensor();
    p.dweight = Tensor(dw.data(), DType::kF64, {vocab, d});
    p.grad_scale = grad_scale;
    ASSERT_TRUE(p.Validate().ok());
    const double with_grad = cpu::LmHeadLoss(p);
    EXPECT_NEAR(with_grad * grad_scale, loss(), 1e-12);
    for (int64_t t = 4; t < 8; ++t)
      for (int64_t c = 0; c < d; ++c) ASSERT_EQ(dx.at(t, c), 0.0) << "ignored token " << t;
    for (size_t i = 0; i < dw.size(); ++i) dw[i] -= prior[i];
    ExpectGradOk(CheckGradient(loss, x.v.data(), x.v.size(), dx.v.data()), "dx");
    ExpectGradOk(CheckGradient(loss, w.data(), vocab * d, dw.data()), "dweight");
  }
}

TEST(LmHeadLossTest, F32MatchesF64) {
  const int64_t n = 300, d = 40, vocab = 517;  // threaded softmax rows
  std::vector<int32_t> tgt(n);
  for (int64_t t = 0; t < n; ++t) tgt[t] = t % 7 == 3 ? -1 : static_cast<int32_t>((t * 31) % vocab);
  Padded<double> x({n, d});
  x.Randomize(65);
  std::vector<double> w = RandomUniform(vocab * d, 66);
  Padded<float> x32 = x.Like<float>();
  std::vector<float> w32 = Cast<float>(w);
  x = x32.Like<double>();
  w = Cast<double>(w32);
  std::vector<double> dx(n * d), dw(vocab * d, 0.0), losses(n);
  std::vector<float> dx32(n * d), dw32(vocab * d, 0.0f), losses32(n);
  LmHeadLossParams p = LmParams(x, w, tgt, vocab, 64);
  p.dx = Tensor(dx.data(), DType::kF64, {n, d});
  p.dweight = Tensor(dw.data(), DType::kF64, {vocab, d});
  p.losses = Tensor(losses.data(), DType::kF64, {n});
  p.grad_scale = 1.0 / n;
  LmHeadLossParams p32 = LmParams(x32, w32, tgt, vocab, 64);
  p32.dx = Tensor(dx32.data(), DType::kF32, {n, d});
  p32.dweight = Tensor(dw32.data(), DType::kF32, {vocab, d});
  p32.losses = Tensor(losses32.data(), DType::kF32, {n});
  p32.grad_scale = 1.0 / n;
  const double l64 = cpu::LmHeadLoss(p), l32 = cpu::LmHeadLoss(p32);
  EXPECT_NEAR(l32, l64, kF32Tol * l64);
  ExpectAllClose(losses32, losses, kF32Tol, "losses");
  ExpectAllClose(dx32, dx, kF32Tol, "dx");
  ExpectAllClose(dw32, dw, kF32Tol, "dweight");
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
