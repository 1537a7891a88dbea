// Why: the kernels are checked against naive references on random inputs, and
// inputs drawn from the same fixed seed every run check the same few draws
// forever: a kernel wrong only for some values (a rounding tie, a lane past a
// tail, an exponent near overflow) and a tolerance that holds only for those
// draws both hide behind them. So each test process mixes a run seed into the
// fixed seeds the tests were written with: fresh inputs every run, yet any run
// reproducible. The run seed is LONGCTX_TEST_SEED if set (0 gives the fixed
// seeds themselves), else drawn from std::random_device; the first use prints
// it ("LONGCTX_TEST_SEED=<n> reproduces ..."), which ctest shows beside a
// failure.
#ifndef LONGCTX_TESTS_SUPPORT_TEST_SEED_H_
#define LONGCTX_TESTS_SUPPORT_TEST_SEED_H_

#include <cstdint>

namespace longctx::test {

// This process's run seed (see above); a LONGCTX_TEST_SEED that is not a
// decimal integer aborts with a message naming it.
uint64_t RunSeed();

// A test's own seed `base` with the run seed mixed in: `base` itself when the
// run seed is 0, else a well-mixed 32-bit function of both (distinct bases
// stay distinct streams).
uint32_t FreshSeed(uint64_t base);

}  // namespace longctx::test

#endif  // LONGCTX_TESTS_SUPPORT_TEST_SEED_H_
