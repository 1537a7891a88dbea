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
#include "data/retrieval_task_mixer.h"
#include "data/sft_schedule.h"
#include "data/sft_token_file.h"
#include "data/token_dataset.h"
#include "data/tokenizer.h"
#include "kernels/backend.h"
#include "kernels/backend_registry.h"
#include "launch/communicator.h"
#include "model/config.h"
#include "model/plan.h"
#include "model/transformer.h"
#include "optim/adamw.h"
#include "train/batch_source.h"
#include "train/checkpoint/out_dir_lock.h"
#include "train/device_batch.h"
#include "train/hooks/hook.h"
#include "train/parallel/parallel_strategy.h"
#include "train/report/metrics.h"
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
  absl::Status Resume(const std::string& checkpoint_dir);
  // ZERO1/FSDP, after the strategy is installed: this rank's ranges from DIR
  // (resume: moments, and FSDP's parameters; init_from: FSDP's parameters).
  absl::Status LoadShards(const std::string& dir, bool init_from);
  nlohmann::json StateJson(const PackerCursor& last_batch_cursor) const;
  void RegisterHooks();

  TrainConfig config_;
  ModelDims dims_;
  std::unique_ptr<Communicator> comm_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<TokenDataset> tokens_;
  std::unique_ptr<Packer> train_packer_;
  std::unique_ptr<Transformer> model_;
  std::unique_ptr<AdamW> optimizer_;
  std::unique_ptr<DeviceBatch> device_batch_;
  std::optional<MetricsWriter> metrics_;
  int64_t step_ = 0;
  int64_t tokens_seen_ = 0;
  // The checkpoint Create resumed from ("" for a fresh run) and its trainer state.
  // Rank 0: this job's exclusive hold on out_dir (train/checkpoint/out_dir_lock.h).
  std::optional<OutDirLock> out_dir_lock_;
  std::string resumed_from_;
  nlohmann::json resumed_state_;
  double last_loss_ = 0;
  double last_lr_ = 0;
  int preempted_signal_ = 0;
  int64_t nonfinite_skips_ = 0;  // steps skipped this run (skip_nonfinite)
  bool has_eval_ = true;  // false when the eval split has no documents
  std::unique_ptr<PositionFrequency> posfreq_;  // pairs per distance, all steps and ranks
  // Retrieval rows mixed into training (null when data.retrieval_fraction is 0).
  std::unique_ptr<RetrievalMixer> retrieval_;
  std::unique_ptr<BatchSource> batches_;
  // Supervised fine-tuning (data.sft; null otherwise): the examples and the
  // length schedule the batch source draws every step from.
  std::unique_ptr<SftDataset> sft_data_;
  std::unique_ptr<SftSchedule> sft_schedule_;
  // The parallel strategy's seams (train_step.h): all-reduce + AdamW today.
  std::unique_ptr<GradientSync> gradient_sync_;
  std::unique_ptr<ParamUpdate> update_;
  std::unique_ptr<TrainStep> train_step_;
  // The periodic probe's hook is made in Create (it validates the settings
  // then); registered with the others.
  std::unique_ptr<Hook> probe_hook_;
  std::vector<std::unique_ptr<Hook>> hooks_;
  // ZERO1/FSDP (train/parallel); null for DDP. Declared after model_ so it is
  // destroyed first (FSDP is the model's residency hook).
  std::unique_ptr<ParallelStrategy> strategy_;
};

// The backend options a config asks for: its thread count (`threads`) on top
// of `options` (the GEMM library choices; `longctx bench` flags set them).
BackendSettings BackendOptionsFor(const TrainConfig& config, BackendSettings options = {});
// The config's backend made with BackendOptionsFor(config, options) and set to
// its precision; errors name `backend` or `precision`.
absl::StatusOr<std::unique_ptr<Backend>> MakeBackendForConfig(const TrainConfig& config,
                                                              const BackendSettings& options = {});
// The config's `precision` as the backend's matmul precision
// (Backend::SetMatmulPrecision); the error names `precision` and the backend.
absl::Status ApplyPrecision(const TrainConfig& config, Backend* backend);
// The operand copies the config's bf16 products keep (model/plan.h, for the
// memory plan and check): none for fp32 products, else what the config's
// backend says it keeps (kernels/backend_registry.h, BackendBf16OperandCopies:
// no backend is made).
Bf16OperandCopies Bf16OperandsFor(const TrainConfig& config);

// Loss evaluation packer over the config's eval split, from its start.
absl::StatusOr<std::unique_ptr<Packer>> MakeEvalPacker(const TrainConfig& config, const DocumentSource* tokens);
absl::StatusOr<std::unique_ptr<Packer>> MakeTrainPacker(const TrainConfig& config, const DocumentSource* tokens);
// data.path: one .ltok file or a directory of them (`longctx data tokenize` output).
absl::StatusOr<std::unique_ptr<TokenDataset>> OpenTrainingData(const TrainConfig& config);

}  // namespace longctx

#endif  // LONGCTX_TRAIN_TRAINER_H_
