// Why: STRING (model/layer_attention.h) replaces positions by a matrix (paper
// Eq. 4): distance d < S keeps d, d >= S becomes d - S + W. These tests check
// (1) the paper's worked example (Fig. 5), (2) that the two-part plan the
// implementation runs (windows, diagonal offsets, query shifts) scores every
// (i, j) at exactly the paper's position, with no pair seen twice or missed,
// and (3) numerically, on random fp32 inputs, that prefill (packed documents)
// and decode (queries at the end of a longer key segment) outputs equal
// attention computed straight from the explicit position matrix in double
// (tests/support/explicit_position_attention.h), for full and sliding layers,
// GQA, S beyond the length, S = 1, several W, the RoPE table scale, partial
// rotary dims and RoPER.
#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "kernels/backend.h"
#include "kernels/cpu/cpu_backend.h"
#include "model/config.h"
#include "model/layer_attention.h"
#include "tests/support/explicit_position_attention.h"
#include "tests/support/test_seed.h"

namespace longctx {
namespace {

using testing::ExplicitAttentionSpec;
using testing::ExplicitPositionAttention;

// Eq. 4 as written: the position STRING assigns to query i, key j (i >= j).
int64_t PaperPosition(int64_t i, int64_t j, int s, int w) {
  const int64_t d = i - j;
  return d < s ? d : d - s + w;
}

TEST(StringPositions, Figure5WorkedExample) {
  // L = 9, S = 3, W = 0: the last row [8..0] becomes [5,4,3,2,1,0,2,1,0].
  const std::vector<int64_t> want = {5, 4, 3, 2, 1, 0, 2, 1, 0};
  std::vector<int64_t> row;
  for (int j = 0; j < 9; ++j) row.push_back(PaperPosition(8, j, 3, 0));
  EXPECT_EQ(row, want);
  // And the implementation's plan gives the same row.
  StringOptions o;
  o.enabled = true;
  o.s = 3;
  o.w = 0;
  const StringPlan plan = MakeStringPlan(o, /*uses_rope=*/true, /*layer_window=*/0);
  ASSERT_TRUE(plan.active);
  row.clear();
  for (int j = 0; j < 9; ++j) row.push_back(StringPlanPosition(plan, 0, 8, j));
  EXPECT_EQ(row, want);
  // Row 3 sits at the boundary: d = 3 = S is already shifted.
  row.clear();
  for (int j = 0; j <= 3; ++j) row.push_back(StringPlanPosition(plan, 0, 3, j));
  EXPECT_EQ(row, (std::vector<int64_t>{0, 2, 1, 0}));
}

// The plan's matrix is the paper's for every (i, j), for full layers and for
// sliding layers (where only d < w is visible; w <= S leaves them unchanged).
TEST(StringPositions, PlanMatchesPaperMatrixEverywhere) {
  const int L = 64;
  int checked = 0;
  for (int s : {1, 2, 3, 7, 21, 63, 64, 100})
    for (int w : {0, 1, 5, 32, 128})
      for (int window : {0, 4, 21, 40, 1000}) {
        StringOptions o;
        o.enabled = true;
        o.s = s;
        o.w = w;
        const StringPlan plan = MakeStringPlan(o, true, window);
        EXPECT_EQ(plan.active, window == 0 || window > s) << s << " " << window;
        for (int64_t i = 0; i < L; ++i)
          for (int64_t j = 0; j <= i; ++j) {
            const bool visible = window == 0 || i - j < window;
            const int64_t want = visible ? PaperPosition(i, j, s, w) : -1;
            ASSERT_EQ(StringPlanPosition(plan, window, i, j), want)
                << "S=" << s << " W=" << w << " window=" << window << " i=" << i << " j=" << j;
            ++checked;
          }
      }
  EXPECT_GT(checked, 100000);
  // Off, or on a NoPE layer: plain distances.
  StringOptions off;
  EXPECT_FALSE(MakeStringPlan(off, true, 0).active);
  StringOptions on;
  on.enabled = true;
  on.s = 2;
  EXPECT_FALSE(MakeStringPlan(on, /*uses_rope=*/false, 0).active);
  EXPECT_EQ(StringPlanPosition(MakeStringPlan(off, true, 0), 0, 9, 1), 8);
}

TEST(StringOptionsTest, ValidationNamesTheOption) {
  StringOptions o;
  o.enabled = true;
  o.s = 0;
  EXPECT_NE(ValidateStringOptions(o).message().find("string.s"), std::string::npos);
  o.s = 4;
  o.w = -1;
  EXPECT_NE(ValidateStringOptions(o).message().find("string.w"), std::string::npos);
  o.w = 0;
  EXPECT_TRUE(ValidateStringOptions(o).ok());
  EXPECT_NEAR(StringRopeTableScale({true, 4, 0, true}), 1.0 + 0.1 * std::log(2.0), 1e-15);
  EXPECT_EQ(StringRopeTableScale({true, 4, 0, false}), 1.0);
}

struct Case {
  std::string name;
  std::vector<int32_t> docs;  // segment lengths
  AttentionKind kind = ROPE_FULL;
  int window = 0;             // ROPE_SWA only
  int s = 8, w = 3;
  bool rope_scale = false;
  int heads = 4, kv_heads = 2, head_dim = 16, rope_dim = 16;
  bool roper = false;
  int roper_dim = 0;
  int decode_rows = 1;        // queries at the end of the last document for the decode check
  uint32_t seed = 1;
};

ModelDims DimsOf(const Case& c) {
  ModelDims d;
  d.name = c.name;
  d.vocab = 10;
  d.hidden = c.heads * c.head_dim;
  d.layers = 1;
  d.heads = c.heads;
  d.kv_heads = c.kv_heads;
  d.head_dim = c.head_dim;
  d.ffn = 8;
  d.rope_dim = c.rope_dim;
  d.window = c.kind == ROPE_SWA ? c.window : 0;
  d.theta = 60.f;  // small, so rotations over tens of positions matter
  d.roper = c.roper;
  d.roper_dim = c.roper ? (c.roper_dim ? c.roper_dim : c.head_dim) : 0;
  d.kinds = {c.kind};
  return d;
}

std::vector<double> Random(int64_t n, std::mt19937& rng) {
  std::normal_distribution<double> nd(0, 1);
  std::vector<double> x(n);
  for (double& e : x) e = static_cast<float>(nd(rng));
  return x;
}

// max over elements of |got - want| / (|want| + rms(want)).
double MaxRelError(const std::vector<float>& got, const std::vector<double>& want) {
  double ss = 0;
  for (double w : want) ss += w * w;
  const double rms = std::sqrt(ss / want.size());
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i)
    worst = std::max(worst, std::fabs(got[i] - want[i]) / (std::fabs(want[i]) + rms));
  return worst;
}

class StringAttentionTest : public ::testing::TestWithParam<Case> {};

TEST_P(StringAttentionTest, PrefillAndDecodeMatchExplicitPositionMatrix) {
  const Case c = GetParam();
  const ModelDims dims = DimsOf(c);
  std::vector<int32_t> cu = {0};
  for (int32_t len : c.docs) cu.push_back(cu.back() + len);
  const int64_t n = cu.back(), H = c.heads, Hkv = c.kv_heads, hd = c.head_dim;
  std::mt19937 rng(test::FreshSeed(c.seed));
  const std::vector<double> q = Random(n * H * hd, rng), k = Random(n * Hkv * hd, rng), v = Random(n * Hkv * hd, rng);

  StringOptions so;
  so.enabled = true;
  so.s = c.s;
  so.w = c.w;
  so.rope_scale = c.rope_scale;
  const int layer_window = dims.layer_window(0);
  const StringPlan plan = MakeStringPlan(so, true, layer_window);

  // Reference: the paper's matrix (plain distances where STRING leaves the
  // layer unchanged), window-masked.
  ExplicitAttentionSpec spec;
  spec.heads = H;
  spec.kv_heads = Hkv;
  spec.head_dim = hd;
  spec.rope_dim = c.rope_dim;
  spec.theta = dims.theta;
  spec.table_scale = plan.active ? StringRopeTableScale(so) : 1.0;
  spec.roper_dim = dims.roper_dim;
  auto position = [&](int64_t i, int64_t j) -> int64_t {
    if (layer_window > 0 && i - j >= layer_window) return -1;
    return plan.active ? PaperPosition(i, j, c.s, c.w) : i - j;
  };
  std::vector<double> want;
  ExplicitPositionAttention(spec, q, k, v, cu, position, &want);
  // The case must discriminate: where some distance reaches S, the STRING
  // matrix gives a clearly different output than plain RoPE positions.
  int64_t longest = 0;
  for (int32_t len : c.docs) longest = std::max<int64_t>(longest, len);
  if (plan.active && longest > c.s && c.w != c.s) {
    std::vector<double> plain;
    ExplicitAttentionSpec plain_spec = spec;
    plain_spec.table_scale = 1.0;
    ExplicitPositionAttention(plain_spec, q, k, v, cu,
                              [&](int64_t i, int64_t j) -> int64_t {
                                return layer_window > 0 && i - j >= layer_window ? -1 : i - j;
                              },
                              &plain);
    EXPECT_GT(MaxRelError(std::vector<float>(want.begin(), want.end()), plain), 1e-2) << c.name;
  }

  std::unique_ptr<Backend> be = MakeCpuBackend();
  LayerAttention attention(be.get(), DType::kF32);
  std::vector<int32_t> positions(n);
  for (size_t s = 0; s + 1 < cu.size(); ++s)
    for (int32_t t = cu[s]; t < cu[s + 1]; ++t) positions[t] = t - cu[s];

  // Prefill: all documents packed in one call.
  {
    std::vector<float> qf(q.begin(), q.end()), kf(k.begin(), k.end()), vf(v.begin(), v.end());
    std::vector<float> o(n * H * hd), lse(H * n);
    const Tensor kt(kf.data(), DType::kF32, {n, Hkv, hd}), vt(vf.data(), DType::kF32, {n, Hkv, hd});
    const Tensor pos(positions.data(), DType::kI32, {n});
    RotateKeysValues(*be, dims, 0, so, kt, vt, pos);
    LayerAttentionArgs a;
    a.dims = &dims;
    a.q = Tensor(qf.data(), DType::kF32, {n, H, hd});
    a.k = kt;
    a.v = vt;
    a.q_positions = pos;
    a.q_positions_host = positions.data();
    a.cu_seqlens = Tensor(cu.data(), DType::kI32, {static_cast<int64_t>(cu.size())});
    a.o = Tensor(o.data(), DType::kF32, {n, H, hd});
    a.lse = Tensor(lse.data(), DType::kF32, {H, n});
    a.string = so;
    attention.Forward(a);
    const double err = MaxRelError(o, want);
    EXPECT_LE(err, 1e-5) << c.name << " prefill";
    RecordProperty("prefill_max_rel_error", absl::StrFormat("%.3g", err));
  }

  // Decode: the last document's final decode_rows tokens as queries against
  // all of its keys (cu_seqlens_k), as the KV-cache engine calls it.
  {
    const int64_t kb = cu[cu.size() - 2], lk = n - kb, nq = c.decode_rows;
    ASSERT_LE(nq, lk);
    std::vector<float> qf(q.begin() + (n - nq) * H * hd, q.end());
    std::vector<float> kf(k.begin() + kb * Hkv * hd, k.end()), vf(v.begin() + kb * Hkv * hd, v.end());
    std::vector<int32_t> kpos(positions.begin() + kb, positions.end()), qpos(positions.end() - nq, positions.end());
    std::vector<int32_t> cu_q = {0, static_cast<int32_t>(nq)}, cu_k = {0, static_cast<int32_t>(lk)};
    std::vector<float> o(nq * H * hd), lse(H * nq);
    const Tensor kt(kf.data(), DType::kF32, {lk, Hkv, hd}), vt(vf.data(), DType::kF32, {lk, Hkv, hd});
    RotateKeysValues(*be, dims, 0, so, kt, vt, Tensor(kpos.data(), DType::kI32, {lk}));
    LayerAttentionArgs a;
    a.dims = &dims;
    a.q = Tensor(qf.data(), DType::kF32, {nq, H, hd});
    a.k = kt;
    a.v = vt;
    a.q_positions = Tensor(qpos.data(), DType::kI32, {nq});
    a.q_positions_host = qpos.data();
    a.cu_seqlens = Tensor(cu_q.data(), DType::kI32, {2});
    a.cu_seqlens_k = Tensor(cu_k.data(), DType::kI32, {2});
    a.o = Tensor(o.data(), DType::kF32, {nq, H, hd});
    a.lse = Tensor(lse.data(), DType::kF32, {H, nq});
    a.string = so;
    attention.Forward(a);
    const std::vector<double> want_rows(want.end() - nq * H * hd, want.end());
    const double err = MaxRelError(o, want_rows);
    EXPECT_LE(err, 1e-5) << c.name << " decode";
    RecordProperty("decode_max_rel_error", absl::StrFormat("%.3g", err));
  }
}

std::vector<Case> AllCases() {
  const std::vector<int32_t> docs = {37, 1, 90, 12, 150};
  std::vector<Case> cs;
  cs.push_back({"FullGqaDocs", docs, ROPE_FULL, 0, 20, 3});
  cs.push_back({"FullMhaW0", docs, ROPE_FULL, 0, 20, 0, false, 2, 2});
  cs.push_back({"FullW128LargerThanS", docs, ROPE_FULL, 0, 20, 128});
  cs.push_back({"FullS1", docs, ROPE_FULL, 0, 1, 5});
  cs.push_back({"FullSBeyondLength", docs, ROPE_FULL, 0, 400, 3});
  cs.push_back({"FullRopeScale", docs, ROPE_FULL, 0, 30, 7, true});
  cs.push_back({"FullPartialRotaryScaleMqa", docs, ROPE_FULL, 0, 25, 4, true, 4, 1, 16, 8});
  cs.push_back({"SlidingWindowBeyondS", docs, ROPE_SWA, 60, 20, 3});
  cs.push_back({"SlidingWindowWithinS", docs, ROPE_SWA, 15, 20, 3, true});
  cs.push_back({"SlidingWindowS1", docs, ROPE_SWA, 33, 1, 2});
  cs.push_back({"FullRoper", docs, ROPE_FULL, 0, 20, 3, false, 4, 2, 16, 16, true, 0});
  cs.push_back({"SlidingRoperPartialScale", docs, ROPE_SWA, 70, 24, 6, true, 4, 2, 16, 16, true, 6});
  cs.push_back({"FullDecodeChunk40", docs, ROPE_FULL, 0, 20, 3, false, 4, 2, 16, 16, false, 0, 40});
  cs.push_back({"SlidingDecodeChunk70", docs, ROPE_SWA, 50, 12, 2, true, 4, 2, 16, 16, true, 0, 70});
  return cs;
}

INSTANTIATE_TEST_SUITE_P(Cases, StringAttentionTest, ::testing::ValuesIn(AllCases()),
                         [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

}  // namespace
}  // namespace longctx
