// Why: the tiled attention's tests (tests/kernels/attention_test.cc and
// attention_key_parts_test.cc) share one way of laying out inputs and
// checking outputs: a Case (documents, heads, head dim, window, strided
// views), the host buffers and AttentionParams the training code would pass
// (padding filled with a sentinel no kernel may write), and the checks
// against the explicit-matrix double reference and against central finite
// differences of the forward.
#ifndef LONGCTX_TESTS_SUPPORT_ATTENTION_FIXTURE_H_
#define LONGCTX_TESTS_SUPPORT_ATTENTION_FIXTURE_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/cpu_kernels.h"
#include "base/log.h"
#include "kernels/ops.h"
#include "tests/support/naive_attention.h"
#include "tests/support/op_test_util.h"
#include "tests/support/test_seed.h"

namespace longctx::attention_fixture {

using testing::NaiveAttentionBackward;
using testing::NaiveAttentionForward;
using testing::NaiveAttentionShape;

struct Case {
  std::string name;
  std::vector<int32_t> seqlens;
  int heads = 2;
  int kv_heads = 2;
  int head_dim = 16;
  int window = 0;
  double scale = 0.0;
  bool strided = false;  // q|k|v and dq|dk|dv as column views of fused buffers
  uint32_t seed = 1;
};

inline const std::vector<int32_t> kDocs = {1, 5, 130, 1, 163};  // N = 300

inline NaiveAttentionShape ShapeOf(const Case& c) {
  NaiveAttentionShape s;
  s.cu_seqlens = {0};
  for (int32_t len : c.seqlens) s.cu_seqlens.push_back(s.cu_seqlens.back() + len);
  s.n = s.cu_seqlens.back();
  s.heads = c.heads;
  s.kv_heads = c.kv_heads;
  s.head_dim = c.head_dim;
  s.window = c.window;
  s.scale = c.scale;
  return s;
}

using op_test::DTypeOf;
using op_test::RandomNormalIn;

struct Inputs {
  std::vector<double> q, k, v, d_o;
};

template <class T>
Inputs RandomInputs(const NaiveAttentionShape& s, uint32_t seed) {
  std::mt19937 rng(test::FreshSeed(seed));
  Inputs in;
  in.q = RandomNormalIn<T>(s.n * s.heads * s.head_dim, rng);
  in.k = RandomNormalIn<T>(s.n * s.kv_heads * s.head_dim, rng);
  in.v = RandomNormalIn<T>(s.n * s.kv_heads * s.head_dim, rng);
  in.d_o = RandomNormalIn<T>(s.n * s.heads * s.head_dim, rng);
  return in;
}

constexpr double kSentinel = 12345.0;  // fills padding no kernel may write

// Host buffers laid out like the training code lays them out, and the
// AttentionParams viewing them. Strided: q|k|v are column slices of one fused
// [N, (H + 2 Hkv) d + pad] matrix (dq|dk|dv likewise), o and d_o are padded.
template <class T>
struct Buffers {
  NaiveAttentionShape s;
  int64_t qkv_width = 0, o_width = 0;
  std::vector<T> qkv, dqkv, o, d_o, lse;
  std::vector<int32_t> cu;
  AttentionParams p;
  cpu::AttentionConfig config;  // which tile kernels (ISA) run

  Buffers(const Case& c, const Inputs& in) : s(ShapeOf(c)), cu(s.cu_seqlens) {
    const int64_t n = s.n, h = s.heads, hkv = s.kv_heads, d = s.head_dim;
    const DType dt = DTypeOf<T>();
    const int64_t pad = c.strided ? 3 : 0;
    qkv_width = (h + 2 * hkv) * d + pad;
    o_width = h * d + pad;
    qkv.assign(n * qkv_width, static_cast<T>(kSentinel));
    dqkv.assign(n * qkv_width, static_cast<T>(kSentinel));
    o.assign(n * o_width, static_cast<T>(kSentinel));
    d_o.assign(n * o_width, static_cast<T>(kSentinel));
    lse.assign(h * n, static_cast<T>(kSentinel));
    // Column views of the fused matrices, then 3-D with the fused row stride.
    auto view = [&](std::vector<T>& buf, int64_t width, int64_t col0, int64_t heads) {
      Tensor fused(buf.data(), dt, {n, width});
      Tensor cols = fused.Cols(col0, col0 + heads * d);
      Tensor t(cols.data, dt, {n, heads, d});
      t.row_stride = cols.stride0();
      return t;
    };
    if (c.strided) {
      p.q = view(qkv, qkv_width, 0, h);
      p.k = view(qkv, qkv_width, h * d, hkv);
      p.v = view(qkv, qkv_width, (h + hkv) * d, hkv);
      p.dq = view(dqkv, qkv_width, 0, h);
      p.dk = view(dqkv, qkv_width, h * d, hkv);
      p.dv = view(dqkv, qkv_width, (h + hkv) * d, hkv);
      p.o = view(o, o_width, 0, h);
      p.d_o = view(d_o, o_width, 0, h);
      EXPECT_FALSE(p.q.contiguous());
      EXPECT_FALSE(p.o.contiguous());
    } else {
      // Dense: three separate tensors carved out of the same allocation.
      p.q = Tensor(qkv.data(), dt, {n, h, d});
      p.k = Tensor(qkv.data() + n * h * d, dt, {n, hkv, d});
      p.v = Tensor(qkv.data() + n * (h + hkv) * d, dt, {n, hkv, d});
      p.dq = Tensor(dqkv.data(), dt, {n, h, d});
      p.dk = Tensor(dqkv.data() + n * h * d, dt, {n, hkv, d});
      p.dv = Tensor(dqkv.data() + n * (h + hkv) * d, dt, {n, hkv, d});
      p.o = Tensor(o.data(), dt, {n, h, d});
      p.d_o = Tensor(d_o.data(), dt, {n, h, d});
    }
    p.lse = Tensor(lse.data(), dt, {h, n});
    p.cu_seqlens = Tensor(cu.data(), DType::kI32, {static_cast<int64_t>(cu.size())});
    p.window = c.window;
    p.scale = c.scale;
    Put(p.q, in.q);
    Put(p.k, in.k);
    Put(p.v, in.v);
    Put(p.d_o, in.d_o);
  }
  Buffers(const Buffers&) = delete;

  static void Put(const Tensor& t, const std::vector<double>& x) {
    const int64_t rs = t.row_size();
    for (int64_t i = 0; i < t.shape[0]; ++i)
      for (int64_t j = 0; j < rs; ++j) t.as<T>()[i * t.stride0() + j] = static_cast<T>(x[i * rs + j]);
  }
  static std::vector<double> Get(const Tensor& t) {
    const int64_t rs = t.row_size();
    std::vector<double> x(t.shape[0] * rs);
    for (int64_t i = 0; i < t.shape[0]; ++i)
      for (int64_t j = 0; j < rs; ++j) x[i * rs + j] = t.as<T>()[i * t.stride0() + j];
    return x;
  }

  void Forward() {
    CHECK_OK(p.Validate(false));
    cpu::AttentionForward(p, config);
  }
  void Backward() {
    CHECK_OK(p.Validate(true));
    cpu::AttentionBackward(p, config);
  }

  // Padding columns of the fused/padded buffers still hold the sentinel.
  int64_t DirtyPadding() const {
    int64_t dirty = 0;
    auto scan = [&](const std::vector<T>& buf, int64_t width, int64_t used) {
      for (int64_t i = 0; i < s.n; ++i)
        for (int64_t j = used; j < width; ++j) dirty += buf[i * width + j] != static_cast<T>(kSentinel);
    };
    const int64_t qkv_used = (s.heads + 2 * s.kv_heads) * s.head_dim, o_used = s.heads * s.head_dim;
    scan(qkv, qkv_width, qkv_used);
    scan(dqkv, qkv_width, qkv_used);
    scan(o, o_width, o_used);
    return dirty;
  }
};

// A figure for a test property (RecordProperty), to 4 significant digits.
inline std::string Sci(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", x);
  return buf;
}

// Every element within tol * (|want| + max(rms(want), floor)): relative, with
// the tensor's rms as the floor so entries near zero are judged on the
// tensor's scale. `floor` covers tensors that are zero in exact arithmetic
// (dq, dk when every query sees only itself: dS = dP - D cancels exactly).
inline void ExpectClose(const std::vector<double>& got, const std::vector<double>& want, double tol, const std::string& what,
                 double floor = 0.0) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double ss = 0;
  for (double w : want) ss += w * w;
  const double rms = std::max(want.empty() ? 0.0 : std::sqrt(ss / want.size()), floor);
  int64_t bad = 0, worst = -1;
  double worst_ratio = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double ratio = std::fabs(got[i] - want[i]) / (std::fabs(want[i]) + rms);
    if (!(ratio <= tol)) ++bad;
    if (!(ratio <= worst_ratio)) worst_ratio = ratio, worst = static_cast<int64_t>(i);
  }
  ::testing::Test::RecordProperty(what + "_worst_relative", Sci(worst_ratio));
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << got.size() << " elements off; worst at " << worst
                    << " got " << (worst >= 0 ? got[worst] : 0) << " want " << (worst >= 0 ? want[worst] : 0)
                    << " (relative " << worst_ratio << ", tol " << tol << ")";
}

// The root-mean-square error over the tensor's rms (at least `floor`) within
// tol: where elementwise errors have a heavy tail across random draws (bf16:
// one element in 10^5 may be off by 10-30x the RMS error), their RMS is as
// steady as the rounding that causes it, so it can be held tightly.
inline void ExpectRmsClose(const std::vector<double>& got, const std::vector<double>& want, double tol,
                           const std::string& what, double floor = 0.0) {
  ASSERT_EQ(got.size(), want.size()) << what;
  ASSERT_FALSE(want.empty()) << what;
  double ss = 0, se = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    ss += want[i] * want[i];
    se += (got[i] - want[i]) * (got[i] - want[i]);
  }
  const double n = static_cast<double>(want.size());
  const double relative = std::sqrt(se / n) / std::max(std::sqrt(ss / n), floor);
  ::testing::Test::RecordProperty(what + "_rms_relative", Sci(relative));
  EXPECT_LE(relative, tol) << what << ": RMS error " << relative << " of the tensor's rms (tol " << tol << ")";
}

// Unit-normal q, k, v, dO give gradients of order 0.1..1; errors are judged
// against at least this scale.
constexpr double kGradFloor = 0.1;

template <class T>
double Tol() {
  return sizeof(T) == 4 ? 1e-5 : 1e-10;
}

// F32 gradients carry the cancellation in dS = P * (dP - D): dP and D are
// ~|dO||v| sqrt(d) while their difference can be ~0 (exactly 0 when a query
// sees only itself), so their float rounding (~1e-6 absolute here) lands on
// gradients of scale ~0.1-0.5. The tail is heavy across fresh draws: over
// 120 draws of every F32 backward case (3,240 gradients each of dq, dk, dv)
// the worst element was at median 2.4e-6, 99th percentile 1.4e-5,
// largest 4.2e-5 (a query seeing only itself, dq = 0 exactly), so a bound
// set from one fixed draw would fail fresh ones. A wrong mask or product is off by
// O(1).
template <class T>
double GradTol() {
  return sizeof(T) == 4 ? 1e-4 : 1e-10;
}

template <class T>
void CheckForward(const Case& c, cpu::AttentionIsa isa = cpu::AttentionIsa::kAuto) {
  const NaiveAttentionShape s = ShapeOf(c);
  const Inputs in = RandomInputs<T>(s, c.seed);
  Buffers<T> b(c, in);
  b.config.isa = isa;
  b.Forward();
  std::vector<double> o(s.n * s.heads * s.head_dim), lse(s.heads * s.n);
  NaiveAttentionForward(s, in.q.data(), in.k.data(), in.v.data(), o.data(), lse.data());
  ExpectClose(Buffers<T>::Get(b.p.o), o, Tol<T>(), "o");
  ExpectClose(Buffers<T>::Get(b.p.lse), lse, Tol<T>(), "lse");
  EXPECT_EQ(b.DirtyPadding(), 0);
}

// key_parts: the backward's key parts (cpu::AttentionConfig; 0 = the
// driver's choice for the thread count).
template <class T>
void CheckBackward(const Case& c, cpu::AttentionIsa isa = cpu::AttentionIsa::kAuto, int key_parts = 0) {
  const NaiveAttentionShape s = ShapeOf(c);
  const Inputs in = RandomInputs<T>(s, c.seed + 1000);
  Buffers<T> b(c, in);
  b.config.isa = isa;
  b.config.backward_key_parts = key_parts;
  b.Forward();
  b.Backward();
  const int64_t nq = s.n * s.heads * s.head_dim, nk = s.n * s.kv_heads * s.head_dim;
  std::vector<double> dq(nq), dk(nk), dv(nk);
  NaiveAttentionBackward(s, in.q.data(), in.k.data(), in.v.data(), in.d_o.data(), dq.data(), dk.data(), dv.data());
  ExpectClose(Buffers<T>::Get(b.p.dq), dq, GradTol<T>(), "dq", kGradFloor);
  ExpectClose(Buffers<T>::Get(b.p.dk), dk, GradTol<T>(), "dk", kGradFloor);
  ExpectClose(Buffers<T>::Get(b.p.dv), dv, GradTol<T>(), "dv", kGradFloor);
  EXPECT_EQ(b.DirtyPadding(), 0);
}

// Central differences of L = sum(o * G) through the tiled F64 forward versus
// the tiled F64 backward with d_o = G. L(x + e) - L(x - e) is formed as
// sum((o+ - o-) * G) so unaffected outputs cancel exactly.
inline void CheckFiniteDifferences(const Case& c, int key_parts = 0) {
  const NaiveAttentionShape s = ShapeOf(c);
  const Inputs in = RandomInputs<double>(s, c.seed);
  Buffers<double> b(c, in);
  b.config.backward_key_parts = key_parts;
  b.Forward();
  b.Backward();
  const std::vector<double> grads[3] = {Buffers<double>::Get(b.p.dq), Buffers<double>::Get(b.p.dk),
                                        Buffers<double>::Get(b.p.dv)};
  const Tensor* inputs[3] = {&b.p.q, &b.p.k, &b.p.v};
  const char* names[3] = {"q", "k", "v"};
  std::mt19937 rng(test::FreshSeed(c.seed + 7));
  // eps 1e-5, near the central difference's optimum (cube root of double's
  // epsilon, times the inputs' unit scale): at 1e-6 the rounding of the
  // outputs, divided by 2 eps, reaches 1.9e-6 relative on fresh draws (worst
  // of 12 per test) against 1.3e-7 at 1e-5.
  const double eps = 1e-5;
  int checked = 0;
  double worst = 0;
  for (int t = 0; t < 3; ++t) {
    const Tensor& x = *inputs[t];
    const int64_t rs = x.row_size();
    std::uniform_int_distribution<int64_t> pick(0, x.shape[0] * rs - 1);
    for (int sample = 0; sample < 24; ++sample) {
      const int64_t flat = pick(rng), row = flat / rs, col = flat % rs;
      double* e = x.as<double>() + row * x.stride0() + col;
      const double x0 = *e;
      *e = x0 + eps;
      b.Forward();
      const std::vector<double> op = Buffers<double>::Get(b.p.o);
      *e = x0 - eps;
      b.Forward();
      const std::vector<double> om = Buffers<double>::Get(b.p.o);
      *e = x0;
      double dl = 0;
      for (size_t i = 0; i < op.size(); ++i) dl += (op[i] - om[i]) * in.d_o[i];
      const double fd = dl / (2 * eps), an = grads[t][flat];
      // Relative error; gradients below 1e-3 (e.g. keys of length-1 documents,
      // exactly 0) are judged on that scale. Observed worst ~1e-7.
      const double rel = std::fabs(fd - an) / std::max({std::fabs(fd), std::fabs(an), 1e-3});
      worst = std::max(worst, rel);
      EXPECT_LT(rel, 1e-6) << names[t] << " token " << row << " index " << col << ": fd " << fd << " analytic " << an;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 72);
  ::testing::Test::RecordProperty("worst_relative_error", Sci(worst));
}

}  // namespace longctx::attention_fixture

#endif  // LONGCTX_TESTS_SUPPORT_ATTENTION_FIXTURE_H_
