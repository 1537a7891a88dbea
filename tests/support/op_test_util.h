// Why: helpers shared by the CPU op tests (tests/kernels/*_ops_test.cc):
// typed dtype mapping, padded row-strided buffers whose gap elements must be
// neither read nor written, closeness checks, and the tolerances.
#ifndef LONGCTX_TESTS_SUPPORT_OP_TEST_UTIL_H_
#define LONGCTX_TESTS_SUPPORT_OP_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "tests/support/finite_diff.h"

namespace longctx::op_test {

using test::CheckGradient;
using test::Dot;
using test::GradCheckResult;
using test::RandomUniform;

constexpr double kGradTol = 1e-6;  // max relative error of a finite-difference check
constexpr double kF32Tol = 1e-5;   // F32 vs F64, relative

template <class T>
constexpr DType DTypeOf() {
  return sizeof(T) == 4 ? DType::kF32 : DType::kF64;
}

// count N(0, 1) draws, each rounded to T and never 0, held in double: a double
// reference then sees exactly what the kernel under test sees in T.
template <class T>
std::vector<double> RandomNormalIn(int64_t count, std::mt19937& rng) {
  std::normal_distribution<double> dist(0.0, 1.0);
  std::vector<double> x(count);
  for (double& e : x) {
    do e = static_cast<double>(static_cast<T>(dist(rng)));
    while (e == 0.0);
  }
  return x;
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

inline void ExpectGradOk(const GradCheckResult& r, const char* what) {
  EXPECT_GT(r.checked, 0) << what;
  EXPECT_LT(r.max_rel_error, kGradTol) << what << ": " << r.ToString();
}

template <class T>
class TypedOpsTest : public ::testing::Test {};
using FloatTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(TypedOpsTest, FloatTypes);

}  // namespace longctx::op_test

#endif  // LONGCTX_TESTS_SUPPORT_OP_TEST_UTIL_H_
