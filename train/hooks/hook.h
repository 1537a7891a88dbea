// Why: everything the training loop does besides the step (logging, eval,
// probes, position-frequency reports, checkpoints) is a Hook on a few events,
// so the loop stays "batches → TrainStep → hooks" and a new periodic task is a
// new file, not another branch in the loop. Hooks are told the rank and world
// size and declare whether they run on rank 0 only; the loop skips rank-0-only
// hooks elsewhere. A hook that runs on every rank (eval, checkpoint) may use
// collectives; today's write files on rank 0 only (eval can be split across
// ranks and reduced later; a sharded checkpoint will write from every rank).
//
// Events, in the order the loop calls them (hooks in registration order):
//   OnRunStart  once, before the first step of this run;
//   OnStepEnd   after every step;
//   OnRunEnd    once when the run stops (reached config.steps, or stopped by
//               max_steps_this_run; also with no step taken);
//   OnFinal     after OnRunEnd, only when the run reached config.steps.
#ifndef LONGCTX_TRAIN_HOOKS_HOOK_H_
#define LONGCTX_TRAIN_HOOKS_HOOK_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "data/packer.h"
#include "data/position_frequency.h"
#include "kernels/backend.h"
#include "launch/communicator.h"
#include "model/config.h"
#include "model/transformer.h"
#include "optim/adamw.h"
#include "train/device_batch.h"
#include "train/report/metrics.h"
#include "train/train.pb.h"
#include "train/train_step.h"

namespace longctx {

// What Run() returns; the loop and the hooks fill it.
// A measurement this run did not take is nullopt, never 0: a preempted run
// takes no final eval, a run stopped before its first step no loss, so the
// summary line says "not measured" (null) instead of a plausible-looking 0.
struct TrainSummary {
  int64_t start_step = 0;     // 0 for a fresh run, else the resumed checkpoint's step
  int64_t final_step = 0;
  std::optional<double> first_loss;        // training loss of the first step this run took
  std::optional<double> last_loss;         // training loss of the last step (weights before its update)
  std::optional<double> final_batch_loss;  // loss of the final weights on the last step's first micro-batch
  std::optional<double> eval_loss;         // final weights on the eval split (a finished run only)
  std::optional<int64_t> eval_tokens;
  std::string checkpoint;     // last checkpoint written
  std::optional<double> tokens_per_second;  // the last logged window's
};

// What the loop shares with its hooks for one run. Pointers are not owned and
// outlive the run; `metrics` is null on ranks other than 0.
struct HookContext {
  int rank = 0;
  int world_size = 1;
  const TrainConfig* config = nullptr;
  const ModelDims* dims = nullptr;
  Backend* backend = nullptr;
  Transformer* model = nullptr;
  AdamW* optimizer = nullptr;
  DeviceBatch* device_batch = nullptr;
  MetricsWriter* metrics = nullptr;
  const PositionFrequency* posfreq = nullptr;
  TrainSummary* summary = nullptr;  // hooks fill their parts (eval loss, checkpoint, tokens/s)

  // The run's clock: tokens/s counts training only, so a hook whose time must
  // not count (the probe) adds its seconds to excluded_seconds.
  std::chrono::steady_clock::time_point run_start;
  double excluded_seconds = 0;
  int64_t tokens_seen = 0;       // after the current step, all ranks
  std::string last_checkpoint;   // last checkpoint this run wrote ("" = none yet)
  // The ranks' communicator (checkpoint saves agree on success through it).
  Communicator* comm = nullptr;
  // Context parallelism (null without): a forward over training rows goes
  // through it, each rank on its share (checkpoint_hook's batch loss).
  ContextParallel* context = nullptr;
  // trainer_state.json for a checkpoint at the current step, given the cursor
  // of the last step's batches (the trainer knows its packer and counters).
  std::function<nlohmann::json(const PackerCursor& last_batch_cursor)> state_json;
};

// One finished step.
struct StepEvent {
  const StepResult& result;
  const std::vector<PackedBatch>& micro;  // the step's micro-batches (all ranks')
  const PackerCursor& batch_cursor;       // where they started in the data
  int64_t steps_this_run = 0;
};

// The run stopped at the current step. `micro` and `batch_cursor` are the last
// step's when has_step, else empty / the data cursor.
struct RunEndEvent {
  int64_t step = 0;
  bool final = false;     // step == config.steps
  bool has_step = false;  // this run took at least one step
  int64_t steps_this_run = 0;
  const std::vector<PackedBatch>& micro;
  const PackerCursor& batch_cursor;
};

class Hook {
 public:
  virtual ~Hook() = default;
  virtual std::string name() const = 0;
  virtual bool rank0_only() const = 0;
  virtual absl::Status OnRunStart(HookContext&) { return absl::OkStatus(); }
  virtual absl::Status OnStepEnd(HookContext&, const StepEvent&) { return absl::OkStatus(); }
  virtual absl::Status OnRunEnd(HookContext&, const RunEndEvent&) { return absl::OkStatus(); }
  virtual absl::Status OnFinal(HookContext&, const RunEndEvent&) { return absl::OkStatus(); }
};

// True at multiples of every (> 0) except the last step, which final hooks
// cover: the periodic schedule of eval and checkpoints.
inline bool PeriodicBeforeLast(int64_t step, int every, int64_t total_steps) {
  return every > 0 && step % every == 0 && step != total_steps;
}

}  // namespace longctx

#endif  // LONGCTX_TRAIN_HOOKS_HOOK_H_
