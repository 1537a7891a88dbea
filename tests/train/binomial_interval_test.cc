// Why: the probe's pass-rate intervals (train/probe/binomial_interval.h) checked
// against values computed by other routes: published Wilson intervals, the
// closed forms at k = 0 and k = n, and the score test's boundary found by
// bisection (no quadratic formula), on every k of several n.
#include "train/probe/binomial_interval.h"

#include <cmath>

#include "gtest/gtest.h"

namespace longctx {
namespace {

// The p in [lo, hi] where the score statistic (k/n − p)² − z² p(1 − p)/n
// changes sign, by bisection; `rising` says which side is positive.
double ScoreBoundary(int64_t k, int64_t n, double z, double lo, double hi) {
  const double ph = static_cast<double>(k) / n;
  auto f = [&](double p) { return (ph - p) * (ph - p) - z * z * p * (1 - p) / n; };
  const bool positive_at_lo = f(lo) > 0;
  for (int i = 0; i < 200; ++i) {
    const double mid = 0.5 * (lo + hi);
    ((f(mid) > 0) == positive_at_lo ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

TEST(WilsonIntervalTest, MatchesPublishedValues) {
  struct Case {
    int64_t k, n;
    double low, high;  // 3 decimals
  };
  // k = 5 of 10 and 0 of 10: the standard textbook examples of the Wilson interval.
  for (const Case& c : {Case{3, 8, 0.137, 0.694}, Case{5, 10, 0.237, 0.763}, Case{0, 10, 0.0, 0.278},
                        Case{8, 8, 0.676, 1.0}}) {
    absl::StatusOr<BinomialInterval> ci = WilsonInterval(c.k, c.n);
    ASSERT_TRUE(ci.ok()) << ci.status();
    EXPECT_NEAR(ci->low, c.low, 5e-4) << c.k << "/" << c.n;
    EXPECT_NEAR(ci->high, c.high, 5e-4) << c.k << "/" << c.n;
  }
}

TEST(WilsonIntervalTest, EdgesAreExactClosedForms) {
  for (int64_t n : {1, 2, 8, 16, 1000}) {
    const double z2 = kZ95 * kZ95, nn = static_cast<double>(n);
    absl::StatusOr<BinomialInterval> none = WilsonInterval(0, n), all = WilsonInterval(n, n);
    ASSERT_TRUE(none.ok() && all.ok());
    EXPECT_EQ(none->low, 0.0) << n;   // exactly, not 1e-17
    EXPECT_EQ(all->high, 1.0) << n;   // exactly, not 0.9999999
    EXPECT_NEAR(none->high, z2 / (nn + z2), 1e-12) << n;
    EXPECT_NEAR(all->low, nn / (nn + z2), 1e-12) << n;
  }
}

TEST(WilsonIntervalTest, BoundsAreTheScoreTestsRootsFoundByBisection) {
  for (double z : {kZ95, 1.0, 2.5758}) {
    for (int64_t n : {1, 3, 8, 16, 50}) {
      for (int64_t k = 0; k <= n; ++k) {
        absl::StatusOr<BinomialInterval> ci = WilsonInterval(k, n, z);
        ASSERT_TRUE(ci.ok());
        const double ph = static_cast<double>(k) / n;
        const double low = k == 0 ? 0.0 : ScoreBoundary(k, n, z, 0.0, ph);
        const double high = k == n ? 1.0 : ScoreBoundary(k, n, z, ph, 1.0);
        EXPECT_NEAR(ci->low, low, 1e-12) << k << "/" << n << " z " << z;
        EXPECT_NEAR(ci->high, high, 1e-12) << k << "/" << n << " z " << z;
        EXPECT_LE(ci->low, ph);
        EXPECT_GE(ci->high, ph);
      }
    }
  }
}

TEST(WilsonIntervalTest, BadInputIsAnErrorNamingTheArgument) {
  EXPECT_NE(WilsonInterval(0, 0).status().message().find("n must be"), std::string::npos);
  EXPECT_NE(WilsonInterval(-1, 4).status().message().find("k must be"), std::string::npos);
  EXPECT_NE(WilsonInterval(5, 4).status().message().find("k must be"), std::string::npos);
  EXPECT_NE(WilsonInterval(1, 4, 0.0).status().message().find("z must be"), std::string::npos);
  EXPECT_NE(WilsonInterval(1, 4, NAN).status().message().find("z must be"), std::string::npos);
}

}  // namespace
}  // namespace longctx
