// Why: the learning rate at a step is a pure function of the step, so resumed
// runs get exactly the rate an uninterrupted run would have had.
#ifndef LONGCTX_OPTIM_LR_SCHEDULE_H_
#define LONGCTX_OPTIM_LR_SCHEDULE_H_

#include <cstdint>

namespace longctx {

// Linear warmup from 0 to peak over warmup steps (step 1 gets peak/warmup), then
// cosine from peak down to floor at decay_steps; floor afterwards.
// step is 1-based (the step about to be taken).
double WarmupCosineLr(int64_t step, double peak, double floor, int64_t warmup, int64_t decay_steps);

}  // namespace longctx

#endif  // LONGCTX_OPTIM_LR_SCHEDULE_H_
