// Why: see binomial_interval.h.
#include "train/probe/binomial_interval.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace longctx {

absl::StatusOr<BinomialInterval> WilsonInterval(int64_t k, int64_t n, double z) {
  if (n < 1) return absl::InvalidArgumentError(absl::StrCat("Wilson interval: n must be >= 1 trials (got ", n, ")"));
  if (k < 0 || k > n)
    return absl::InvalidArgumentError(absl::StrCat("Wilson interval: k must be in [0, n = ", n, "] (got ", k, ")"));
  if (!(std::isfinite(z) && z > 0))
    return absl::InvalidArgumentError(absl::StrCat("Wilson interval: z must be finite and > 0 (got ", z, ")"));
  const double nn = static_cast<double>(n), p = static_cast<double>(k) / nn, z2 = z * z;
  const double denom = 1 + z2 / nn;
  const double center = (p + z2 / (2 * nn)) / denom;
  const double half = z / denom * std::sqrt(p * (1 - p) / nn + z2 / (4 * nn * nn));
  BinomialInterval r;
  // At k = 0 (k = n) the lower (upper) root is exactly 0 (1); rounding in
  // center − half must not turn that into 1e-17 or 0.99999999.
  r.low = k == 0 ? 0.0 : std::clamp(center - half, 0.0, 1.0);
  r.high = k == n ? 1.0 : std::clamp(center + half, 0.0, 1.0);
  return r;
}

}  // namespace longctx
