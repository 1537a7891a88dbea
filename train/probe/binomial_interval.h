// Why: a probe length's pass rate is k passes out of n trials, n small (8 in
// the main job). One unlucky draw moves it across the threshold, and with it
// the effective length; the pass rate alone does not say how much that could
// happen. The Wilson score interval (Wilson 1927) is the binomial confidence
// interval that stays inside [0, 1] and keeps close to its nominal coverage at
// small n and at k = 0 or k = n, where the normal ("Wald") interval collapses
// to a point. It is the set of p whose score test |k/n − p| / sqrt(p(1−p)/n)
// does not exceed z, i.e. the roots of
//   (1 + z²/n) p² − (2 k/n + z²/n) p + (k/n)² = 0.
#ifndef LONGCTX_TRAIN_PROBE_BINOMIAL_INTERVAL_H_
#define LONGCTX_TRAIN_PROBE_BINOMIAL_INTERVAL_H_

#include <cstdint>

#include "absl/status/statusor.h"

namespace longctx {

// The two-sided 95 % normal quantile, Φ⁻¹(0.975).
inline constexpr double kZ95 = 1.959963984540054;

struct BinomialInterval {
  double low = 0, high = 1;
};

// The Wilson score interval for k successes in n trials at quantile z (95 %
// by default). Exactly 0 below at k = 0 and exactly 1 above at k = n.
// InvalidArgument unless 0 <= k <= n, n >= 1 and z is finite and > 0.
absl::StatusOr<BinomialInterval> WilsonInterval(int64_t k, int64_t n, double z = kZ95);

}  // namespace longctx

#endif  // LONGCTX_TRAIN_PROBE_BINOMIAL_INTERVAL_H_
