// Why: see trainer.h. Create wires the parts (each step a short method
// below; the config is translated in train/setup/) and registers the hooks;
// Run is the loop. The step itself (micro-batches, gradient reduction,
// clipping, update) is train_step.h, its data batch_source.h, and everything
// periodic a hook in train/hooks/.
#include "train/trainer.h"

#include <chrono>
#include <cstdio>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/log.h"
#include "optim/lr_schedule.h"
#include "train/checkpoint/checkpoint.h"
#include "train/checkpoint/checkpoint_dir.h"
#include "train/checkpoint/checkpoint_reader.h"
#include "train/checkpoint/rank_agreement.h"
#include "train/checkpoint/resume_point.h"
#include "train/hooks/checkpoint_hook.h"
#include "train/hooks/eval_hook.h"
#include "train/hooks/full_state_hook.h"
#include "train/hooks/loss_by_position_hook.h"
#include "train/hooks/metrics_hook.h"
#include "train/hooks/posfreq_hook.h"
#include "train/hooks/probe_hook.h"
#include "train/hooks/tensorboard_hook.h"
#include "train/parallel/rank_threads.h"
#include "train/preemption.h"
#include "train/setup/backend_for_config.h"
#include "train/setup/memory_check.h"
#include "train/setup/sft_config.h"

namespace longctx {

Trainer::~Trainer() = default;

absl::StatusOr<std::unique_ptr<Trainer>> Trainer::Create(const TrainConfig& config,
                                                         std::unique_ptr<Communicator> comm) {
  std::unique_ptr<Trainer> t(new Trainer());
  t->config_ = config;
  t->comm_ = std::move(comm);
  absl::StatusOr<ModelDims> dims = ResolveModelConfig(config.model());
  if (!dims.ok()) return dims.status();
  t->dims_ = *dims;
  // Before anything is allocated: does the plan fit the machine (all ranks of this node)?
  if (absl::Status fits = CheckMemoryFitsMachine(config, t->dims_, MemoryUse::kTraining, Bf16OperandsFor(config),
                                                 t->comm_->world_size(), t->comm_->local_world_size());
      !fits.ok())
    return fits;
  if (absl::Status st = t->MakeBackend(); !st.ok()) return st;
  absl::StatusOr<TrainingInputs> data = OpenTrainingInputs(config, t->dims_, t->comm_->rank());
  if (!data.ok()) return data.status();
  t->data_ = std::move(*data);
  if (absl::Status st = t->MakeModel(); !st.ok()) return st;
  if (absl::Status st = t->MakeBatchSource(); !st.ok()) return st;
  if (absl::Status st = t->LockOutDir(); !st.ok()) return st;
  if (absl::Status st = t->ResumeOrInitialize(); !st.ok()) return st;
  t->train_step_ = std::make_unique<TrainStep>(t->model_.get(), t->device_batch_.get(), t->comm_.get(),
                                               t->strategy_.get(),
                                               NonfinitePolicy{config.stop_on_nonfinite(), config.skip_nonfinite()},
                                               t->context_.get());
  if (absl::Status st = t->OpenMetrics(); !st.ok()) return st;
  t->RegisterHooks();
  return t;
}

// The backend owns the thread count (applied as it is made) and the GEMM
// choices. Several ranks: threads per rank from the node's cores
// (train/parallel/rank_threads.h).
absl::Status Trainer::MakeBackend() {
  TrainConfig backend_config = config_;
  if (comm_->world_size() > 1) {
    absl::StatusOr<RankThreads> rt =
        ChooseThreadsPerRank(config_.threads(), comm_->local_world_size(), 0, config_.force_threads());
    if (!rt.ok()) return rt.status();
    if (!rt->warning.empty() && comm_->rank() == 0) LOG(WARNING) << rt->warning;
    backend_config.set_threads(rt->threads);
  }
  absl::StatusOr<std::unique_ptr<Backend>> backend = MakeBackendForConfig(backend_config);
  if (!backend.ok()) return backend.status();
  backend_ = std::move(*backend);
  return absl::OkStatus();
}

namespace {
// Every layer's attention window (0 = full): what the balanced
// context-parallel split weighs work by.
std::vector<int32_t> LayerWindows(const ModelDims& dims) {
  std::vector<int32_t> w;
  for (int l = 0; l < dims.layers; ++l) w.push_back(dims.layer_window(l));
  return w;
}
}  // namespace

// The model, its parallel strategy (which owns the optimizer state) and the
// probe, which validates its settings against the model now.
absl::Status Trainer::MakeModel() {
  model_ = std::make_unique<Transformer>(dims_, backend_.get(), DType::kF32);
  model_->set_recompute_every(config_.model().recompute_every());
  absl::StatusOr<bool> bf16_activations = ResolveBf16Activations(config_.model(), config_.precision() == BF16);
  if (!bf16_activations.ok()) return bf16_activations.status();
  if (*bf16_activations) model_->set_activation_dtype(DType::kBF16);
  absl::StatusOr<std::unique_ptr<ParallelStrategy>> strategy = MakeParallelStrategy(config_, model_.get(), comm_.get());
  if (!strategy.ok()) return strategy.status();
  strategy_ = std::move(*strategy);
  if (config_.context_parallel() > 1) {
    absl::StatusOr<std::unique_ptr<ContextParallel>> cp =
        ContextParallel::Create(comm_.get(), backend_.get(), DType::kF32, config_.context_parallel(),
                                config_.context_parallel_balanced() ? ContextParallel::Split::kBalanced
                                                                    : ContextParallel::Split::kZigZag,
                                LayerWindows(dims_));
    if (!cp.ok()) return cp.status();
    context_ = std::move(*cp);
  }
  device_batch_ = std::make_unique<DeviceBatch>(backend_.get());
  if (config_.probe_every() != 0) {
    absl::StatusOr<std::unique_ptr<ProbeHook>> probe =
        ProbeHook::Create(config_, data_.tokens.get(), data_.tokenizer.get(), model_.get());
    if (!probe.ok()) return probe.status();
    probe_hook_ = std::move(*probe);
  }
  if (config_.loss_by_position_every() != 0) {
    absl::StatusOr<std::unique_ptr<LossByPositionHook>> lbp =
        LossByPositionHook::Create(config_, data_.tokens.get());
    if (!lbp.ok()) return lbp.status();
    loss_by_position_hook_ = std::move(*lbp);
  }
  return absl::OkStatus();
}

absl::Status Trainer::MakeBatchSource() {
  posfreq_ = std::make_unique<PositionFrequency>(data_.longest_row);
  if (data_.sft_schedule != nullptr) {
    absl::StatusOr<BatchSource> sft_source =
        BatchSource::ForSft(data_.train_packer.get(), data_.sft_schedule.get(), posfreq_.get(),
                            config_.grad_accum() * data_world());
    if (!sft_source.ok()) return sft_source.status();
    batches_ = std::make_unique<BatchSource>(std::move(*sft_source));
  } else {
    batches_ = std::make_unique<BatchSource>(data_.train_packer.get(), data_.retrieval.get(), posfreq_.get());
  }
  return absl::OkStatus();
}

// One job per out_dir: rank 0 holds the lock until the process ends; every
// rank stops with the holder's name when another job has it.
absl::Status Trainer::LockOutDir() {
  absl::Status locked;
  if (comm_->rank() == 0) {
    absl::StatusOr<OutDirLock> lock = OutDirLock::Acquire(config_.out_dir());
    if (lock.ok())
      out_dir_lock_.emplace(std::move(*lock));
    else
      locked = lock.status();
  }
  return AgreeOnStatus(*comm_, locked);
}

absl::Status Trainer::ResumeOrInitialize() {
  absl::StatusOr<std::string> usable =
      NewestUsableCheckpoint(config_.out_dir(), model_->layout(), config_.mode(), *comm_);
  if (!usable.ok()) return usable.status();
  if (!usable->empty())
    if (absl::Status st = Resume(*usable); !st.ok()) return st;
  std::optional<uint64_t> init_seed;
  const bool init_from = resumed_from_.empty() && !config_.init_from().empty();
  if (init_from && config_.mode() != FSDP) {
    // A new stage: weights only; the optimizer, step and data start fresh.
    absl::Status st = LoadModelWeights(config_.init_from(), model_.get());
    if (!st.ok()) return absl::Status(st.code(), absl::StrCat("init_from: ", st.message()));
    LOG(INFO) << "initialised weights from " << config_.init_from();
  } else if (resumed_from_.empty() && !init_from) {
    init_seed = config_.seed();  // the strategy initialises (FSDP: each rank only its shards)
  }
  // FSDP reads its parameter shards from the checkpoint after Setup: the
  // full buffers are never filled.
  if (config_.mode() == FSDP && (init_from || !resumed_from_.empty()))
    for (int b = 0; b < model_->layout().num_buffers(); ++b) model_->params().Release(b);
  if (absl::Status st = strategy_->Setup(init_seed); !st.ok()) return st;
  if (strategy_->sharded() && (init_from || !resumed_from_.empty()))
    if (absl::Status st = LoadShards(init_from ? config_.init_from() : resumed_from_, init_from); !st.ok()) return st;
  return absl::OkStatus();
}

absl::Status Trainer::OpenMetrics() {
  if (comm_->rank() != 0) return absl::OkStatus();
  std::error_code ec;
  std::filesystem::create_directories(config_.out_dir(), ec);
  if (ec) return absl::UnavailableError(absl::StrCat("out_dir: cannot create ", config_.out_dir(), ": ", ec.message()));
  absl::StatusOr<MetricsWriter> m = MetricsWriter::Open(config_.out_dir() + "/metrics.jsonl");
  if (!m.ok()) return m.status();
  metrics_.emplace(std::move(*m));
  return absl::OkStatus();
}

// Registration order is call order within each event; it keeps the stdout
// and metrics order of the loop before hooks: per step the progress line,
// posfreq, eval, probe, checkpoint; at the end the probe budget line, the
// final checkpoint, then (final) the posfreq summary and the final eval.
void Trainer::RegisterHooks() {
  hooks_.push_back(std::make_unique<MetricsHook>());
  hooks_.push_back(std::make_unique<PositionFrequencyHook>());
  if (data_.has_eval) hooks_.push_back(std::make_unique<EvalHook>(data_.tokens.get()));
  if (loss_by_position_hook_ != nullptr) hooks_.push_back(std::move(loss_by_position_hook_));
  // ZERO1/FSDP: full parameters on every rank around the probe (a save gathers nothing).
  if (strategy_->sharded()) hooks_.push_back(std::make_unique<GatherFullStateHook>(strategy_.get()));
  if (probe_hook_ != nullptr) hooks_.push_back(std::move(probe_hook_));
  // ZERO1/FSDP: every rank writes its own shards (train/checkpoint/sharded_save.h).
  CheckpointHook::ShardSource shards;
  if (strategy_->sharded()) shards = [s = strategy_.get()] { return s->checkpoint_shards(); };
  hooks_.push_back(
      std::make_unique<CheckpointHook>(data_.tokenizer->bos_id(), data_.tokenizer->eos_id(), std::move(shards)));
  if (strategy_->sharded()) hooks_.push_back(std::make_unique<ReleaseFullStateHook>(strategy_.get()));
  hooks_.push_back(std::make_unique<TensorBoardHook>());  // last: follows what the others wrote to metrics.jsonl
}

absl::Status Trainer::CheckResumable(const std::string& dir, const TrainConfig& saved, const nlohmann::json& state) {
  const std::string state_path = absl::StrCat(dir, "/", kTrainerStateFile);
  // The data cursor only means "the next batch" under the same packing settings.
  const DataConfig &a = saved.data(), &b = config_.data();
  if (a.seq_len() != b.seq_len() || a.batch_size() != b.batch_size() || a.document_mask() != b.document_mask() ||
      a.shuffle_seed() != b.shuffle_seed() || a.eval_fraction() != b.eval_fraction() ||
      a.join_fraction() != b.join_fraction())
    return absl::FailedPreconditionError(absl::StrCat(
        dir, ": data.seq_len/batch_size/document_mask/shuffle_seed/eval_fraction/join_fraction differ from the "
             "checkpoint's; exact resume needs the same packing (use a new out_dir to start over)"));
  // SFT: the schedule cursor only means "the next step" under the same schedule
  // (the .lsft path may move; its size is checked with the cursor below).
  if (IsSftConfig(saved) != IsSftConfig(config_))
    return absl::FailedPreconditionError(absl::StrCat(
        dir, IsSftConfig(config_) ? ": this checkpoint is a pretraining run's; start SFT in a new out_dir with init_from"
                                  : ": this checkpoint is an SFT run's (data.sft.path); resume it with its data.sft"));
  if (IsSftConfig(config_)) {
    absl::StatusOr<SftScheduleOptions> sa = SftScheduleOptionsFor(saved), sb = SftScheduleOptionsFor(config_);
    if (!sa.ok()) return absl::DataLossError(absl::StrCat(dir, ": its config's ", sa.status().message()));
    if (!sb.ok()) return sb.status();
    if (sa->seq_lens != sb->seq_lens || sa->counts != sb->counts || sa->tokens_per_batch != sb->tokens_per_batch ||
        sa->split_long_examples != sb->split_long_examples || sa->drop_long_examples != sb->drop_long_examples ||
        sa->shuffle_seed != sb->shuffle_seed)
      return absl::FailedPreconditionError(absl::StrCat(
          dir, ": data.sft (seq_lens/counts/tokens_per_batch/long_examples/shuffle_seed) differs from the "
               "checkpoint's; exact resume needs the same schedule (use a new out_dir to start over)"));
  }
  // Another world size, context_parallel or grad_accum is fine when the global
  // batch (rows per step = batch_size x grad_accum x data-parallel ranks, i.e.
  // world / context_parallel) is the same: every rank draws the whole global
  // batch from the one packer cursor, so no row is repeated or skipped.
  int64_t saved_world = 1, saved_cp = 1;
  if (state.contains("context_parallel")) {
    if (!state.at("context_parallel").is_number_integer() || state.at("context_parallel").get<int64_t>() < 1)
      return absl::DataLossError(absl::StrCat(state_path, ": field \"context_parallel\" is ",
                                              state.at("context_parallel").dump(), ", not a positive integer"));
    saved_cp = state.at("context_parallel").get<int64_t>();
  }
  if (state.contains("world_size")) {
    if (!state.at("world_size").is_number_integer() || state.at("world_size").get<int64_t>() < 1)
      return absl::DataLossError(absl::StrCat(state_path, ": field \"world_size\" is ", state.at("world_size").dump(),
                                              ", not a positive integer"));
    saved_world = state.at("world_size").get<int64_t>() / saved_cp;
  }
  const int64_t world = data_world();
  const int64_t saved_global = int64_t{a.batch_size()} * saved.grad_accum() * saved_world;
  const int64_t global = int64_t{b.batch_size()} * config_.grad_accum() * world;
  if (saved_global != global && !IsSftConfig(config_)) {  // SFT: rows per step come from data.sft alone
    const int64_t per = int64_t{b.batch_size()} * world;
    return absl::FailedPreconditionError(absl::StrCat(
        dir, ": the checkpoint's global batch is ", saved_global, " rows per step (batch_size ", a.batch_size(),
        " x grad_accum ", saved.grad_accum(), " x world ", saved_world, "), this run's ", global, " (batch_size ",
        b.batch_size(), " x grad_accum ", config_.grad_accum(), " x world ", world, "); ",
        saved_global % per == 0
            ? absl::StrCat("use --grad_accum=", saved_global / per, " on ", world, " ranks")
            : absl::StrCat("no grad_accum keeps it on ", world, " ranks (", saved_global,
                           " is not a multiple of batch_size x world = ", per, "); use a world size dividing ",
                           saved_global / b.batch_size())));
  }
  {
    const int64_t step = state.at("step").get<int64_t>();
    if (state.contains("tokens_seen") && !IsSftConfig(config_) &&
        state.at("tokens_seen").get<int64_t>() != step * saved_global * int64_t{a.seq_len()})
      return absl::DataLossError(absl::StrCat(state_path, ": field \"step\" (", step, ") and \"tokens_seen\" (",
                                              state.at("tokens_seen").get<int64_t>(), ") disagree: ", step,
                                              " steps of ", saved_global, " rows of ", a.seq_len(), " tokens are ",
                                              step * saved_global * int64_t{a.seq_len()}));
  }
  return absl::OkStatus();
}

absl::Status Trainer::Resume(const std::string& dir) {
  absl::StatusOr<TrainConfig> saved = LoadCheckpointConfig(dir);
  if (!saved.ok()) return saved.status();
  absl::StatusOr<ModelDims> saved_dims = ResolveModelConfig(saved->model());
  if (!saved_dims.ok()) return saved_dims.status();
  if (!(*saved_dims == dims_))
    return absl::FailedPreconditionError(absl::StrCat(
        dir, ": this checkpoint was trained with a different model config; use a new out_dir or the same model"));
  absl::StatusOr<nlohmann::json> state = LoadTrainerState(dir);
  if (!state.ok()) return state.status();
  if (absl::Status st = CheckResumable(dir, *saved, *state); !st.ok()) return st;
  const std::string state_path = absl::StrCat(dir, "/", kTrainerStateFile);
  const int64_t saved_world = state->contains("world_size") ? (*state)["world_size"].get<int64_t>() : 1;
  const int64_t world = comm_->world_size();
  // The files were verified by every rank (Create). DDP reads the full
  // parameters and moments, ZeRO-1 the full parameters; ZeRO-1's moments and
  // FSDP's parameters and moments are read per rank, only its own range,
  // after the strategy's Setup (LoadShards). Any layout, any saved world.
  absl::Status st;
  if (config_.mode() != FSDP) st = LoadModelWeights(dir, model_.get(), /*verify=*/false);
  if (st.ok() && !strategy_->sharded())
    st = LoadOptimizerState(dir, strategy_->replicated_optimizer(), /*verify=*/false);
  if (!st.ok()) return st;
  try {
    if (data_.tokens != nullptr && state->contains("data_docs") &&
        (state->at("data_docs").get<int64_t>() != data_.tokens->n_docs() ||
                                         state->at("data_tokens").get<int64_t>() != data_.tokens->n_tokens()))
      return absl::FailedPreconditionError(absl::StrCat(
          dir, ": the checkpoint's data had ", state->at("data_docs").get<int64_t>(), " documents and ",
          state->at("data_tokens").get<int64_t>(), " tokens; ", data_.tokens->source_name(), " has ", data_.tokens->n_docs(),
          " and ", data_.tokens->n_tokens(), ", so its data cursor does not apply"));
    step_ = state->at("step").get<int64_t>();
    tokens_seen_ = state->at("tokens_seen").get<int64_t>();
    // An SFT run without data.path has no pretraining packer (and saves no cursor for one).
    if (data_.train_packer != nullptr && state->contains("packer_cursor")) {
      absl::StatusOr<PackerCursor> cursor = PackerCursorFromJson(state->at("packer_cursor"));
      if (!cursor.ok()) return cursor.status();
      st = data_.train_packer->Seek(*cursor);
      if (!st.ok()) return st;
    }
    if (data_.sft_schedule != nullptr) {
      if (state->at("sft_examples").get<int64_t>() != data_.sft_data->n_examples() ||
          state->at("sft_tokens").get<int64_t>() != data_.sft_data->n_tokens())
        return absl::FailedPreconditionError(absl::StrCat(
            dir, ": the checkpoint's SFT data had ", state->at("sft_examples").get<int64_t>(), " examples and ",
            state->at("sft_tokens").get<int64_t>(), " tokens; ", SftDataFile(config_), " has ",
            data_.sft_data->n_examples(), " and ", data_.sft_data->n_tokens(), ", so its schedule cursor does not apply"));
      absl::StatusOr<SftScheduleCursor> sc = SftScheduleCursorFromJson(state->at("sft_cursor"));
      if (!sc.ok()) return absl::DataLossError(absl::StrCat(state_path, ": ", sc.status().message()));
      if (st = data_.sft_schedule->Seek(*sc); !st.ok())
        return absl::DataLossError(absl::StrCat(state_path, ": sft_cursor: ", st.message()));
      absl::StatusOr<SftScheduleCursor> last = SftScheduleCursorFromJson(state->at("sft_last_step_cursor"));
      if (!last.ok()) return absl::DataLossError(absl::StrCat(state_path, ": ", last.status().message()));
      batches_->set_sft_last_step_cursor(*last);
    }
  } catch (const nlohmann::json::exception& e) {
    return absl::DataLossError(absl::StrCat(state_path, ": ", e.what()));
  }
  if (state->contains("position_frequency")) {
    absl::StatusOr<PositionFrequency> pf = PositionFrequency::FromJson(state->at("position_frequency"));
    if (!pf.ok()) return absl::DataLossError(absl::StrCat(state_path, ": ", pf.status().message()));
    if (pf->max_len() != posfreq_->max_len())
      return absl::FailedPreconditionError(absl::StrCat(dir, ": position counters for max_len ", pf->max_len()));
    *posfreq_ = std::move(*pf);
  }
  if (!strategy_->sharded()) strategy_->set_optimizer_step(step_);
  resumed_from_ = dir;
  resumed_state_ = *state;
  LOG(INFO) << "resumed from " << dir << " at step " << step_
            << (saved_world != world ? absl::StrCat(" (saved on ", saved_world, " ranks, resharded to ", world, ")")
                                     : std::string());
  return absl::OkStatus();
}

absl::Status Trainer::LoadShards(const std::string& dir, bool init_from) {
  absl::StatusOr<CheckpointReader> reader = CheckpointReader::Open(dir, model_->layout());
  absl::Status st = reader.status();
  const std::vector<CheckpointShard> shards = strategy_->checkpoint_shards();
  const bool params = config_.mode() == FSDP, moments = !init_from;
  // Resume: Create verified these files; init_from: each rank verifies what it reads.
  if (st.ok() && init_from) st = reader->Verify(reader->FilesFor(shards, params, moments));
  if (st.ok()) st = reader->Load(shards, params, moments, *backend_);
  st = AgreeOnStatus(*comm_, st);
  if (!st.ok()) return absl::Status(st.code(), absl::StrCat(init_from ? "init_from: " : "resume: ", st.message()));
  if (init_from) {
    if (comm_->rank() == 0) LOG(INFO) << "initialised weights from " << dir << " (each rank its shards)";
  } else {
    strategy_->set_optimizer_step(step_);
  }
  return absl::OkStatus();
}

nlohmann::json Trainer::StateJson(const PackerCursor& last_batch_cursor) const {
  nlohmann::json j;
  j["step"] = step_;
  j["tokens_seen"] = tokens_seen_;
  j["seed"] = config_.seed();
  if (data_.train_packer != nullptr) j["packer_cursor"] = PackerCursorToJson(data_.train_packer->cursor());
  j["last_batch_cursor"] = PackerCursorToJson(last_batch_cursor);
  j["last_loss"] = last_loss_;
  j["lr"] = last_lr_;
  j["world_size"] = comm_->world_size();
  j["context_parallel"] = config_.context_parallel();
  j["position_frequency"] = posfreq_->ToJson();
  if (data_.tokens != nullptr) {
    j["data_docs"] = data_.tokens->n_docs();
    j["data_tokens"] = data_.tokens->n_tokens();
  }
  if (data_.sft_schedule != nullptr) {
    // SFT: the schedule's next step, where the last step's batch started, and the data it indexes.
    j["sft_cursor"] = SftScheduleCursorToJson(data_.sft_schedule->cursor());
    j["sft_last_step_cursor"] = SftScheduleCursorToJson(batches_->sft_last_step_cursor());
    j["sft_examples"] = data_.sft_data->n_examples();
    j["sft_tokens"] = data_.sft_data->n_tokens();
  }
  return j;
}

void Trainer::PrintRunBanner() const {
  std::printf(
      "longctx train: %s | %s | %d layers [%s] | %lld params | seq %d x batch %d x accum %d x world %d (%s)\n",
        dims_.name.c_str(), backend_->name().c_str(), dims_.layers, LayerKindsString(dims_.kinds).c_str(),
        static_cast<long long>(model_->layout().total()), config_.data().seq_len(), config_.data().batch_size(),
        config_.grad_accum(), comm_->world_size(), comm_->name().c_str());
  if (context_ != nullptr)
    std::printf("context parallel: %d ranks per row (zig-zag chunks of seq / %d), %d data-parallel groups\n",
                context_->cp(), 2 * context_->cp(), context_->data_world());
  if (data_.sft_schedule != nullptr)
    std::printf("SFT: %s, %lld examples (%lld tokens, %lld with loss) from %s; seq/batch above are eval's\n",
                SftScheduleSummary(data_.sft_schedule->options()).c_str(),
                static_cast<long long>(data_.sft_data->n_examples()), static_cast<long long>(data_.sft_data->n_tokens()),
                static_cast<long long>(data_.sft_data->n_loss_tokens()), SftDataFile(config_).c_str());
  if (data_.retrieval != nullptr)
    std::printf("retrieval rows: %.1f%% of rows, '%s' format, loss on %s, curriculum \"%s\"\n",
                100.0 * config_.data().retrieval_fraction(), data_.retrieval->options().format.name.c_str(),
                config_.data().retrieval_loss().c_str(),
                config_.data().retrieval_curriculum().empty()
                    ? absl::StrCat("0:", config_.data().retrieval_needles(), ":0").c_str()
                    : config_.data().retrieval_curriculum().c_str());
}

absl::Status Trainer::ReportSkippedStep(const StepResult& r, int consecutive_skips, const std::string& last_checkpoint) {
  const int64_t step = r.step;
  if (comm_->rank() == 0) {
    std::printf("step %6lld: non-finite loss or gradient on %d of %d ranks (loss %g); step skipped "
                "(%d in a row, %lld in this run)\n",
                static_cast<long long>(step), r.ranks_nonfinite, comm_->world_size(), r.loss, consecutive_skips,
                static_cast<long long>(nonfinite_skips_));
    std::fflush(stdout);
    if (metrics_) {
      nlohmann::json ev = {{"kind", "nonfinite_skip"}, {"step", step}, {"ranks", r.ranks_nonfinite},
                           {"consecutive", consecutive_skips}, {"skipped_this_run", nonfinite_skips_}};
      if (absl::Status st = metrics_->Write(ev); !st.ok()) return st;
    }
  }
  if (consecutive_skips > config_.max_consecutive_nonfinite_skips())
    return absl::InternalError(absl::StrFormat(
        "step %d: %d consecutive steps with a non-finite loss or gradient skipped (max_consecutive_nonfinite_skips "
        "= %d); stopping (last checkpoint: %s)",
        step, consecutive_skips, config_.max_consecutive_nonfinite_skips(),
        last_checkpoint.empty() ? "none from this run" : last_checkpoint));
  return absl::OkStatus();
}

TrainSummary Trainer::FinishedRunSummary() const {
  if (comm_->rank() == 0)
    std::printf("longctx train: already at step %lld (steps %lld); %s is left as it is\n",
                static_cast<long long>(step_), static_cast<long long>(config_.steps()), resumed_from_.c_str());
  TrainSummary summary;
  summary.start_step = summary.final_step = step_;
  summary.checkpoint = resumed_from_;
  auto number = [this](const char* k) -> std::optional<double> {
    if (resumed_state_.contains(k) && resumed_state_[k].is_number()) return resumed_state_[k].get<double>();
    return std::nullopt;
  };
  summary.last_loss = number("last_loss");
  summary.final_batch_loss = number("checkpoint_batch_loss");
  return summary;
}

HookContext Trainer::MakeHookContext(TrainSummary* summary) {
  HookContext ctx;
  ctx.rank = comm_->rank();
  ctx.world_size = comm_->world_size();
  ctx.comm = comm_.get();
  ctx.config = &config_;
  ctx.dims = &dims_;
  ctx.backend = backend_.get();
  ctx.model = model_.get();
  ctx.optimizer = strategy_->replicated_optimizer();  // null when sharded: the hooks gather it
  ctx.device_batch = device_batch_.get();
  ctx.context = context_.get();
  ctx.metrics = metrics_ ? &*metrics_ : nullptr;
  ctx.posfreq = posfreq_.get();
  ctx.summary = summary;
  ctx.run_start = std::chrono::steady_clock::now();
  ctx.tokens_seen = tokens_seen_;
  ctx.state_json = [this](const PackerCursor& c) { return StateJson(c); };
  return ctx;
}

absl::StatusOr<TrainSummary> Trainer::Run(int64_t max_steps_this_run) {
  TrainSummary summary;
  summary.start_step = step_;
  const int rank = comm_->rank();
  const int accum = config_.grad_accum();
  const int64_t total_steps = config_.steps();
  const int64_t decay_steps = config_.optim().decay_steps() > 0 ? config_.optim().decay_steps() : total_steps;
  std::vector<PackedBatch> micro(accum * data_world());
  PackerCursor last_batch_cursor = batches_->cursor();
  int64_t steps_this_run = 0;
  // A finished run stays as it was: no step, no save, no metrics.
  if (step_ >= total_steps && !resumed_from_.empty()) return FinishedRunSummary();
  HookContext ctx = MakeHookContext(&summary);
  // Every event goes to every hook in order, except rank-0-only hooks elsewhere.
  auto each_hook = [&](auto&& call) -> absl::Status {
    for (const std::unique_ptr<Hook>& h : hooks_) {
      if (h->rank0_only() && rank != 0) continue;
      if (absl::Status st = call(*h); !st.ok()) return st;
    }
    return absl::OkStatus();
  };

  if (rank == 0) PrintRunBanner();
  if (absl::Status st = each_hook([&](Hook& h) { return h.OnRunStart(ctx); }); !st.ok()) return st;
  // SIGTERM / SIGUSR1 from here on: finish the step, save, stop (train/preemption.h).
  InstallPreemptionHandlers();
  int consecutive_skips = 0;

  while (step_ < total_steps && (max_steps_this_run <= 0 || steps_this_run < max_steps_this_run)) {
    const int64_t next = step_ + 1;
    const double lr = WarmupCosineLr(next, config_.optim().lr(), config_.optim().min_lr(),
                                     config_.optim().warmup_steps(), decay_steps);
    last_batch_cursor = batches_->cursor();
    absl::StatusOr<int64_t> target_tokens = batches_->Next(next, &micro);
    if (!target_tokens.ok()) return target_tokens.status();
    absl::StatusOr<StepResult> r = train_step_->Run(next, micro, *target_tokens, lr, ctx.last_checkpoint);
    if (!r.ok()) return r.status();
    if (r->skipped) {  // every rank alike (train_step.h); the step number does not advance
      ++nonfinite_skips_;
      if (absl::Status st = ReportSkippedStep(*r, ++consecutive_skips, ctx.last_checkpoint); !st.ok()) return st;
      continue;
    }
    consecutive_skips = 0;
    step_ = next;
    ++steps_this_run;
    last_loss_ = r->loss;
    last_lr_ = lr;
    for (const PackedBatch& b : micro) tokens_seen_ += int64_t{b.batch_size} * b.seq_len;  // SFT: L varies per step
    ctx.tokens_seen = tokens_seen_;
    if (steps_this_run == 1) summary.first_loss = r->loss;
    const StepEvent event{*r, micro, last_batch_cursor, steps_this_run};
    if (absl::Status st = each_hook([&](Hook& h) { return h.OnStepEnd(ctx, event); }); !st.ok()) return st;
    // Preemption: all ranks agree at this step boundary (one int64 all-reduce).
    absl::StatusOr<int> sig = AgreePreemptionSignal(*comm_);
    if (!sig.ok()) return sig.status();
    if (*sig != 0 && step_ < total_steps) {
      preempted_signal_ = *sig;
      break;
    }
  }
  summary.final_step = step_;
  if (steps_this_run > 0) summary.last_loss = last_loss_;
  const RunEndEvent end{step_, step_ == total_steps, steps_this_run > 0, steps_this_run, micro, last_batch_cursor};
  if (absl::Status st = each_hook([&](Hook& h) { return h.OnRunEnd(ctx, end); }); !st.ok()) return st;
  if (end.final)
    if (absl::Status st = each_hook([&](Hook& h) { return h.OnFinal(ctx, end); }); !st.ok()) return st;
  if (preempted_signal_ != 0 && rank == 0) {
    std::printf("longctx train: preempted by %s after step %lld; checkpoint %s is complete; to resume, run the same "
                "command again (it continues from the newest checkpoint in %s); exit code %d\n",
                PreemptionSignalName(preempted_signal_), static_cast<long long>(step_), summary.checkpoint.c_str(),
                config_.out_dir().c_str(), kPreemptedExitCode);
    std::fflush(stdout);
  }
  return summary;
}

}  // namespace longctx
