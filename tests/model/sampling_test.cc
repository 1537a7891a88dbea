// Why: sampling is the only random step of generation; it must be exactly
// greedy at temperature 0, never leave the top-k set, follow
// softmax(logits / T) in distribution, and repeat itself for a seed.
#include <cmath>
#include <limits>
#include <map>
#include <vector>

#include "gtest/gtest.h"
#include "model/sampling.h"

namespace longctx {
namespace {

TEST(Sampling, GreedyIsArgmaxWithTiesToLowestId) {
  Sampler s({0.0, 0, 1});
  EXPECT_EQ(s.Next(std::vector<float>{0.1f, 3.f, -2.f, 3.f}), 1);
  EXPECT_EQ(s.Next(std::vector<float>{-1.f, -0.5f}), 1);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(s.Next(std::vector<float>{nan, 2.f, 1.f}), 1);  // NaN is never chosen
  EXPECT_EQ(s.Next(std::vector<float>{-std::numeric_limits<float>::infinity(), nan}), 0);
}

TEST(Sampling, TopKOneIsGreedyAtAnyTemperature) {
  Sampler greedy({0.0, 0, 1}), top1({5.0, 1, 9});
  std::mt19937 rng(3);
  std::normal_distribution<float> nd;
  for (int t = 0; t < 50; ++t) {
    std::vector<float> logits(37);
    for (float& x : logits) x = nd(rng);
    EXPECT_EQ(top1.Next(logits), greedy.Next(logits));
  }
}

TEST(Sampling, FollowsTemperatureSoftmaxWithinTopK) {
  const std::vector<float> logits = {1.0f, 0.2f, 2.0f, -1.0f, 1.5f, 0.0f};
  const double temperature = 0.7;
  Sampler s({temperature, 3, 42});
  const std::vector<double> p = s.Probabilities(logits);
  // Top 3 are ids 2, 4, 0; the rest have probability 0.
  double z = 0;
  for (int id : {2, 4, 0}) z += std::exp(logits[id] / temperature);
  for (int id : {2, 4, 0}) EXPECT_NEAR(p[id], std::exp(logits[id] / temperature) / z, 1e-12);
  for (int id : {1, 3, 5}) EXPECT_EQ(p[id], 0.0);
  const int draws = 60000;
  std::map<int, int> counts;
  for (int i = 0; i < draws; ++i) ++counts[s.Next(logits)];
  for (int id : {1, 3, 5}) EXPECT_EQ(counts[id], 0);
  for (int id : {2, 4, 0}) {
    const double expect = p[id] * draws, sd = std::sqrt(draws * p[id] * (1 - p[id]));
    EXPECT_NEAR(counts[id], expect, 5 * sd) << id;  // fixed seed: deterministic
  }
}

TEST(Sampling, SeedReproducesAndDiffers) {
  std::vector<float> logits(100);
  for (int i = 0; i < 100; ++i) logits[i] = std::sin(i * 0.37f);
  auto run = [&](uint64_t seed) {
    Sampler s({1.0, 0, seed});
    std::vector<int32_t> ids;
    for (int i = 0; i < 40; ++i) ids.push_back(s.Next(logits));
    return ids;
  };
  EXPECT_EQ(run(7), run(7));
  EXPECT_NE(run(7), run(8));
}

TEST(Sampling, ValidatesOptions) {
  EXPECT_TRUE(ValidateSamplingOptions({0.0, 0, 1}).ok());
  EXPECT_NE(ValidateSamplingOptions({-1.0, 0, 1}).message().find("temperature"), std::string::npos);
  EXPECT_NE(ValidateSamplingOptions({std::nan(""), 0, 1}).message().find("temperature"), std::string::npos);
  EXPECT_NE(ValidateSamplingOptions({1.0, -2, 1}).message().find("top_k"), std::string::npos);
}

}  // namespace
}  // namespace longctx
