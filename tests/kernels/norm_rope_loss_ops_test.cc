// Why: the CPU RMSNorm, RoPE and fused LM-head cross-entropy kernels, each
// pinned against a naive formula written independently of kernels/math, every
// backward against central finite differences in F64, and F32 against F64.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "tests/support/finite_diff.h"
#include "tests/support/op_test_util.h"

namespace longctx {
namespace {

using namespace ::longctx::op_test;  // NOLINT: test helpers

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

// A BF16 y (the input of bf16 products) holds exactly the F32 y rounded as
// Copy rounds: strided x, threaded rows, a row length not a multiple of the
// vector width; and only with an F32 x.
TEST(RmsNormTest, Bf16OutputIsTheRoundedF32Output) {
  const int64_t n = 300, d = 333;
  Padded<float> x({n, d}, 5, 2);
  x.Randomize(41, -3.0, 3.0);
  const std::vector<float> w = Cast<float>(RandomUniform(d, 42));
  std::vector<float> y(n * d), rstd(n), rstd16(n);
  std::vector<uint16_t> want(n * d), got(n * d, 0xFFFF);
  RmsNormParams p;
  p.x = x.tensor();
  p.weight = Tensor(const_cast<float*>(w.data()), DType::kF32, {d});
  p.rstd = Tensor(rstd.data(), DType::kF32, {n});
  p.y = Tensor(y.data(), DType::kF32, {n, d});
  cpu::RmsNormForward(p);
  cpu::Copy(Tensor(want.data(), DType::kBF16, {n, d}), p.y);
  p.y = Tensor(got.data(), DType::kBF16, {n, d});
  p.rstd = Tensor(rstd16.data(), DType::kF32, {n});
  ASSERT_TRUE(p.Validate(false).ok()) << p.Validate(false);
  cpu::RmsNormForward(p);
  EXPECT_EQ(got, want);
  EXPECT_EQ(rstd16, rstd);
  p.y = Tensor(got.data(), DType::kBF16, {n, d - 1});
  EXPECT_NE(p.Validate(false).message().find("y BF16[300,332] vs x"), std::string::npos) << p.Validate(false);
  std::vector<double> x64(n * d), w64(d), r64(n);
  RmsNormParams f64;
  f64.x = Tensor(x64.data(), DType::kF64, {n, d});
  f64.weight = Tensor(w64.data(), DType::kF64, {d});
  f64.rstd = Tensor(r64.data(), DType::kF64, {n});
  f64.y = Tensor(got.data(), DType::kBF16, {n, d});
  EXPECT_FALSE(f64.Validate(false).ok());
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
  for (int64_t chunk : {1, 4, 5, 100, 0}) {  // 0: the default rows for the vocab (all 11 here)
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

// The default chunk keeps a chunk's F32 logits within 128 MiB, between 256
// and 1,024 rows; a chunk the caller sets is kept; a negative one is refused.
TEST(LmHeadLossTest, DefaultChunkRowsFollowTheVocab) {
  EXPECT_EQ(DefaultLmHeadChunkRows(13), 1024);
  EXPECT_EQ(DefaultLmHeadChunkRows(32000), 1024);     // 131 MB
  EXPECT_EQ(DefaultLmHeadChunkRows(49152), 682);      // 128 MiB / (49,152 x 4)
  EXPECT_EQ(DefaultLmHeadChunkRows(128256), 261);
  EXPECT_EQ(DefaultLmHeadChunkRows(1 << 20), 256);    // never fewer
  std::vector<float> w(32000 * 2), x(2 * 2);
  std::vector<int32_t> tgt = {0, 1};
  LmHeadLossParams p;
  p.x = Tensor(x.data(), DType::kF32, {2, 2});
  p.weight = Tensor(w.data(), DType::kF32, {32000, 2});
  p.targets = Tensor(tgt.data(), DType::kI32, {2});
  EXPECT_EQ(p.ChunkRows(), 1024);
  p.chunk_tokens = 7;
  EXPECT_EQ(p.ChunkRows(), 7);
  p.chunk_tokens = -1;
  const absl::Status st = p.Validate();
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("chunk_tokens"), std::string::npos) << st;
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

}  // namespace
}  // namespace longctx
