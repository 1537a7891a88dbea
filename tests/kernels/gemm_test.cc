// Why: every matmul of the model goes through cpu::Gemm, which hands row-major,
// possibly row-strided views straight to BLAS as leading dimensions. These tests
// pin that mapping against a naive triple loop: all four transpose
// combinations, alpha/beta, beta = 0 overwriting garbage, and Cols() views of
// larger buffers for A, B and C (whose gap columns must stay untouched).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "tests/support/finite_diff.h"

namespace longctx {
namespace {

template <class T>
DType DTypeOf() {
  return sizeof(T) == 4 ? DType::kF32 : DType::kF64;
}

template <class T>
std::vector<T> Cast(const std::vector<double>& v) {
  return std::vector<T>(v.begin(), v.end());
}

// A [rows, cols] view at column offset `off` of a [rows, cols + pad] buffer.
template <class T>
Tensor View(std::vector<T>& buf, int64_t rows, int64_t cols, int64_t off, int64_t pad) {
  Tensor full(buf.data(), DTypeOf<T>(), {rows, cols + pad});
  return pad == 0 ? full : full.Cols(off, off + cols);
}

struct GemmCase {
  int64_t m, n, k;
  bool ta, tb;
  double alpha, beta;
  int64_t pad;  // extra columns around each operand (0 = dense)
};

// C = alpha op(A) op(B) + beta C on strided views, vs a long-double triple loop.
template <class T>
void RunCase(const GemmCase& c, uint64_t seed) {
  const int64_t ar = c.ta ? c.k : c.m, ac = c.ta ? c.m : c.k;
  const int64_t br = c.tb ? c.n : c.k, bc = c.tb ? c.k : c.n;
  const int64_t off = c.pad > 0 ? 1 : 0;
  std::vector<T> a = Cast<T>(test::RandomUniform(ar * (ac + c.pad), seed));
  std::vector<T> b = Cast<T>(test::RandomUniform(br * (bc + c.pad), seed + 1));
  std::vector<T> cbuf = Cast<T>(test::RandomUniform(c.m * (c.n + c.pad), seed + 2));
  if (c.beta == 0.0)  // beta = 0 must overwrite, even garbage
    for (int64_t i = 0; i < c.m; ++i) cbuf[i * (c.n + c.pad) + off] = std::numeric_limits<T>::quiet_NaN();
  const std::vector<T> c0 = cbuf;

  GemmParams p;
  p.a = View(a, ar, ac, off, c.pad);
  p.b = View(b, br, bc, off, c.pad);
  p.c = View(cbuf, c.m, c.n, off, c.pad);
  p.trans_a = c.ta;
  p.trans_b = c.tb;
  p.alpha = c.alpha;
  p.beta = c.beta;
  ASSERT_TRUE(p.Validate().ok()) << p.Validate();
  cpu::Gemm(p);

  const int64_t lda = ac + c.pad, ldb = bc + c.pad, ldc = c.n + c.pad;
  auto A = [&](int64_t i, int64_t l) { return c.ta ? a[l * lda + off + i] : a[i * lda + off + l]; };
  auto B = [&](int64_t l, int64_t j) { return c.tb ? b[j * ldb + off + l] : b[l * ldb + off + j]; };
  const double tol = sizeof(T) == 4 ? 1e-5 : 1e-13;
  for (int64_t i = 0; i < c.m; ++i) {
    for (int64_t j = 0; j < c.n + c.pad; ++j) {
      const T got = cbuf[i * ldc + j];
      if (j < off || j >= off + c.n) {  // outside the view
        ASSERT_EQ(got, c0[i * ldc + j]) << "gap column " << j << " of row " << i << " was written";
        continue;
      }
      long double s = 0;
      for (int64_t l = 0; l < c.k; ++l) s += static_cast<long double>(A(i, l)) * B(l, j - off);
      long double want = c.alpha * s;
      if (c.beta != 0.0) want += c.beta * static_cast<long double>(c0[i * ldc + j]);
      ASSERT_NEAR(got, static_cast<double>(want), tol * (1.0 + std::sqrt(static_cast<double>(c.k))))
          << "C(" << i << "," << j - off << ") m=" << c.m << " n=" << c.n << " k=" << c.k << " ta=" << c.ta
          << " tb=" << c.tb << " pad=" << c.pad;
    }
  }
}

template <class T>
void RunAll() {
  uint64_t seed = 100;
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (int64_t pad : {0, 3}) {
        SCOPED_TRACE(testing::Message() << "ta=" << ta << " tb=" << tb << " pad=" << pad);
        RunCase<T>({7, 5, 9, ta, tb, 1.0, 0.0, pad}, seed++);
        RunCase<T>({7, 5, 9, ta, tb, 0.7, -0.3, pad}, seed++);
        RunCase<T>({1, 13, 4, ta, tb, -1.5, 1.0, pad}, seed++);
        RunCase<T>({65, 97, 130, ta, tb, 0.5, 0.25, pad}, seed++);
      }
}

TEST(GemmTest, MatchesNaiveF32) { RunAll<float>(); }
TEST(GemmTest, MatchesNaiveF64) { RunAll<double>(); }

// The fused-projection pattern: q, k, v are column slices of one [N, 3D]
// output, each produced by its own GEMM into a strided C view.
TEST(GemmTest, WritesColumnSlicesOfFusedOutput) {
  const int64_t n = 6, d_in = 5, d = 4;
  std::vector<double> x = test::RandomUniform(n * d_in, 7);
  std::vector<double> w = test::RandomUniform(3 * d * d_in, 8);
  std::vector<double> out(n * 3 * d, -7.0);
  Tensor xt(x.data(), DType::kF64, {n, d_in});
  Tensor wt(w.data(), DType::kF64, {3 * d, d_in});
  Tensor ot(out.data(), DType::kF64, {n, 3 * d});
  for (int part = 0; part < 3; ++part) {
    GemmParams p;
    p.a = xt;
    p.b = wt.Rows(part * d, (part + 1) * d);
    p.c = ot.Cols(part * d, (part + 1) * d);
    p.trans_b = true;
    ASSERT_TRUE(p.Validate().ok());
    cpu::Gemm(p);
  }
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < 3 * d; ++j) {
      double s = 0;
      for (int64_t l = 0; l < d_in; ++l) s += x[i * d_in + l] * w[j * d_in + l];
      EXPECT_NEAR(out[i * 3 * d + j], s, 1e-13) << i << "," << j;
    }
}

}  // namespace
}  // namespace longctx
