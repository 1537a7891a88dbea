// Why: see lr_schedule.h.
#include "optim/lr_schedule.h"

#include <algorithm>
#include <cmath>

namespace longctx {

double WarmupCosineLr(int64_t step, double peak, double floor, int64_t warmup, int64_t decay_steps) {
  if (warmup > 0 && step <= warmup) return peak * static_cast<double>(step) / static_cast<double>(warmup);
  if (step >= decay_steps) return floor;
  const double span = static_cast<double>(std::max<int64_t>(decay_steps - warmup, 1));
  const double progress = static_cast<double>(step - warmup) / span;
  return floor + 0.5 * (peak - floor) * (1.0 + std::cos(M_PI * progress));
}

}  // namespace longctx
