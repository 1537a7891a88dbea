// Why: the analysis numbers go into docs/EXPERIMENTS.md, so each statistic is
// checked on inputs whose answer is known in closed form (uniform attention,
// a one-hot needle key, one-hot rotary pairs) and against brute force.
#include "model/attention_analysis.h"

#include <cmath>
#include <random>

#include <nlohmann/json.hpp>

#include "gtest/gtest.h"
#include "tests/support/test_seed.h"

namespace longctx {
namespace {

CapturedAttention MakeLayer(int64_t t, int64_t h, int64_t hkv, int64_t d, uint64_t seed) {
  CapturedAttention a;
  a.kind = "rope_full";
  a.uses_rope = true;
  a.tokens = t; a.heads = h; a.kv_heads = hkv; a.head_dim = d; a.rotary_dim = d;
  std::mt19937_64 rng(test::FreshSeed(seed));
  std::normal_distribution<float> n(0.f, 1.f);
  a.q.resize(t * h * d);
  a.k.resize(t * hkv * d);
  for (float& x : a.q) x = n(rng);
  for (float& x : a.k) x = n(rng);
  return a;
}

TEST(AttentionAnalysisTest, RowIsCausalWindowedSoftmaxWithGqa) {
  CapturedAttention a = MakeLayer(20, 4, 2, 8, 1);
  a.window = 5;
  for (int64_t h = 0; h < 4; ++h) {
    for (int64_t i : {0, 3, 4, 5, 19}) {
      std::vector<double> p = AttentionRow(a, h, i);
      ASSERT_EQ(static_cast<int64_t>(p.size()), i + 1);
      double z = 0, sum = 0;
      std::vector<double> want(i + 1, 0.0);
      for (int64_t j = std::max<int64_t>(0, i - 4); j <= i; ++j) {
        double s = 0;
        for (int d = 0; d < 8; ++d) s += double{a.q[(i * 4 + h) * 8 + d]} * a.k[(j * 2 + h / 2) * 8 + d];
        z += want[j] = std::exp(s / std::sqrt(8.0));
      }
      for (int64_t j = 0; j <= i; ++j) {
        EXPECT_NEAR(p[j], want[j] / z, 1e-12) << "h " << h << " i " << i << " j " << j;
        sum += p[j];
      }
      EXPECT_NEAR(sum, 1.0, 1e-12);
    }
  }
}

TEST(AttentionAnalysisTest, UniformAttentionGivesSegmentShares) {
  // q = 0 → every visible key gets 1/(i+1).
  CapturedAttention a = MakeLayer(30, 2, 1, 4, 2);
  std::fill(a.q.begin(), a.q.end(), 0.f);
  std::vector<Segment> labels(30, Segment::kContext);
  for (int i = 0; i < 10; ++i) labels[i] = Segment::kBegin;
  labels[15] = labels[16] = Segment::kNeedle;
  labels[28] = labels[29] = Segment::kQc;
  std::vector<LayerMass> m = AttentionMass({a}, labels);
  ASSERT_EQ(m.size(), 1u);
  // Rows 28 (29 keys) and 29 (30 keys), averaged.
  std::vector<double> mean(30, 0.0);
  for (int j = 0; j < 29; ++j) mean[j] += 0.5 / 29;
  for (int j = 0; j < 30; ++j) mean[j] += 0.5 / 30;
  double begin = 0, needle = mean[15] + mean[16], qc = mean[28] + mean[29], entropy = 0;
  for (int j = 0; j < 10; ++j) begin += mean[j];
  for (double p : mean) entropy -= p * std::log(p);
  EXPECT_NEAR(m[0].mass[0], begin, 1e-12);
  EXPECT_NEAR(m[0].mass[1], needle, 1e-12);
  EXPECT_NEAR(m[0].mass[3], qc, 1e-12);
  EXPECT_NEAR(m[0].mass[0] + m[0].mass[1] + m[0].mass[2] + m[0].mass[3], 1.0, 1e-12);
  EXPECT_NEAR(m[0].entropy, entropy, 1e-12);
}

TEST(AttentionAnalysisTest, NeedleKeyTakesTheMassAndSummaryGroupsByKind) {
  // One key aligned with every query and large: nearly all mass on it.
  CapturedAttention a = MakeLayer(24, 2, 2, 4, 3);
  for (float& x : a.q) x = 0.f;
  for (float& x : a.k) x = 0.f;
  for (int64_t i = 0; i < 24; ++i)
    for (int h = 0; h < 2; ++h) a.q[(i * 2 + h) * 4] = 10.f;
  for (int h = 0; h < 2; ++h) a.k[(12 * 2 + h) * 4] = 10.f;
  CapturedAttention b = a;
  b.layer = 1;
  b.kind = "nope_full";
  b.uses_rope = false;
  std::vector<Segment> labels(24, Segment::kContext);
  labels[12] = Segment::kNeedle;
  labels[22] = labels[23] = Segment::kQc;
  std::vector<LayerMass> m = AttentionMass({a, b}, labels);
  EXPECT_GT(m[0].mass[1], 0.999);
  EXPECT_LT(m[0].entropy, 0.01);
  std::vector<MassSummary> s = SummarizeMass(m);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].group, "rope");
  EXPECT_EQ(s[0].layers, 1);
  EXPECT_EQ(s[1].group, "nope");
  EXPECT_EQ(s[2].layers, 2);
  nlohmann::json j = MassToJson(m, s);
  EXPECT_NEAR(j["summary"][2]["mass"]["needle"].get<double>(), m[0].mass[1], 1e-12);
}

TEST(AttentionAnalysisTest, SpearmanMatchesKnownValues) {
  EXPECT_NEAR(SpearmanCorrelation({1, 2, 3, 4}, {10, 20, 30, 40}), 1.0, 1e-12);
  EXPECT_NEAR(SpearmanCorrelation({1, 2, 3, 4}, {4, 3, 2, 1}), -1.0, 1e-12);
  EXPECT_EQ(SpearmanCorrelation({1, 1, 1}, {1, 2, 3}), 0.0);
  // Ties get average ranks: x ranks (0.5, 0.5, 2), y ranks (0, 1, 2).
  const double rx[] = {0.5, 0.5, 2}, ry[] = {0, 1, 2};
  double mx = 1, my = 1, sxy = 0, sxx = 0, syy = 0;
  for (int i = 0; i < 3; ++i) {
    sxy += (rx[i] - mx) * (ry[i] - my);
    sxx += (rx[i] - mx) * (rx[i] - mx);
    syy += (ry[i] - my) * (ry[i] - my);
  }
  EXPECT_NEAR(SpearmanCorrelation({5, 5, 9}, {1, 2, 3}), sxy / std::sqrt(sxx * syy), 1e-12);
}

TEST(AttentionAnalysisTest, PairSharesAndDominantPairAgainstBruteForce) {
  // One-hot pair p = 1 in q and k: that pair carries all of q·k.
  CapturedAttention a = MakeLayer(6, 1, 1, 8, 4);
  for (float& x : a.q) x = 0.f;
  for (float& x : a.k) x = 0.f;
  for (int i = 0; i < 6; ++i) a.q[i * 8 + 1] = a.k[i * 8 + 1] = 1.f;
  std::vector<HeadContribution> c = RopePairContributions({a}, 1000, 1);
  ASSERT_EQ(c.size(), 1u);
  ASSERT_EQ(c[0].share.size(), 4u);
  EXPECT_NEAR(c[0].share[1], 1.0, 1e-12);
  EXPECT_EQ(c[0].pairs, 21);

  // Random inputs, rotary_dim < head_dim (extra bucket), all pairs: brute force.
  CapturedAttention r = MakeLayer(12, 2, 1, 10, 5);
  r.rotary_dim = 6;
  r.window = 4;
  std::vector<HeadContribution> got = RopePairContributions({r}, 1 << 20, 1);
  ASSERT_EQ(got.size(), 2u);
  for (int h = 0; h < 2; ++h) {
    std::vector<double> share(4, 0.0), dom, dist;
    int n = 0;
    for (int i = 0; i < 12; ++i) {
      for (int j = std::max(0, i - 3); j <= i; ++j, ++n) {
        std::vector<double> q(&r.q[(i * 2 + h) * 10], &r.q[(i * 2 + h) * 10] + 10);
        std::vector<double> k(&r.k[j * 10], &r.k[j * 10] + 10);
        double c3[4] = {q[0] * k[0] + q[3] * k[3], q[1] * k[1] + q[4] * k[4], q[2] * k[2] + q[5] * k[5],
                        q[6] * k[6] + q[7] * k[7] + q[8] * k[8] + q[9] * k[9]};
        double tot = 0;
        for (double v : c3) tot += std::abs(v);
        for (int p = 0; p < 4; ++p) share[p] += std::abs(c3[p]) / tot;
        dom.push_back(c3[0] >= c3[1] && c3[0] >= c3[2] ? 0 : (c3[1] >= c3[2] ? 1 : 2));
        dist.push_back(i - j);
      }
    }
    EXPECT_EQ(got[h].pairs, n);
    for (int p = 0; p < 4; ++p) EXPECT_NEAR(got[h].share[p], share[p] / n, 1e-9) << "pair " << p;
    EXPECT_NEAR(got[h].dominant_distance_corr, SpearmanCorrelation(dom, dist), 1e-12);
  }
  nlohmann::json j = ContributionsToJson(got, 0.0);
  EXPECT_EQ(j["positional_heads"].size(), 2u);

  // NoPE layers are skipped; sampling caps the pair count.
  CapturedAttention nope = MakeLayer(40, 1, 1, 4, 6);
  nope.uses_rope = false;
  EXPECT_TRUE(RopePairContributions({nope}, 10, 1).empty());
  CapturedAttention big = MakeLayer(40, 1, 1, 4, 7);
  EXPECT_EQ(RopePairContributions({big}, 50, 1)[0].pairs, 50);
}

}  // namespace
}  // namespace longctx
