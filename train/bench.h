// Why: "how fast is a training step, and how close to the machine is it?" needs
// one number that is comparable across configs and machines. `longctx bench`
// measures the BLAS sgemm peak of this machine, then times full training steps
// (zero grads, ForwardBackward, AdamW) of the configured model on a synthetic
// batch (no data file), and reports achieved FLOP/s against that peak. The
// FLOP count is plan.h's CountTrainingFlops: 6 × matmul parameters plus the
// attention actually computed (causal halving, sliding windows counted at their
// window), so a windowed model is not credited with work it skips.
#ifndef LONGCTX_TRAIN_BENCH_H_
#define LONGCTX_TRAIN_BENCH_H_

#include <string>
#include <vector>

namespace longctx {

// Best-of-`repeats` GFLOP/s of an n×n×n cblas_sgemm with the current BLAS
// thread count (2·n³ FLOPs per call).
double MeasureSgemmPeakGflops(int n, int repeats);

// `longctx bench --config FILE [--steps=N] [--warmup=N] [--section.field=value ...]`.
// --steps and --warmup arrive in `overrides` (main.cc routes unknown --x=y
// there) and are taken out here; the rest are TrainConfig overrides. Prints a
// table, then one JSON line (the last line of stdout). Returns an exit code.
int RunBenchCommand(const std::string& config_path, const std::vector<std::string>& overrides);

}  // namespace longctx

#endif  // LONGCTX_TRAIN_BENCH_H_
