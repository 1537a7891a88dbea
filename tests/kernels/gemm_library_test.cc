// Why: F32 products run on oneDNN's sgemm by default and on OpenBLAS when
// chosen (kernels/cpu/gemm_library.h). Both must compute the same product
// through the same strided, transposed views, so each is held here to a naive
// product in double on fresh random inputs: all four transpose combinations,
// odd sizes, row-strided views whose gap columns must stay untouched,
// alpha/beta, beta = 0 overwriting NaN, and k = 0. The library a MatmulConfig
// names must be what cpu::Gemm uses, and the library a CPU backend's options
// name must be what its Gemm uses.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/gemm_library.h"
#include "tests/support/finite_diff.h"

namespace longctx {
namespace {

using cpu::SgemmLibrary;

struct Case {
  int64_t m, n, k;
  bool ta, tb;
  double alpha, beta;
  int64_t pad;
};

std::vector<float> Random(int64_t n, uint64_t seed) {
  std::vector<double> d = test::RandomUniform(n, seed);
  return std::vector<float>(d.begin(), d.end());
}

Tensor View(std::vector<float>& buf, int64_t rows, int64_t cols, int64_t pad) {
  Tensor full(buf.data(), DType::kF32, {rows, cols + pad});
  return pad == 0 ? full : full.Cols(1, 1 + cols);
}

// Runs the case on `library` (or through cpu::Gemm when via_dispatch) and
// checks it against double sums; returns the result for cross-checks.
std::vector<float> RunCase(const Case& c, SgemmLibrary library, bool via_dispatch, uint64_t seed) {
  const int64_t ar = c.ta ? c.k : c.m, ac = c.ta ? c.m : c.k;
  const int64_t br = c.tb ? c.n : c.k, bc = c.tb ? c.k : c.n;
  const int64_t off = c.pad > 0 ? 1 : 0;
  std::vector<float> a = Random(ar * (ac + c.pad), seed), b = Random(br * (bc + c.pad), seed + 1);
  std::vector<float> cbuf = Random(c.m * (c.n + c.pad), seed + 2);
  if (c.beta == 0.0)
    for (int64_t i = 0; i < c.m; ++i) cbuf[i * (c.n + c.pad) + off] = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> c0 = cbuf;
  GemmParams p;
  p.a = View(a, ar, ac, c.pad);
  p.b = View(b, br, bc, c.pad);
  p.c = View(cbuf, c.m, c.n, c.pad);
  p.trans_a = c.ta;
  p.trans_b = c.tb;
  p.alpha = c.alpha;
  p.beta = c.beta;
  EXPECT_TRUE(p.Validate().ok()) << p.Validate();
  if (via_dispatch) {
    cpu::Gemm(p, cpu::MatmulConfig{.sgemm = library});
  } else {
    cpu::Sgemm(p, library);
  }
  const int64_t lda = ac + c.pad, ldb = bc + c.pad, ldc = c.n + c.pad;
  auto A = [&](int64_t i, int64_t l) { return c.ta ? a[l * lda + off + i] : a[i * lda + off + l]; };
  auto B = [&](int64_t l, int64_t j) { return c.tb ? b[j * ldb + off + l] : b[l * ldb + off + j]; };
  for (int64_t i = 0; i < c.m; ++i) {
    for (int64_t j = 0; j < c.n + c.pad; ++j) {
      const float got = cbuf[i * ldc + j];
      if (j < off || j >= off + c.n) {
        EXPECT_EQ(got, c0[i * ldc + j]) << "gap column " << j << " of row " << i << " was written";
        continue;
      }
      double s = 0, scale = 0;
      for (int64_t l = 0; l < c.k; ++l) {
        s += static_cast<double>(A(i, l)) * B(l, j - off);
        scale += std::fabs(static_cast<double>(A(i, l)) * B(l, j - off));
      }
      const double cold = c.beta == 0.0 ? 0.0 : c.beta * c0[i * ldc + j];
      const double norm = std::fabs(c.alpha) * scale + std::fabs(cold) + 1e-30;
      EXPECT_NEAR(got, c.alpha * s + cold, 1e-5 * norm)
          << cpu::SgemmLibraryName(library) << " C[" << i << "," << j - off << "] " << c.m << "x" << c.n << "x" << c.k
          << (c.ta ? " A^T" : "") << (c.tb ? " B^T" : "");
    }
  }
  return cbuf;
}

const Case kCases[] = {
    {1, 1, 1, false, false, 1.0, 0.0, 0},     {37, 29, 53, false, false, 1.0, 0.0, 0},
    {37, 29, 53, false, true, 1.0, 0.0, 3},   {37, 29, 53, true, false, -0.5, 1.0, 2},
    {37, 29, 53, true, true, 2.0, 0.5, 0},    {130, 71, 257, false, true, 1.0, 1.0, 5},
    {65, 131, 96, true, false, 1.0, 0.0, 0},  {7, 300, 33, true, true, 0.75, 0.0, 1},
    {200, 3, 129, false, false, 1.0, -1.0, 4}, {300, 260, 520, true, false, 1.0, 1.0, 0},
};

TEST(GemmLibraryTest, EveryLibraryMatchesDouble) {
  for (SgemmLibrary lib : {SgemmLibrary::kOneDnn, SgemmLibrary::kOpenBlas}) {
    uint64_t seed = 10;
    for (const Case& c : kCases) RunCase(c, lib, /*via_dispatch=*/false, seed += 10);
  }
}

TEST(GemmLibraryTest, ZeroInnerDimensionScalesC) {
  for (SgemmLibrary lib : {SgemmLibrary::kOneDnn, SgemmLibrary::kOpenBlas}) {
    std::vector<float> a(1), b(1), c = {1.f, 2.f, 3.f, 4.f};
    GemmParams p;
    p.a = Tensor(a.data(), DType::kF32, {2, 0});
    p.b = Tensor(b.data(), DType::kF32, {0, 2});
    p.c = Tensor(c.data(), DType::kF32, {2, 2});
    p.beta = 0.5;
    cpu::Sgemm(p, lib);
    EXPECT_EQ(c, (std::vector<float>{0.5f, 1.f, 1.5f, 2.f})) << cpu::SgemmLibraryName(lib);
    p.beta = 0.0;
    cpu::Sgemm(p, lib);
    EXPECT_EQ(c, (std::vector<float>{0.f, 0.f, 0.f, 0.f})) << cpu::SgemmLibraryName(lib);
  }
}

TEST(GemmLibraryTest, GemmUsesTheChosenLibrary) {
  for (SgemmLibrary lib : {SgemmLibrary::kOneDnn, SgemmLibrary::kOpenBlas}) {
    // Bitwise equal to the library called directly, on the same inputs.
    const Case c = {130, 71, 257, false, true, 1.0, 1.0, 5};
    EXPECT_EQ(RunCase(c, lib, /*via_dispatch=*/true, 77), RunCase(c, lib, /*via_dispatch=*/false, 77))
        << cpu::SgemmLibraryName(lib);
  }
  EXPECT_EQ(cpu::MatmulConfig{}.sgemm, SgemmLibrary::kOneDnn);  // the default
}

// The backend's options choose the library: its Gemm equals that library's
// sgemm bit for bit, and the two libraries differ somewhere on this product
// (so the comparison can fail).
TEST(GemmLibraryTest, CpuBackendOptionsChooseTheLibrary) {
  // Shapes of the model's products (fused q|k|v, the weight-gradient TN
  // product); on at least one the two libraries round differently.
  struct Shape {
    int64_t m, n, k;
    bool ta;
  };
  bool libraries_differ = false;
  for (const Shape& sh : {Shape{67, 93, 515, false}, Shape{512, 256, 2048, true}, Shape{2048, 512, 256, false}}) {
    const int64_t ar = sh.ta ? sh.k : sh.m, ac = sh.ta ? sh.m : sh.k;
    std::vector<float> a = Random(ar * ac, 3), b = Random(sh.k * sh.n, 4);
    auto product = [&](auto&& gemm) {
      std::vector<float> c(sh.m * sh.n, 0.f);
      GemmParams p;
      p.a = Tensor(a.data(), DType::kF32, {ar, ac});
      p.b = Tensor(b.data(), DType::kF32, {sh.k, sh.n});
      p.c = Tensor(c.data(), DType::kF32, {sh.m, sh.n});
      p.trans_a = sh.ta;
      gemm(p);
      return c;
    };
    std::vector<float> direct[2];
    int i = 0;
    for (GemmLibrary g : {GemmLibrary::kOneDnn, GemmLibrary::kOpenBlas}) {
      CpuBackendOptions o;
      o.gemm = g;
      std::unique_ptr<Backend> be = MakeCpuBackend({}, o);
      EXPECT_EQ(CpuBackendOptionsOf(*be)->gemm, g);
      const std::vector<float> by_backend = product([&](const GemmParams& p) { be->Gemm(p); });
      direct[i] = product([&](const GemmParams& p) {
        cpu::Sgemm(p, g == GemmLibrary::kOneDnn ? SgemmLibrary::kOneDnn : SgemmLibrary::kOpenBlas);
      });
      EXPECT_EQ(by_backend, direct[i]) << GemmLibraryName(g) << " " << sh.m << "x" << sh.n << "x" << sh.k;
      ++i;
    }
    libraries_differ = libraries_differ || direct[0] != direct[1];
  }
  EXPECT_TRUE(libraries_differ) << "oneDNN and OpenBLAS agree bit for bit on every shape; the test cannot tell them apart";
  EXPECT_EQ(CpuBackendOptionsOf(*MakeCpuBackend())->gemm, GemmLibrary::kOneDnn);  // kAuto resolves to oneDNN
  EXPECT_FALSE(ParseGemmLibrary("mkl").ok());
  EXPECT_EQ(*ParseGemmLibrary("openblas"), GemmLibrary::kOpenBlas);
}

}  // namespace
}  // namespace longctx
