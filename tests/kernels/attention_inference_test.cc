// Why: the inference generalisation of the tiled attention forward (keys with
// their own, bottom-right aligned segments for KV-cache decode and chunked
// prefill; a diagonal offset for STRING's shifted part) and the log-sum-exp
// merge of two attentions are what STRING and the inference engine stand on.
// Each is checked on fresh random inputs against an explicit per-query double
// reference (tests/support/naive_attention.h) in F32 and F64, including rows
// that see no key (o = 0, lse = -inf) and how they merge, strided views, GQA,
// odd head_dim, windows that do not divide the tile; and the split of causal
// attention into a window part plus an offset part merges back to the plain
// causal attention.
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/backend.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_kernels.h"
#include "base/log.h"
#include "kernels/ops.h"
#include "tests/support/naive_attention.h"
#include "tests/support/op_test_util.h"
#include "tests/support/test_seed.h"

namespace longctx {
namespace {

using testing::NaiveAttentionForwardInference;
using testing::NaiveInferenceShape;

struct Case {
  std::string name;
  std::vector<int32_t> lq, lk;  // per segment: queries, keys (lk >= lq)
  int heads = 2, kv_heads = 2, head_dim = 16;
  int window = 0, offset = 0;
  bool strided = false;  // q and o as column views of wider matrices
  bool separate_k = true;  // cu_seqlens_k set (false: keys share cu_seqlens, lq == lk)
  uint32_t seed = 1;
};

std::vector<Case> AllCases() {
  std::vector<Case> cs;
  // Plain training-shaped calls with an offset (STRING part 2 in prefill).
  cs.push_back({"PrefillOffset5", {70, 1, 130}, {70, 1, 130}, 2, 2, 16, 0, 5, false, false, 1});
  cs.push_back({"PrefillOffset64Window100", {300}, {300}, 4, 2, 24, 100, 64, false, false, 2});
  cs.push_back({"PrefillOffsetLongerThanDocs", {3, 0, 9, 80}, {3, 0, 9, 80}, 2, 1, 8, 0, 50, false, false, 3});
  cs.push_back({"PrefillWindowOneBeyondOffset", {200}, {200}, 2, 2, 16, 38, 37, false, false, 4});
  cs.push_back({"PrefillWindow1Offset0", {65, 3}, {65, 3}, 2, 2, 8, 1, 0, false, false, 5});
  // Decode: one query per segment against a longer key segment.
  cs.push_back({"DecodeOneQuery", {1}, {257}, 4, 2, 32, 0, 0, false, true, 10});
  cs.push_back({"DecodeOneQueryWindow40", {1}, {257}, 4, 1, 16, 40, 0, true, true, 11});
  cs.push_back({"DecodeOneQueryOffset70", {1}, {257}, 4, 2, 16, 0, 70, false, true, 12});
  cs.push_back({"DecodeWindow90Offset30", {1}, {200}, 2, 2, 16, 90, 30, true, true, 13});
  cs.push_back({"DecodeOffsetReachesFirstKey", {1}, {20}, 2, 2, 8, 0, 19, false, true, 14});
  cs.push_back({"DecodeSeveralSequences", {1, 1, 1}, {5, 130, 1}, 4, 2, 16, 0, 0, false, true, 15});
  // Chunked prefill: a block of queries at the end of a longer key segment.
  cs.push_back({"ChunkAfterCache", {100}, {230}, 4, 2, 16, 0, 0, false, true, 20});
  cs.push_back({"ChunkWindow33", {77}, {200}, 4, 2, 16, 33, 0, true, true, 21});
  cs.push_back({"ChunkOffset10Window50", {70}, {150}, 2, 2, 16, 50, 10, false, true, 22});
  cs.push_back({"ChunksSeveralSegmentsOddDim", {5, 0, 64, 1}, {9, 3, 64, 70}, 4, 2, 13, 0, 3, true, true, 23});
  cs.push_back({"ChunkEqualLengths", {40}, {40}, 2, 2, 16, 0, 0, false, true, 24});
  return cs;
}

std::vector<int32_t> Prefix(const std::vector<int32_t>& lens) {
  std::vector<int32_t> cu = {0};
  for (int32_t l : lens) cu.push_back(cu.back() + l);
  return cu;
}

NaiveInferenceShape ShapeOf(const Case& c) {
  NaiveInferenceShape s;
  s.cu_q = Prefix(c.lq);
  s.cu_k = Prefix(c.lk);
  s.nq = s.cu_q.back();
  s.nk = s.cu_k.back();
  s.heads = c.heads;
  s.kv_heads = c.kv_heads;
  s.head_dim = c.head_dim;
  s.window = c.window;
  s.offset = c.offset;
  return s;
}

using op_test::DTypeOf;
using op_test::RandomNormalIn;

// Host storage of one [rows, heads, d] tensor, dense or as a column view of a
// wider matrix, and the view itself.
template <class T>
struct Host {
  std::vector<T> buf;
  Tensor t;
  Host(int64_t rows, int64_t heads, int64_t d, bool strided) {
    const int64_t width = heads * d + (strided ? 5 : 0), col0 = strided ? 2 : 0;
    buf.assign(std::max<int64_t>(1, rows * width), static_cast<T>(777));
    t = Tensor(buf.data() + col0, DTypeOf<T>(), {rows, heads, d});
    t.row_stride = width;
  }
  void Put(const std::vector<double>& x) {
    const int64_t rs = t.row_size();
    for (int64_t i = 0; i < t.shape[0]; ++i)
      for (int64_t j = 0; j < rs; ++j) t.as<T>()[i * t.stride0() + j] = static_cast<T>(x[i * rs + j]);
  }
  std::vector<double> Get() const {
    const int64_t rs = t.row_size();
    std::vector<double> x(t.shape[0] * rs);
    for (int64_t i = 0; i < t.shape[0]; ++i)
      for (int64_t j = 0; j < rs; ++j) x[i * rs + j] = t.as<T>()[i * t.stride0() + j];
    return x;
  }
};

// |got - want| <= tol * (|want| + rms(want)) elementwise; -inf must match -inf.
void ExpectClose(const std::vector<double>& got, const std::vector<double>& want, double tol,
                 const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double ss = 0;
  int64_t finite = 0;
  for (double w : want)
    if (std::isfinite(w)) ss += w * w, ++finite;
  const double rms = finite ? std::sqrt(ss / finite) : 0.0;
  int64_t bad = 0;
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isinf(want[i])) {
      bad += got[i] != want[i];
      continue;
    }
    const double diff = std::fabs(got[i] - want[i]), den = std::fabs(want[i]) + rms;
    const double r = diff == 0 ? 0.0 : diff / den;
    if (!(r <= tol)) ++bad;
    if (!(r <= worst)) worst = r;
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << got.size() << " off, worst relative " << worst;
}

// fp32: the training attention tests' bound (tests/support/attention_fixture.h),
// ~170 fp32 roundoffs; 2e-6 is too tight: fresh draws reach 2.2e-6
// (tests/support/test_seed.h).
template <class T>
double Tol() {
  return sizeof(T) == 4 ? 1e-5 : 1e-12;
}

template <class T>
void CheckInference(const Case& c) {
  const NaiveInferenceShape s = ShapeOf(c);
  std::mt19937 rng(test::FreshSeed(c.seed));
  const std::vector<double> q = RandomNormalIn<T>(s.nq * s.heads * s.head_dim, rng),
                            k = RandomNormalIn<T>(s.nk * s.kv_heads * s.head_dim, rng),
                            v = RandomNormalIn<T>(s.nk * s.kv_heads * s.head_dim, rng);
  Host<T> hq(s.nq, s.heads, s.head_dim, c.strided), ho(s.nq, s.heads, s.head_dim, c.strided),
      hk(s.nk, s.kv_heads, s.head_dim, c.strided), hv(s.nk, s.kv_heads, s.head_dim, false);
  hq.Put(q);
  hk.Put(k);
  hv.Put(v);
  std::vector<T> lse(s.heads * s.nq, static_cast<T>(777));
  std::vector<int32_t> cu_q = s.cu_q, cu_k = s.cu_k;
  AttentionParams p;
  p.q = hq.t;
  p.k = hk.t;
  p.v = hv.t;
  p.o = ho.t;
  p.lse = Tensor(lse.data(), DTypeOf<T>(), {s.heads, s.nq});
  p.cu_seqlens = Tensor(cu_q.data(), DType::kI32, {static_cast<int64_t>(cu_q.size())});
  if (c.separate_k) p.cu_seqlens_k = Tensor(cu_k.data(), DType::kI32, {static_cast<int64_t>(cu_k.size())});
  p.window = c.window;
  p.diagonal_offset = c.offset;
  ASSERT_TRUE(p.Validate(false).ok()) << p.Validate(false);
  std::unique_ptr<Backend> be = MakeCpuBackend();
  be->AttentionForward(p);

  std::vector<double> want_o(s.nq * s.heads * s.head_dim), want_lse(s.heads * s.nq);
  NaiveAttentionForwardInference(s, q.data(), k.data(), v.data(), want_o.data(), want_lse.data());
  ExpectClose(ho.Get(), want_o, Tol<T>(), c.name + " o");
  std::vector<double> got_lse(lse.begin(), lse.end());
  ExpectClose(got_lse, want_lse, Tol<T>(), c.name + " lse");
  // The reference must exercise what the case is about: some rows see keys,
  // and with an offset beyond some rows' reach, some see none.
  int64_t empty = 0;
  for (double l : want_lse) empty += std::isinf(l);
  EXPECT_LT(empty, static_cast<int64_t>(want_lse.size())) << c.name;
  // Padding columns of strided buffers are untouched.
  if (c.strided) {
    for (int64_t i = 0; i < s.nq; ++i)
      for (int64_t x = 0; x < 2; ++x) EXPECT_EQ(ho.buf[i * ho.t.stride0() + x], static_cast<T>(777));
  }
}

class AttentionInferenceTest : public ::testing::TestWithParam<Case> {};
TEST_P(AttentionInferenceTest, F64MatchesNaive) { CheckInference<double>(GetParam()); }
TEST_P(AttentionInferenceTest, F32MatchesNaive) { CheckInference<float>(GetParam()); }
INSTANTIATE_TEST_SUITE_P(Cases, AttentionInferenceTest, ::testing::ValuesIn(AllCases()),
                         [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

// Rows with no visible key at all: o = 0 exactly, lse = -inf.
TEST(AttentionInference, RowsSeeingNoKeyAreEmpty) {
  const int64_t n = 10, h = 2, d = 4;
  std::mt19937 rng(test::FreshSeed(3));
  std::vector<double> q = RandomNormalIn<float>(n * h * d, rng), k = RandomNormalIn<float>(n * h * d, rng);
  std::vector<float> qf(q.begin(), q.end()), kf(k.begin(), k.end()), o(n * h * d, 5.f), lse(h * n, 5.f);
  std::vector<int32_t> cu = {0, 4, 10};
  AttentionParams p;
  p.q = Tensor(qf.data(), DType::kF32, {n, h, d});
  p.k = Tensor(kf.data(), DType::kF32, {n, h, d});
  p.v = p.k;
  p.o = Tensor(o.data(), DType::kF32, {n, h, d});
  p.lse = Tensor(lse.data(), DType::kF32, {h, n});
  p.cu_seqlens = Tensor(cu.data(), DType::kI32, {3});
  p.diagonal_offset = 6;  // at least as long as both segments: no row sees a key
  MakeCpuBackend()->AttentionForward(p);
  for (float x : o) EXPECT_EQ(x, 0.f);
  for (float l : lse) EXPECT_EQ(l, -std::numeric_limits<float>::infinity());
}

// --- Merge ---

template <class T>
void CheckMerge(bool in_place) {
  const int64_t n = 23, h = 3, d = 13;
  std::mt19937 rng(test::FreshSeed(in_place ? 8 : 9));
  const std::vector<double> o1 = RandomNormalIn<T>(n * h * d, rng), o2 = RandomNormalIn<T>(n * h * d, rng);
  std::vector<double> lse1 = RandomNormalIn<T>(h * n, rng), lse2 = RandomNormalIn<T>(h * n, rng);
  const double inf = std::numeric_limits<double>::infinity();
  // Empty parts (lse = -inf with o = 0), both empty, and far-apart lse values.
  std::vector<double> o1e = o1, o2e = o2;
  auto empty = [&](std::vector<double>& lse, std::vector<double>& o, int64_t i, int64_t hh) {
    lse[hh * n + i] = -inf;
    for (int64_t x = 0; x < d; ++x) o[(i * h + hh) * d + x] = 0;
  };
  empty(lse1, o1e, 0, 0);
  empty(lse2, o2e, 1, 0);
  empty(lse1, o1e, 2, 1);
  empty(lse2, o2e, 2, 1);
  lse1[2 * n + 3] = 80;
  lse2[2 * n + 3] = -80;
  Host<T> h1(n, h, d, true), h2(n, h, d, false), ho(n, h, d, true);
  h1.Put(o1e);
  h2.Put(o2e);
  std::vector<T> l1(lse1.begin(), lse1.end()), l2(lse2.begin(), lse2.end()), lo(h * n, 0);
  AttentionMergeParams p;
  p.o1 = h1.t;
  p.o2 = h2.t;
  p.lse1 = Tensor(l1.data(), DTypeOf<T>(), {h, n});
  p.lse2 = Tensor(l2.data(), DTypeOf<T>(), {h, n});
  p.o = in_place ? h1.t : ho.t;
  p.lse = in_place ? p.lse1 : Tensor(lo.data(), DTypeOf<T>(), {h, n});
  ASSERT_TRUE(p.Validate().ok());
  MakeCpuBackend()->AttentionMerge(p);

  std::vector<double> want_o(n * h * d), want_lse(h * n);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t hh = 0; hh < h; ++hh) {
      const double a = lse1[hh * n + i], b = lse2[hh * n + i];
      const double l = (a == -inf && b == -inf) ? -inf : std::max(a, b) + std::log1p(std::exp(-std::fabs(a - b)));
      want_lse[hh * n + i] = l;
      const double w1 = l == -inf ? 0 : std::exp(a - l), w2 = l == -inf ? 0 : std::exp(b - l);
      for (int64_t x = 0; x < d; ++x) {
        const int64_t e = (i * h + hh) * d + x;
        want_o[e] = w1 * o1e[e] + w2 * o2e[e];
      }
    }
  ExpectClose((in_place ? h1 : ho).Get(), want_o, Tol<T>(), "merged o");
  std::vector<T>& got_l = in_place ? l1 : lo;
  ExpectClose(std::vector<double>(got_l.begin(), got_l.end()), want_lse, Tol<T>(), "merged lse");
  const T* out = (in_place ? h1 : ho).t.template as<T>();
  const int64_t so = (in_place ? h1 : ho).t.stride0();
  for (int64_t x = 0; x < d; ++x) EXPECT_EQ(out[2 * so + 1 * d + x], T(0));  // both parts empty
}

TEST(AttentionMerge, F32MatchesFormula) { CheckMerge<float>(false); }
TEST(AttentionMerge, F64MatchesFormula) { CheckMerge<double>(false); }
TEST(AttentionMerge, F32InPlace) { CheckMerge<float>(true); }
TEST(AttentionMerge, F64InPlace) { CheckMerge<double>(true); }

// Causal attention = merge(window-S part, offset-S part): the key sets
// {i - S < j <= i} and {j <= i - S} partition {j <= i}. Also through a window
// w > S: {i - S < j <= i} and {i - w < j <= i - S} partition {i - w < j <= i}.
template <class T>
void CheckSplitMergesBack(int window) {
  const std::vector<int32_t> cu = {0, 1, 90, 93, 260};
  const int64_t n = cu.back(), h = 4, hkv = 2, d = 16;
  const int s = 21;
  std::mt19937 rng(test::FreshSeed(window + 5));
  const std::vector<double> q = RandomNormalIn<T>(n * h * d, rng), k = RandomNormalIn<T>(n * hkv * d, rng),
                            v = RandomNormalIn<T>(n * hkv * d, rng);
  std::vector<T> qt(q.begin(), q.end()), kt(k.begin(), k.end()), vt(v.begin(), v.end());
  std::vector<T> o_full(n * h * d), o1(n * h * d), o2(n * h * d), l_full(h * n), l1(h * n), l2(h * n);
  std::vector<int32_t> cuv = cu;
  std::unique_ptr<Backend> be = MakeCpuBackend();
  AttentionParams p;
  p.q = Tensor(qt.data(), DTypeOf<T>(), {n, h, d});
  p.k = Tensor(kt.data(), DTypeOf<T>(), {n, hkv, d});
  p.v = Tensor(vt.data(), DTypeOf<T>(), {n, hkv, d});
  p.cu_seqlens = Tensor(cuv.data(), DType::kI32, {static_cast<int64_t>(cuv.size())});
  p.o = Tensor(o_full.data(), DTypeOf<T>(), {n, h, d});
  p.lse = Tensor(l_full.data(), DTypeOf<T>(), {h, n});
  p.window = window;
  be->AttentionForward(p);
  p.o = Tensor(o1.data(), DTypeOf<T>(), {n, h, d});
  p.lse = Tensor(l1.data(), DTypeOf<T>(), {h, n});
  p.window = s;
  be->AttentionForward(p);
  p.o = Tensor(o2.data(), DTypeOf<T>(), {n, h, d});
  p.lse = Tensor(l2.data(), DTypeOf<T>(), {h, n});
  p.window = window;
  p.diagonal_offset = s;
  be->AttentionForward(p);
  AttentionMergeParams m;
  m.o1 = m.o = Tensor(o1.data(), DTypeOf<T>(), {n, h, d});
  m.lse1 = m.lse = Tensor(l1.data(), DTypeOf<T>(), {h, n});
  m.o2 = Tensor(o2.data(), DTypeOf<T>(), {n, h, d});
  m.lse2 = Tensor(l2.data(), DTypeOf<T>(), {h, n});
  be->AttentionMerge(m);
  ExpectClose(std::vector<double>(o1.begin(), o1.end()), std::vector<double>(o_full.begin(), o_full.end()),
              sizeof(T) == 4 ? 5e-6 : 1e-13, "merged vs causal o");
  ExpectClose(std::vector<double>(l1.begin(), l1.end()), std::vector<double>(l_full.begin(), l_full.end()),
              sizeof(T) == 4 ? 5e-6 : 1e-13, "merged vs causal lse");
}

TEST(AttentionSplit, FullF32) { CheckSplitMergesBack<float>(0); }
TEST(AttentionSplit, FullF64) { CheckSplitMergesBack<double>(0); }
TEST(AttentionSplit, Window50F32) { CheckSplitMergesBack<float>(50); }
TEST(AttentionSplit, Window50F64) { CheckSplitMergesBack<double>(50); }

// Validation: the inference fields are forward-only, and a segment cannot
// have more queries than keys.
TEST(AttentionInference, ValidateRejectsMisuse) {
  std::vector<float> buf(4 * 2 * 4);
  std::vector<int32_t> cu = {0, 2}, cu_k = {0, 1};
  AttentionParams p;
  p.q = p.o = p.d_o = p.dq = Tensor(buf.data(), DType::kF32, {2, 2, 4});
  p.k = p.v = p.dk = p.dv = Tensor(buf.data(), DType::kF32, {1, 2, 4});
  p.lse = Tensor(buf.data(), DType::kF32, {2, 2});
  p.cu_seqlens = Tensor(cu.data(), DType::kI32, {2});
  p.cu_seqlens_k = Tensor(cu_k.data(), DType::kI32, {2});
  absl::Status st = p.Validate(false);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("only 1 keys"), std::string::npos) << st;
  EXPECT_NE(p.Validate(true).message().find("forward-only"), std::string::npos) << p.Validate(true);
  AttentionParams b;
  b.q = b.o = b.d_o = b.dq = b.k = b.v = b.dk = b.dv = Tensor(buf.data(), DType::kF32, {2, 2, 4});
  b.lse = Tensor(buf.data(), DType::kF32, {2, 2});
  b.cu_seqlens = Tensor(cu.data(), DType::kI32, {2});
  b.diagonal_offset = 1;
  EXPECT_TRUE(b.Validate(false).ok());
  EXPECT_NE(b.Validate(true).message().find("forward-only"), std::string::npos);
  b.diagonal_offset = -1;
  EXPECT_FALSE(b.Validate(false).ok());
}

}  // namespace
}  // namespace longctx
