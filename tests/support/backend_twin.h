// Why: a test that checks a backend against the CPU reference needs each
// tensor twice — dense on the host for the reference, and in the backend's
// memory as a row-strided view whose padding holds a sentinel no op may
// write — plus the closeness checks to compare them. These are those pieces
// (tests/kernels/backend_consistency_test.cc uses them for every op).
#ifndef LONGCTX_TESTS_SUPPORT_BACKEND_TWIN_H_
#define LONGCTX_TESTS_SUPPORT_BACKEND_TWIN_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/backend.h"
#include "kernels/tensor.h"

namespace longctx::backend_twin {

template <class T>
constexpr DType DTypeOf() {
  return sizeof(T) == 4 ? DType::kF32 : DType::kF64;
}

template <class T>
double Tol() {
  return sizeof(T) == 4 ? 1e-4 : 1e-10;
}

inline constexpr double kSentinel = 12345.0;  // padding no op may write

inline Tensor MakeTensor(void* data, DType dtype, const std::vector<int64_t>& shape, Device device, int64_t row_stride) {
  Tensor t;
  t.data = data;
  t.dtype = dtype;
  t.device = device;
  t.ndim = static_cast<int>(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) t.shape[i] = shape[i];
  t.row_stride = row_stride;
  return t;
}

// Uniform in [lo, hi), never exactly zero, representable in T.
template <class T>
T Draw(std::mt19937& rng, double lo = -1.0, double hi = 1.0) {
  std::uniform_real_distribution<double> dist(lo, hi);
  T v;
  do v = static_cast<T>(dist(rng));
  while (v == T(0));
  return v;
}

// One tensor held twice: dense on the host (what the CPU reference runs on),
// and in the memory of the backend under test as a view whose rows are padded
// by `pad` elements (row_stride = row_size + pad) filled with a sentinel.
template <class T>
class Twin {
 public:
  Twin(Backend* b, std::vector<int64_t> shape, int64_t pad) : b_(b), shape_(std::move(shape)), pad_(pad) {
    rows_ = shape_[0];
    row_ = 1;
    for (size_t i = 1; i < shape_.size(); ++i) row_ *= shape_[i];
    stride_ = row_ + pad_;
    host_.assign(static_cast<size_t>(rows_ * row_), T(0));
    buf_ = DeviceBuffer(b_, std::max<size_t>(sizeof(T), static_cast<size_t>(rows_ * stride_) * sizeof(T)));
  }

  std::vector<T>& host() { return host_; }
  Tensor ref() { return MakeTensor(host_.data(), DTypeOf<T>(), shape_, Device::kCpu, 0); }
  Tensor dev() const { return MakeTensor(buf_.data(), DTypeOf<T>(), shape_, b_->device(), pad_ ? stride_ : 0); }

  Twin& Random(std::mt19937& rng, double lo = -1.0, double hi = 1.0) {
    for (T& v : host_) v = Draw<T>(rng, lo, hi);
    return *this;
  }
  // Host values -> backend memory; padding set to pad_value.
  Twin& Upload(T pad_value = static_cast<T>(kSentinel)) {
    std::vector<T> padded(static_cast<size_t>(rows_ * stride_), pad_value);
    for (int64_t r = 0; r < rows_; ++r)
      std::copy(host_.begin() + r * row_, host_.begin() + (r + 1) * row_, padded.begin() + r * stride_);
    if (!padded.empty()) b_->CopyFromHost(Flat(), padded.data());
    return *this;
  }
  // Backend memory -> dense values; the padding must still hold the sentinel.
  std::vector<T> Download() const {
    std::vector<T> padded(static_cast<size_t>(rows_ * stride_));
    if (!padded.empty()) b_->CopyToHost(padded.data(), Flat());
    std::vector<T> out(static_cast<size_t>(rows_ * row_));
    int64_t dirty = 0;
    for (int64_t r = 0; r < rows_; ++r) {
      std::copy(padded.begin() + r * stride_, padded.begin() + r * stride_ + row_, out.begin() + r * row_);
      for (int64_t c = row_; c < stride_; ++c) dirty += padded[r * stride_ + c] != static_cast<T>(kSentinel);
    }
    EXPECT_EQ(dirty, 0) << "padding elements written";
    return out;
  }

 private:
  Tensor Flat() const { return MakeTensor(buf_.data(), DTypeOf<T>(), {rows_ * stride_}, b_->device(), 0); }

  Backend* b_;
  std::vector<int64_t> shape_;
  int64_t pad_, rows_ = 0, row_ = 0, stride_ = 0;
  std::vector<T> host_;
  DeviceBuffer buf_;
};

// An I32 index tensor: host copy for the reference, dense copy in the backend.
class Ints {
 public:
  Ints(Backend* b, std::vector<int32_t> values) : b_(b), host_(std::move(values)) {
    buf_ = DeviceBuffer(b_, std::max<size_t>(4, host_.size() * 4));
    if (!host_.empty()) b_->CopyFromHost(dev(), host_.data());
  }
  Tensor ref() { return MakeTensor(host_.data(), DType::kI32, {Size()}, Device::kCpu, 0); }
  Tensor dev() const { return MakeTensor(buf_.data(), DType::kI32, {Size()}, b_->device(), 0); }

 private:
  int64_t Size() const { return static_cast<int64_t>(host_.size()); }
  Backend* b_;
  std::vector<int32_t> host_;
  DeviceBuffer buf_;
};

// Every element within tol * (|want| + rms(want)): relative, with the
// tensor's rms as the floor so entries near zero are judged on its scale.
template <class T>
void ExpectClose(const std::vector<T>& got, const std::vector<T>& want, double tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double ss = 0;
  for (T w : want) ss += static_cast<double>(w) * static_cast<double>(w);
  const double rms = want.empty() ? 0.0 : std::sqrt(ss / want.size());
  int64_t bad = 0, worst = -1;
  double worst_ratio = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = got[i], w = want[i];
    const double err = std::fabs(g - w);
    const double ratio = err == 0 ? 0.0 : err / (std::fabs(w) + rms);
    if (!(ratio <= tol)) ++bad;
    if (!(ratio <= worst_ratio)) worst_ratio = ratio, worst = static_cast<int64_t>(i);
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << got.size() << " elements off; worst at " << worst
                    << ": got " << (worst >= 0 ? static_cast<double>(got[worst]) : 0.0) << " want "
                    << (worst >= 0 ? static_cast<double>(want[worst]) : 0.0) << " (ratio " << worst_ratio
                    << ", tol " << tol << ")";
}

template <class T>
void ExpectBitwiseEqual(const std::vector<T>& a, const std::vector<T>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(T)), 0) << what << ": repeated run differs";
}

inline void ExpectRelNear(double got, double want, double tol, const std::string& what) {
  EXPECT_LE(std::fabs(got - want), tol * std::max(std::fabs(want), 1e-30)) << what << ": got " << got << " want "
                                                                           << want;
}

// ||got - want|| / ||want||, in double.
template <class T>
double RelativeError(const std::vector<T>& got, const std::vector<T>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double e = static_cast<double>(got[i]) - static_cast<double>(want[i]);
    num += e * e;
    den += static_cast<double>(want[i]) * static_cast<double>(want[i]);
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

}  // namespace longctx::backend_twin

#endif  // LONGCTX_TESTS_SUPPORT_BACKEND_TWIN_H_
