// Why: the training loop as separate parts wired once: config → model,
// optimizer, data, checkpoints, metrics. Run() is a short loop: the step's
// batches (BatchSource) → one TrainStep → the hooks registered from the config
// (train/hooks/: metrics, position frequency, eval, probe, checkpoint). Every
// recoverable failure (bad data, NaN loss, full disk) comes back as a Status
// that says what and where, after which the last complete checkpoint is intact.
#ifndef LONGCTX_TRAIN_TRAINER_H_
#define LONGCTX_TRAIN_TRAINER_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "data/packer.h"
#include "data/position_frequency.h"
#include "kernels/backend.h"
#include "launch/communicator.h"
#include "model/config.h"
#include "model/transformer.h"
#include "train/batch_source.h"
#include "train/checkpoint/out_dir_lock.h"
#include "train/device_batch.h"
#include "train/hooks/hook.h"
#include "train/parallel/context_parallel.h"
#include "train/parallel/parallel_strategy.h"
#include "train/report/metrics.h"
#include "train/setup/training_data.h"
#include "train/train.pb.h"
#include "train/train_step.h"

namespace longctx {

class Trainer {
 public:
  static absl::StatusOr<std::unique_ptr<Trainer>> Create(const TrainConfig& config,
                                                         std::unique_ptr<Communicator> comm);
  ~Trainer();

  // Trains from the current step to config.steps. When max_steps_this_run > 0,
  // stops after that many steps (used to simulate an interruption in tests).
  absl::StatusOr<TrainSummary> Run(int64_t max_steps_this_run = 0);

  int64_t step() const { return step_; }
  Transformer& model() { return *model_; }
  const TrainConfig& config() const { return config_; }

 // Appends a hook after those the config registered (tests observe the loop
  // this way). Call before Run().
  void AddHook(std::unique_ptr<Hook> hook) { hooks_.push_back(std::move(hook)); }
  const std::vector<std::unique_ptr<Hook>>& hooks() const { return hooks_; }

  const PositionFrequency& position_frequency() const { return *posfreq_; }
  // Non-zero after Run() stopped early for SIGTERM/SIGUSR1 (train/preemption.h):
  // the signal number, the same on every rank; the checkpoint is written.
  int preempted_signal() const { return preempted_signal_; }
  int64_t nonfinite_skips() const { return nonfinite_skips_; }

 private:
  Trainer() = default;
  // The steps of Create, in order.
  absl::Status MakeBackend();
  absl::Status MakeModel();
  absl::Status MakeBatchSource();
  absl::Status LockOutDir();
  // Resume from the newest usable checkpoint in out_dir, or initialise
  // (init_from or the seed); then the strategy takes the parameters.
  absl::Status ResumeOrInitialize();
  absl::Status OpenMetrics();
  // Resume: whether DIR's config and trainer state can continue this run,
  // then its weights, moments, cursors and counters.
  absl::Status CheckResumable(const std::string& dir, const TrainConfig& saved, const nlohmann::json& state);
  absl::Status Resume(const std::string& dir);
  // ZERO1/FSDP, after the strategy's Setup: this rank's ranges from DIR
  // (resume: moments, and FSDP's parameters; init_from: FSDP's parameters).
  absl::Status LoadShards(const std::string& dir, bool init_from);
  nlohmann::json StateJson(const PackerCursor& last_batch_cursor) const;
  void RegisterHooks();
  void PrintRunBanner() const;
  // Run on a resumed run already at config.steps: the checkpoint's figures.
  TrainSummary FinishedRunSummary() const;
  HookContext MakeHookContext(TrainSummary* summary);
  // A skipped step (skip_nonfinite): the line and metrics event; an error
  // past max_consecutive_nonfinite_skips.
  absl::Status ReportSkippedStep(const StepResult& r, int consecutive_skips, const std::string& last_checkpoint);

  TrainConfig config_;
  ModelDims dims_;
  std::unique_ptr<Communicator> comm_;
  std::unique_ptr<Backend> backend_;
  TrainingInputs data_;  // tokenizer, tokens, packers, retrieval rows, SFT examples (train/setup)
  std::unique_ptr<PositionFrequency> posfreq_;  // pairs per distance, all steps and ranks
  std::unique_ptr<BatchSource> batches_;
  std::unique_ptr<Transformer> model_;
  // Every mode's gradient sum and update (train/parallel). Declared after
  // model_ so it is destroyed first (FSDP is the model's residency hook).
  std::unique_ptr<ParallelStrategy> strategy_;
  std::unique_ptr<ContextParallel> context_;  // context_parallel > 1 only
  // Ranks (or context-parallel groups) that take different micro-batches.
  int data_world() const { return context_ != nullptr ? context_->data_world() : comm_->world_size(); }
  std::unique_ptr<DeviceBatch> device_batch_;
  std::unique_ptr<TrainStep> train_step_;
  // The periodic probe's hook is made in Create (it validates the settings
  // then); registered with the others.
  std::unique_ptr<Hook> probe_hook_;
  std::unique_ptr<Hook> loss_by_position_hook_;  // likewise (loss_by_position_every)
  std::vector<std::unique_ptr<Hook>> hooks_;
  std::optional<MetricsWriter> metrics_;
  // Rank 0: this job's exclusive hold on out_dir (train/checkpoint/out_dir_lock.h).
  std::optional<OutDirLock> out_dir_lock_;
  // The checkpoint Create resumed from ("" for a fresh run) and its trainer state.
  std::string resumed_from_;
  nlohmann::json resumed_state_;
  int64_t step_ = 0;
  int64_t tokens_seen_ = 0;
  double last_loss_ = 0;
  double last_lr_ = 0;
  int preempted_signal_ = 0;
  int64_t nonfinite_skips_ = 0;  // steps skipped this run (skip_nonfinite)
};

}  // namespace longctx

#endif  // LONGCTX_TRAIN_TRAINER_H_
