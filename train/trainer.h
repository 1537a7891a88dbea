// Why: the training loop as separate parts wired once: config → model,
// optimizer, data, checkpoints, metrics. Run() is the whole loop; every
// recoverable failure (bad data, NaN loss, full disk) comes back as a Status
// that says what and where, after which the last complete checkpoint is intact.
#ifndef LONGCTX_TRAIN_TRAINER_H_
#define LONGCTX_TRAIN_TRAINER_H_

#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "data/packer.h"
#include "data/position_frequency.h"
#include "data/retrieval_task_mixer.h"
#include "data/token_dataset.h"
#include "data/tokenizer.h"
#include "kernels/backend.h"
#include "launch/communicator.h"
#include "model/config.h"
#include "model/transformer.h"
#include "optim/adamw.h"
#include "train/device_batch.h"
#include "train/report/metrics.h"
#include "train/probe/niah_probe.h"
#include "train/train.pb.h"

namespace longctx {

struct TrainSummary {
  int64_t start_step = 0;     // 0 for a fresh run, else the resumed checkpoint's step
  int64_t final_step = 0;
  double first_loss = 0;      // training loss of the first step this run took
  double last_loss = 0;       // training loss of the last step (weights before its update)
  double final_batch_loss = 0;  // loss of the final weights on the last step's first micro-batch
  double eval_loss = 0;       // final weights on the eval split
  int64_t eval_tokens = 0;
  std::string checkpoint;     // last checkpoint written
  double tokens_per_second = 0;
};

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

 private:
  Trainer() = default;
  absl::Status Resume(const std::string& checkpoint_dir);
  absl::StatusOr<std::string> Save(const PackerCursor& last_batch_cursor, const PackedBatch* last_batch);
  nlohmann::json StateJson(const PackerCursor& last_batch_cursor) const;
  nlohmann::json PositionFrequencyEvent() const;
  // The probe at the current step: metrics event, out_dir/probe/step-N.{json,png}, a stdout line.
  absl::Status RunPeriodicProbe();

 public:
  const PositionFrequency& position_frequency() const { return *posfreq_; }

 private:

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
  double last_loss_ = 0;
  double last_lr_ = 0;
  bool has_eval_ = true;  // false when the eval split has no documents
  std::unique_ptr<PositionFrequency> posfreq_;  // pairs per distance, all steps and ranks
  // Retrieval rows mixed into training (null when data.retrieval_fraction is 0).
  std::unique_ptr<RetrievalMixer> retrieval_;
  // Periodic effective-length probe (probe_every > 0): eval-split haystacks,
  // its own model adapter; reads the weights only, draws from no training RNG.
  std::optional<ProbeSettings> probe_settings_;
  std::unique_ptr<HaystackSource> probe_haystack_;
  std::unique_ptr<ProbeModel> probe_model_;
  double probe_seconds_ = 0;  // this run's probes, for the budget line at the end
  int probes_run_ = 0;
};

// Threads for OpenMP and OpenBLAS (0 = leave the defaults: all cores). Runs that
// must agree bit for bit (resume, eval of a checkpoint) use the same count.
void SetComputeThreads(int threads);
// SetComputeThreads(threads) for a scope; the previous OpenMP and OpenBLAS
// counts come back at its end (the periodic probe runs with its own count).
class ScopedComputeThreads {
 public:
  explicit ScopedComputeThreads(int threads);
  ~ScopedComputeThreads();
  ScopedComputeThreads(const ScopedComputeThreads&) = delete;
  ScopedComputeThreads& operator=(const ScopedComputeThreads&) = delete;

 private:
  int omp_, blas_;
};
// The config's `precision` as the backend's matmul precision
// (Backend::SetMatmulPrecision); the error names `precision` and the backend.
absl::Status ApplyPrecision(const TrainConfig& config, Backend* backend);

// Loss evaluation packer over the config's eval split, from its start.
absl::StatusOr<std::unique_ptr<Packer>> MakeEvalPacker(const TrainConfig& config, const DocumentSource* tokens);
absl::StatusOr<std::unique_ptr<Packer>> MakeTrainPacker(const TrainConfig& config, const DocumentSource* tokens);
// data.path: one .ltok file or a directory of them (`longctx data tokenize` output).
absl::StatusOr<std::unique_ptr<TokenDataset>> OpenTrainingData(const TrainConfig& config);

}  // namespace longctx

#endif  // LONGCTX_TRAIN_TRAINER_H_
