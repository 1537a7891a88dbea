// Why: RoPER is implemented as rotations around an unchanged attention kernel
// (values rotated by their position j, the output by minus the query's
// position i: model/layer_attention.h). Its definition is
// o_i = sum_j a_ij R((j - i) theta) v_j; this test computes that sum directly
// with double loops (a_ij from the RoPE scores) and compares the layer's
// output on random fp32 inputs, for full and sliding layers, packed documents,
// GQA and partial value rotation (roper_dim < head_dim). The whole-model
// gradients with RoPER are in transformer_grad_test.cc. Also: RoPER's config
// validation and its Hugging Face config.json round trip.
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gtest/gtest.h"
#include "kernels/backend.h"
#include "kernels/cpu/cpu_backend.h"
#include "model/config.h"
#include "model/hf_config.h"
#include "model/layer_attention.h"
#include "tests/support/explicit_position_attention.h"
#include "tests/support/test_seed.h"

namespace longctx {
namespace {

using testing::RotateExplicit;

struct Case {
  std::string name;
  std::vector<int32_t> docs;
  AttentionKind kind;
  int window;
  int heads, kv_heads, head_dim, rope_dim, roper_dim;
  uint32_t seed;
};

class RoperTest : public ::testing::TestWithParam<Case> {};

TEST_P(RoperTest, OutputIsAttentionWeightedRelativelyRotatedValues) {
  const Case c = GetParam();
  ModelDims d;
  d.layers = 1;
  d.heads = c.heads;
  d.kv_heads = c.kv_heads;
  d.head_dim = c.head_dim;
  d.rope_dim = c.rope_dim;
  d.roper = true;
  d.roper_dim = c.roper_dim;
  d.theta = 50.f;
  d.window = c.window;
  d.kinds = {c.kind};
  std::vector<int32_t> cu = {0};
  for (int32_t len : c.docs) cu.push_back(cu.back() + len);
  const int64_t n = cu.back(), H = c.heads, Hkv = c.kv_heads, hd = c.head_dim, group = H / Hkv;
  std::mt19937 rng(test::FreshSeed(c.seed));
  std::normal_distribution<double> nd(0, 1);
  auto random = [&](int64_t count) {
    std::vector<double> x(count);
    for (double& e : x) e = static_cast<float>(nd(rng));
    return x;
  };
  const std::vector<double> q = random(n * H * hd), k = random(n * Hkv * hd), v = random(n * Hkv * hd);
  std::vector<int32_t> pos(n);
  for (size_t s = 0; s + 1 < cu.size(); ++s)
    for (int32_t t = cu[s]; t < cu[s + 1]; ++t) pos[t] = t - cu[s];

  // The layer under test.
  std::unique_ptr<Backend> be = MakeCpuBackend();
  std::vector<float> qf(q.begin(), q.end()), kf(k.begin(), k.end()), vf(v.begin(), v.end()), o(n * H * hd),
      lse(H * n);
  const Tensor kt(kf.data(), DType::kF32, {n, Hkv, hd}), vt(vf.data(), DType::kF32, {n, Hkv, hd}),
      pt(pos.data(), DType::kI32, {n});
  RotateKeysValues(*be, d, 0, StringOptions{}, kt, vt, pt);
  LayerAttention attention(be.get(), DType::kF32);
  LayerAttentionArgs a;
  a.dims = &d;
  a.q = Tensor(qf.data(), DType::kF32, {n, H, hd});
  a.k = kt;
  a.v = vt;
  a.q_positions = pt;
  a.cu_seqlens = Tensor(cu.data(), DType::kI32, {static_cast<int64_t>(cu.size())});
  a.o = Tensor(o.data(), DType::kF32, {n, H, hd});
  a.lse = Tensor(lse.data(), DType::kF32, {H, n});
  attention.Forward(a);

  // Direct: a_ij = softmax_j((R(i) q_i) . (R(j) k_j) / sqrt(hd)) over the
  // visible keys; o_i = sum_j a_ij R((j - i) theta) v_j.
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  double ss = 0, worst = 0, moved = 0;
  std::vector<double> want(n * H * hd, 0.0), plain(n * H * hd, 0.0);
  for (size_t s = 0; s + 1 < cu.size(); ++s)
    for (int64_t i = cu[s]; i < cu[s + 1]; ++i)
      for (int64_t h = 0; h < H; ++h) {
        const int64_t g = h / group;
        std::vector<double> qi(q.begin() + (i * H + h) * hd, q.begin() + (i * H + h + 1) * hd);
        RotateExplicit(qi.data(), c.rope_dim, d.theta, pos[i]);
        std::vector<int64_t> js;
        std::vector<double> sc;
        for (int64_t j = cu[s]; j <= i; ++j) {
          if (c.window > 0 && i - j >= c.window) continue;
          std::vector<double> kj(k.begin() + (j * Hkv + g) * hd, k.begin() + (j * Hkv + g + 1) * hd);
          RotateExplicit(kj.data(), c.rope_dim, d.theta, pos[j]);
          double dot = 0;
          for (int64_t x = 0; x < hd; ++x) dot += qi[x] * kj[x];
          js.push_back(j);
          sc.push_back(scale * dot);
        }
        double mx = -1e300, sum = 0;
        for (double e : sc) mx = std::max(mx, e);
        for (double e : sc) sum += std::exp(e - mx);
        for (size_t t = 0; t < js.size(); ++t) {
          const double aij = std::exp(sc[t] - mx) / sum;
          std::vector<double> vj(v.begin() + (js[t] * Hkv + g) * hd, v.begin() + (js[t] * Hkv + g + 1) * hd);
          for (int64_t x = 0; x < hd; ++x) plain[(i * H + h) * hd + x] += aij * vj[x];
          RotateExplicit(vj.data(), c.roper_dim, d.theta, static_cast<double>(pos[js[t]] - pos[i]));
          for (int64_t x = 0; x < hd; ++x) want[(i * H + h) * hd + x] += aij * vj[x];
        }
      }
  for (double w : want) ss += w * w;
  const double rms = std::sqrt(ss / want.size());
  for (size_t e = 0; e < want.size(); ++e) {
    worst = std::max(worst, std::fabs(o[e] - want[e]) / (std::fabs(want[e]) + rms));
    moved = std::max(moved, std::fabs(plain[e] - want[e]) / (std::fabs(want[e]) + rms));
  }
  EXPECT_LE(worst, 1e-5) << c.name;
  EXPECT_GT(moved, 1e-2) << c.name << ": the rotation must matter for the check to mean anything";
  // Dims beyond roper_dim are the plain attention output.
  for (int64_t e = 0; e < n * H; ++e)
    for (int64_t x = c.roper_dim; x < hd; ++x)
      EXPECT_NEAR(o[e * hd + x], plain[e * hd + x], 1e-5 * (1 + std::fabs(plain[e * hd + x])));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, RoperTest,
    ::testing::Values(Case{"FullGqaDocs", {30, 1, 70}, ROPE_FULL, 0, 4, 2, 16, 16, 16, 1},
                      Case{"FullPartialValueRotation", {30, 1, 70}, ROPE_FULL, 0, 4, 2, 16, 16, 6, 2},
                      Case{"SlidingWindow9PartialRope", {100, 7}, ROPE_SWA, 9, 4, 1, 16, 8, 16, 3},
                      Case{"SlidingWindow40Mha", {140}, ROPE_SWA, 40, 2, 2, 12, 12, 4, 4}),
    [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

ModelConfig Base() {
  ModelConfig m;
  m.set_hidden_size(64);
  m.set_num_heads(4);
  m.set_num_layers(4);
  return m;
}

TEST(RoperConfig, ResolvesAndValidates) {
  ModelConfig m = Base();
  m.set_roper(true);
  absl::StatusOr<ModelDims> d = ResolveModelConfig(m);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_TRUE(d->roper);
  EXPECT_EQ(d->roper_dim, 16);  // head_dim
  EXPECT_TRUE(d->uses_roper(0));

  m.set_layer_pattern(RNOPE_SWA);
  m.set_sliding_window(8);
  m.set_roper_dim(6);
  d = ResolveModelConfig(m);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->roper_dim, 6);
  EXPECT_TRUE(d->uses_roper(0));
  EXPECT_FALSE(d->uses_roper(3));  // NoPE layer: no positions to rotate by

  struct Bad {
    std::function<void(ModelConfig*)> set;
    std::string field;
  };
  const std::vector<Bad> bad = {
      {[](ModelConfig* c) { c->set_roper(true); c->set_roper_dim(7); }, "model.roper_dim"},
      {[](ModelConfig* c) { c->set_roper(true); c->set_roper_dim(18); }, "model.roper_dim"},
      {[](ModelConfig* c) { c->set_roper(true); c->set_roper_dim(-2); }, "model.roper_dim"},
      {[](ModelConfig* c) { c->set_roper_dim(4); }, "model.roper_dim"},
      {[](ModelConfig* c) { c->set_roper(true); c->set_layer_pattern(ALL_NOPE_FULL); }, "model.roper"},
  };
  for (const Bad& b : bad) {
    ModelConfig c = Base();
    b.set(&c);
    absl::StatusOr<ModelDims> r = ResolveModelConfig(c);
    ASSERT_FALSE(r.ok()) << b.field;
    EXPECT_EQ(r.status().message().rfind(b.field + ":", 0), 0u) << r.status();
  }
}

TEST(RoperConfig, HfConfigRoundTrip) {
  ModelConfig m = Base();
  m.set_roper(true);
  m.set_roper_dim(8);
  absl::StatusOr<ModelDims> d = ResolveModelConfig(m);
  ASSERT_TRUE(d.ok());
  const nlohmann::json j = HfConfigJson(*d, m, -1, 3);
  EXPECT_EQ(j["longctx_roper"], true);
  EXPECT_EQ(j["longctx_roper_dim"], 8);
  absl::StatusOr<ModelConfig> back = ModelConfigFromHfJson(j);
  ASSERT_TRUE(back.ok()) << back.status();
  absl::StatusOr<ModelDims> d2 = ResolveModelConfig(*back);
  ASSERT_TRUE(d2.ok());
  EXPECT_TRUE(d2->roper);
  EXPECT_EQ(d2->roper_dim, 8);
  // Without RoPER the key says so and the import keeps it off.
  ModelConfig plain = Base();
  const nlohmann::json jp = HfConfigJson(*ResolveModelConfig(plain), plain, -1, 3);
  EXPECT_EQ(jp["longctx_roper"], false);
  EXPECT_FALSE(jp.contains("longctx_roper_dim"));
  EXPECT_FALSE(ModelConfigFromHfJson(jp)->roper());
}

}  // namespace
}  // namespace longctx
