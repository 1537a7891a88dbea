// Why: see trainer.h. One step: take grad_accum × world micro-batches in the
// global data order (rank r uses those with index % world == r, so the data a
// run sees does not depend on how many ranks share it), count their target
// tokens, accumulate gradients of the mean loss, all-reduce, clip, AdamW.
#include "train/trainer.h"

#include <omp.h>
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kernels/log.h"
#include "optim/lr_schedule.h"
#include "train/checkpoint/checkpoint.h"
#include "train/checkpoint/checkpoint_dir.h"
#include "train/evaluate.h"
#include "train/probe/niah_probe_config.h"
#include "train/probe/niah_probe_model.h"
#include "train/probe/niah_probe_report.h"

namespace longctx {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

PackerOptions PackerOptionsFor(const TrainConfig& config, PackerSplit split) {
  PackerOptions o;
  o.seq_len = config.data().seq_len();
  o.batch_size = config.data().batch_size();
  o.document_mask = config.data().document_mask();
  o.shuffle_seed = config.data().shuffle_seed();
  o.eval_fraction = config.data().eval_fraction();
  o.split = split;
  return o;
}

}  // namespace

void SetComputeThreads(int threads) {
  if (threads <= 0) return;
  omp_set_num_threads(threads);
  openblas_set_num_threads(threads);
}

absl::Status ApplyPrecision(const TrainConfig& config, Backend* backend) {
  const MatmulPrecision p = config.precision() == BF16 ? MatmulPrecision::kBF16 : MatmulPrecision::kF32;
  absl::Status st = backend->SetMatmulPrecision(p);
  if (!st.ok()) return absl::Status(st.code(), absl::StrCat("precision: ", st.message()));
  return absl::OkStatus();
}

ScopedComputeThreads::ScopedComputeThreads(int threads)
    : omp_(omp_get_max_threads()), blas_(openblas_get_num_threads()) {
  SetComputeThreads(threads);
}

ScopedComputeThreads::~ScopedComputeThreads() {
  omp_set_num_threads(omp_);
  openblas_set_num_threads(blas_);
}

absl::StatusOr<std::unique_ptr<TokenDataset>> OpenTrainingData(const TrainConfig& config) {
  if (config.data().path().empty())
    return absl::InvalidArgumentError("data.path: empty; point it at a token file or directory built by `longctx data`");
  absl::StatusOr<TokenDataset> d = TokenDataset::Open({config.data().path()});
  if (!d.ok()) return absl::Status(d.status().code(), absl::StrCat("data.path: ", d.status().message()));
  return std::make_unique<TokenDataset>(std::move(*d));
}

absl::StatusOr<std::unique_ptr<Packer>> MakeTrainPacker(const TrainConfig& config, const DocumentSource* tokens) {
  absl::StatusOr<Packer> p = Packer::Create(tokens, PackerOptionsFor(config, PackerSplit::kTrain));
  if (!p.ok()) return p.status();
  return std::make_unique<Packer>(std::move(*p));
}

absl::StatusOr<std::unique_ptr<Packer>> MakeEvalPacker(const TrainConfig& config, const DocumentSource* tokens) {
  absl::StatusOr<Packer> p = Packer::Create(tokens, PackerOptionsFor(config, PackerSplit::kEval));
  if (!p.ok()) return p.status();
  return std::make_unique<Packer>(std::move(*p));
}

Trainer::~Trainer() = default;

absl::StatusOr<std::unique_ptr<Trainer>> Trainer::Create(const TrainConfig& config,
                                                         std::unique_ptr<Communicator> comm) {
  std::unique_ptr<Trainer> t(new Trainer());
  t->config_ = config;
  t->comm_ = std::move(comm);
  absl::StatusOr<ModelDims> dims = ResolveModelConfig(config.model());
  if (!dims.ok()) return dims.status();
  t->dims_ = *dims;
  SetComputeThreads(config.threads());
  absl::StatusOr<std::unique_ptr<Backend>> backend = MakeBackend(config.backend());
  if (!backend.ok()) return absl::InvalidArgumentError(absl::StrCat("backend: ", backend.status().message()));
  t->backend_ = std::move(*backend);
  if (absl::Status st = ApplyPrecision(config, t->backend_.get()); !st.ok()) return st;

  absl::StatusOr<std::unique_ptr<Tokenizer>> tok = MakeTokenizer(config.data().tokenizer());
  if (!tok.ok()) return absl::InvalidArgumentError(absl::StrCat("data.tokenizer: ", tok.status().message()));
  t->tokenizer_ = std::move(*tok);
  if (t->tokenizer_->vocab_size() > t->dims_.vocab)
    return absl::InvalidArgumentError(absl::StrCat("model.vocab_size: ", t->dims_.vocab, " is smaller than tokenizer '",
                                                   t->tokenizer_->name(), "' (", t->tokenizer_->vocab_size(), " ids)"));
  absl::StatusOr<std::unique_ptr<TokenDataset>> tokens = OpenTrainingData(config);
  if (!tokens.ok()) return tokens.status();
  t->tokens_ = std::move(*tokens);
  if (t->tokens_->vocab_size() > t->dims_.vocab)
    return absl::InvalidArgumentError(absl::StrCat("model.vocab_size: ", t->dims_.vocab, " < vocab of ",
                                                   config.data().path(), " (", t->tokens_->vocab_size(), ")"));
  absl::StatusOr<std::unique_ptr<Packer>> packer = MakeTrainPacker(config, t->tokens_.get());
  if (!packer.ok()) return packer.status();
  t->train_packer_ = std::move(*packer);
  absl::StatusOr<std::unique_ptr<RetrievalMixer>> mixer = MakeRetrievalMixer(config, t->tokens_.get(), t->tokenizer_.get());
  if (!mixer.ok()) return mixer.status();
  t->retrieval_ = std::move(*mixer);
  if (!MakeEvalPacker(config, t->tokens_.get()).ok()) {
    LOG(WARNING) << "data.eval_fraction " << config.data().eval_fraction() << " leaves no eval documents in "
                 << config.data().path() << "; evaluation is skipped";
    t->has_eval_ = false;
  }

  t->posfreq_ = std::make_unique<PositionFrequency>(config.data().seq_len());
  t->model_ = std::make_unique<Transformer>(t->dims_, t->backend_.get(), DType::kF32);
  AdamWSettings s;
  s.beta1 = config.optim().beta1();
  s.beta2 = config.optim().beta2();
  s.eps = config.optim().eps();
  s.weight_decay = config.optim().weight_decay();
  s.grad_clip = config.optim().grad_clip();
  s.decay_norms = config.optim().decay_norms();
  t->optimizer_ = std::make_unique<AdamW>(&t->model_->layout(), t->backend_.get(), DType::kF32, s);
  t->device_batch_ = std::make_unique<DeviceBatch>(t->backend_.get());
  if (config.probe_every() != 0) {
    absl::StatusOr<ProbeSettings> ps = ProbeSettingsFromConfig(config);
    if (!ps.ok()) return ps.status();
    std::vector<uint32_t> docs = SplitDocuments(*t->tokens_, config.data().eval_fraction(), /*eval_split=*/true);
    if (docs.empty())
      return absl::FailedPreconditionError(absl::StrCat(
          "probe_every: the eval split of ", config.data().path(), " is empty (data.eval_fraction ",
          config.data().eval_fraction(), "); the probe cuts its haystacks from eval documents"));
    t->probe_settings_ = *ps;
    t->probe_haystack_ = std::make_unique<HaystackSource>(t->tokens_.get(), std::move(docs), t->tokenizer_.get());
    // Fail now, not at the first probe, when no trial can be built.
    const int64_t fixed = NeedleFixedTokens(ps->format, ps->needles, *t->tokenizer_);
    int64_t first = -1;
    for (int64_t L : ProbeLengths(*ps))
      if (first < 0 && L >= fixed) first = L;
    if (first < 0)
      return absl::InvalidArgumentError(absl::StrCat("probe_max_len: ", ps->max_len, " is shorter than the ", fixed,
                                                     " tokens the '", ps->format.name, "' format takes with ",
                                                     ps->needles, " needles"));
    absl::StatusOr<NeedleSample> trial = MakeProbeTrial(*ps, *t->probe_haystack_, first, 0);
    if (!trial.ok()) return absl::Status(trial.status().code(), absl::StrCat("probe: ", trial.status().message()));
    absl::StatusOr<std::unique_ptr<TransformerProbeModel>> pm = TransformerProbeModel::Create(t->model_.get());
    if (!pm.ok()) return pm.status();
    t->probe_model_ = std::move(*pm);
  }

  absl::StatusOr<std::optional<std::string>> latest = FindLatestCheckpoint(config.out_dir());
  if (!latest.ok()) return latest.status();
  if (latest->has_value()) {
    absl::Status st = t->Resume(**latest);
    if (!st.ok()) return st;
  } else if (!config.init_from().empty()) {
    // A new stage: weights only; the optimizer, step and data start fresh.
    absl::Status st = LoadModelWeights(config.init_from(), t->model_.get());
    if (!st.ok()) return absl::Status(st.code(), absl::StrCat("init_from: ", st.message()));
    LOG(INFO) << "initialised weights from " << config.init_from();
  } else {
    t->model_->InitParams(config.seed());
  }
  if (t->comm_->rank() == 0) {
    std::error_code ec;
    std::filesystem::create_directories(config.out_dir(), ec);
    if (ec) return absl::UnavailableError(absl::StrCat("out_dir: cannot create ", config.out_dir(), ": ", ec.message()));
    absl::StatusOr<MetricsWriter> m = MetricsWriter::Open(config.out_dir() + "/metrics.jsonl");
    if (!m.ok()) return m.status();
    t->metrics_.emplace(std::move(*m));
  }
  return t;
}

absl::Status Trainer::Resume(const std::string& dir) {
  absl::StatusOr<TrainConfig> saved = LoadCheckpointConfig(dir);
  if (!saved.ok()) return saved.status();
  absl::StatusOr<ModelDims> saved_dims = ResolveModelConfig(saved->model());
  if (!saved_dims.ok()) return saved_dims.status();
  if (!(*saved_dims == dims_))
    return absl::FailedPreconditionError(absl::StrCat(
        dir, ": this checkpoint was trained with a different model config; use a new out_dir or the same model"));
  // The data cursor only means "the next batch" under the same packing settings.
  const DataConfig &a = saved->data(), &b = config_.data();
  if (a.seq_len() != b.seq_len() || a.batch_size() != b.batch_size() || a.document_mask() != b.document_mask() ||
      a.shuffle_seed() != b.shuffle_seed() || a.eval_fraction() != b.eval_fraction() ||
      saved->grad_accum() != config_.grad_accum())
    return absl::FailedPreconditionError(absl::StrCat(
        dir, ": data.seq_len/batch_size/document_mask/shuffle_seed/eval_fraction or grad_accum differ from the "
             "checkpoint's; exact resume needs the same packing (use a new out_dir to start over)"));
  absl::Status st = LoadModelWeights(dir, model_.get());
  if (st.ok()) st = LoadOptimizerState(dir, optimizer_.get());
  if (!st.ok()) return st;
  absl::StatusOr<nlohmann::json> state = LoadTrainerState(dir);
  if (!state.ok()) return state.status();
  try {
    if (state->contains("data_docs") && (state->at("data_docs").get<int64_t>() != tokens_->n_docs() ||
                                         state->at("data_tokens").get<int64_t>() != tokens_->n_tokens()))
      return absl::FailedPreconditionError(absl::StrCat(
          dir, ": the checkpoint's data had ", state->at("data_docs").get<int64_t>(), " documents and ",
          state->at("data_tokens").get<int64_t>(), " tokens; ", tokens_->source_name(), " has ", tokens_->n_docs(),
          " and ", tokens_->n_tokens(), ", so its data cursor does not apply"));
    step_ = state->at("step").get<int64_t>();
    tokens_seen_ = state->at("tokens_seen").get<int64_t>();
    absl::StatusOr<PackerCursor> cursor = PackerCursorFromJson(state->at("packer_cursor"));
    if (!cursor.ok()) return cursor.status();
    st = train_packer_->Seek(*cursor);
    if (!st.ok()) return st;
  } catch (const nlohmann::json::exception& e) {
    return absl::DataLossError(absl::StrCat(dir, "/", kTrainerStateFile, ": ", e.what()));
  }
  if (state->contains("position_frequency")) {
    absl::StatusOr<PositionFrequency> pf = PositionFrequency::FromJson(state->at("position_frequency"));
    if (!pf.ok()) return absl::DataLossError(absl::StrCat(dir, "/", kTrainerStateFile, ": ", pf.status().message()));
    if (pf->max_len() != posfreq_->max_len())
      return absl::FailedPreconditionError(absl::StrCat(dir, ": position counters for max_len ", pf->max_len()));
    *posfreq_ = std::move(*pf);
  }
  optimizer_->set_step(step_);
  LOG(INFO) << "resumed from " << dir << " at step " << step_;
  return absl::OkStatus();
}

nlohmann::json Trainer::StateJson(const PackerCursor& last_batch_cursor) const {
  nlohmann::json j;
  j["step"] = step_;
  j["tokens_seen"] = tokens_seen_;
  j["seed"] = config_.seed();
  j["packer_cursor"] = PackerCursorToJson(train_packer_->cursor());
  j["last_batch_cursor"] = PackerCursorToJson(last_batch_cursor);
  j["last_loss"] = last_loss_;
  j["lr"] = last_lr_;
  j["world_size"] = comm_->world_size();
  j["position_frequency"] = posfreq_->ToJson();
  j["data_docs"] = tokens_->n_docs();
  j["data_tokens"] = tokens_->n_tokens();
  return j;
}

nlohmann::json Trainer::PositionFrequencyEvent() const {
  auto summary = [&](int64_t window) {
    const PositionFrequencySummary s = posfreq_->Summarize(config_.posfreq_k(), window);
    return nlohmann::json{{"window", window},
                          {"pairs_per_layer", s.total_pairs},
                          {"share_ge_half", s.share_ge_half},
                          {"share_ge_three_quarters", s.share_ge_three_quarters},
                          {"share_le_half", s.share_le_half},
                          {"largest_i_with_k", s.largest_i_with_k},
                          {"bins", BinnedCounts(posfreq_->Counts(window))}};
  };
  nlohmann::json ev = {{"kind", "posfreq"}, {"step", step_}, {"max_len", posfreq_->max_len()},
                       {"k", config_.posfreq_k()}};
  const int full = dims_.layers - dims_.num_layers_of(ROPE_SWA);
  const int sliding = dims_.num_layers_of(ROPE_SWA);
  if (full > 0) ev["full"] = summary(0), ev["full"]["layers"] = full;
  if (sliding > 0) ev["sliding"] = summary(dims_.window), ev["sliding"]["layers"] = sliding;
  return ev;
}

absl::Status Trainer::RunPeriodicProbe() {
  absl::StatusOr<ProbeResult> r;
  {
    ScopedComputeThreads threads(config_.probe_threads());
    r = RunProbe(*probe_settings_, *probe_haystack_, *probe_model_, {.keep_trials = true});
  }
  if (!r.ok()) return absl::Status(r.status().code(), absl::StrCat("step ", step_, ": ", r.status().message()));
  const std::string dir = config_.out_dir() + "/probe";
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::UnavailableError(absl::StrCat("probe: cannot create ", dir, ": ", ec.message()));
  const std::string base = absl::StrFormat("%s/step-%08d", dir, step_);
  absl::Status st = WriteProbeJson(*r, base + ".json");
  if (st.ok() && r->settings.decode)
    st = WriteProbeHeatmap(*r,
                           absl::StrFormat("%s: %d-needle NIAH at step %d, effective length %d", dims_.name,
                                           r->settings.needles, step_, r->effective_length),
                           base + ".png");
  if (st.ok()) st = metrics_->Write(ProbeMetricsEvent(*r, step_));
  if (!st.ok()) return st;
  std::printf("probe  step %lld | %s | %s.%s\n", static_cast<long long>(step_), ProbeSummaryLine(*r).c_str(),
              base.c_str(), r->settings.decode ? "png" : "json");
  std::fflush(stdout);
  return absl::OkStatus();
}

absl::StatusOr<std::string> Trainer::Save(const PackerCursor& last_batch_cursor, const PackedBatch* last_batch) {
  nlohmann::json state = StateJson(last_batch_cursor);
  if (last_batch != nullptr) {
    // The saved weights' loss on the last step's first micro-batch: what
    // `longctx eval --batch=last_train` recomputes from this checkpoint.
    EvalResult r = EvaluateBatch(*model_, *last_batch, *device_batch_);
    state["checkpoint_batch_loss"] = r.mean();
    state["checkpoint_batch_tokens"] = r.tokens;
  }
  if (comm_->rank() != 0) return std::string();
  return SaveCheckpoint(config_.out_dir(), step_, config_, *model_, optimizer_.get(), state,
                        config_.keep_checkpoints(), tokenizer_->bos_id(), tokenizer_->eos_id());
}

absl::StatusOr<TrainSummary> Trainer::Run(int64_t max_steps_this_run) {
  TrainSummary summary;
  summary.start_step = step_;
  const int world = comm_->world_size(), rank = comm_->rank();
  const int accum = config_.grad_accum();
  const int64_t total_steps = config_.steps();
  const int64_t decay_steps = config_.optim().decay_steps() > 0 ? config_.optim().decay_steps() : total_steps;
  std::vector<PackedBatch> micro(accum * world);
  PackerCursor last_batch_cursor = train_packer_->cursor();
  bool have_last = false;
  int64_t window_tokens = 0;
  auto window_start = Clock::now();
  const auto run_start = Clock::now();
  int64_t steps_this_run = 0;
  std::string last_ckpt;

  if (rank == 0)
    std::printf("longctx train: %s | %s | %d layers [%s] | %lld params | seq %d x batch %d x accum %d x world %d\n",
                dims_.name.c_str(), backend_->name().c_str(), dims_.layers,
                LayerKindsString(dims_.kinds).c_str(), static_cast<long long>(model_->layout().total()),
                config_.data().seq_len(), config_.data().batch_size(), accum, world);
  if (rank == 0 && retrieval_ != nullptr)
    std::printf("retrieval rows: %.1f%% of rows, '%s' format, loss on %s, curriculum \"%s\"\n",
                100.0 * config_.data().retrieval_fraction(), retrieval_->options().format.name.c_str(),
                config_.data().retrieval_loss().c_str(),
                config_.data().retrieval_curriculum().empty()
                    ? absl::StrCat("0:", config_.data().retrieval_needles(), ":0").c_str()
                    : config_.data().retrieval_curriculum().c_str());
  if (rank == 0 && probe_settings_) {
    const ProbeSettings& p = *probe_settings_;
    const size_t lengths = ProbeLengths(p).size();
    std::printf("probe every %d steps: %d-needle '%s' NIAH at %lld..%lld step %lld, %d trials x %zu lengths = %zu %s\n",
                config_.probe_every(), p.needles, p.format.name.c_str(), static_cast<long long>(p.min_len),
                static_cast<long long>(p.max_len), static_cast<long long>(p.len_step), p.trials, lengths,
                lengths * static_cast<size_t>(p.trials), p.decode ? "greedy decodes" : "answer-loss passes");
  }

  while (step_ < total_steps && (max_steps_this_run <= 0 || steps_this_run < max_steps_this_run)) {
    const int64_t next = step_ + 1;
    const double lr = WarmupCosineLr(next, config_.optim().lr(), config_.optim().min_lr(),
                                     config_.optim().warmup_steps(), decay_steps);
    last_batch_cursor = train_packer_->cursor();
    int64_t target_tokens = 0;
    for (auto& b : micro) {
      const uint64_t first_row = train_packer_->cursor().rows_emitted;
      absl::StatusOr<PackedBatch> batch = train_packer_->Next();
      if (!batch.ok()) return batch.status();
      b = std::move(*batch);
      if (retrieval_ != nullptr) {
        absl::Status mst = retrieval_->Apply(next, first_row, &b);
        if (!mst.ok()) return mst;
      }
      target_tokens += b.num_target_tokens;
      // Every rank packs every micro-batch of the step, so each counts the
      // segments of all ranks without communication.
      posfreq_->AddCuSeqlens(b.cu_seqlens);
    }
    if (target_tokens == 0) return absl::DataLossError(absl::StrCat("step ", next, ": batch has no target tokens"));
    model_->grads().Zero();
    double loss_sum = 0;
    for (int i = rank; i < static_cast<int>(micro.size()); i += world) {
      BatchTensors t = device_batch_->Upload(micro[i]);
      loss_sum += model_->ForwardBackward(t, 1.0 / static_cast<double>(target_tokens), /*backward=*/true);
    }
    for (int b = 0; b < model_->layout().num_buffers(); ++b) {
      absl::Status st = comm_->AllReduceSum(model_->grads().buffer(b));
      if (!st.ok()) return st;
    }
    absl::Status st = comm_->AllReduceSum(&loss_sum, 1);
    if (!st.ok()) return st;
    const double loss = loss_sum / static_cast<double>(target_tokens);
    if (!std::isfinite(loss) && config_.stop_on_nonfinite())
      return absl::InternalError(absl::StrFormat(
          "step %d: training loss is %f; stopping without updating or saving (last checkpoint: %s)", next, loss,
          last_ckpt.empty() ? "none from this run" : last_ckpt));
    StepStats stats = optimizer_->Step(model_->params(), model_->grads(), lr);
    if (!std::isfinite(stats.grad_norm) && config_.stop_on_nonfinite())
      return absl::InternalError(absl::StrFormat("step %d: gradient norm is %f (loss %f); stopping", next,
                                                 stats.grad_norm, loss));
    step_ = next;
    ++steps_this_run;
    last_loss_ = loss;
    last_lr_ = lr;
    tokens_seen_ += static_cast<int64_t>(micro.size()) * config_.data().seq_len() * config_.data().batch_size();
    window_tokens += static_cast<int64_t>(micro.size()) * config_.data().seq_len() * config_.data().batch_size();
    have_last = true;
    if (steps_this_run == 1) summary.first_loss = loss;

    if (step_ % config_.log_every() == 0 || step_ == total_steps) {
      const auto now = Clock::now();
      const double dt = Seconds(window_start, now);
      const double tps = dt > 0 ? window_tokens / dt : 0;
      summary.tokens_per_second = tps;
      if (rank == 0) {
        std::printf("step %6lld/%lld | loss %.4f | lr %.3e | gnorm %.3f | %.0f tok/s | %.1f s\n",
                    static_cast<long long>(step_), static_cast<long long>(total_steps), loss, lr, stats.grad_norm,
                    tps, Seconds(run_start, now));
        std::fflush(stdout);
        nlohmann::json ev = {{"kind", "train"}, {"step", step_},        {"loss", loss},
                             {"lr", lr},        {"grad_norm", stats.grad_norm}, {"clip_scale", stats.clip_scale},
                             {"tokens_seen", tokens_seen_}, {"tokens_per_s", tps}};
        st = metrics_->Write(ev);
        if (!st.ok()) return st;
      }
      window_tokens = 0;
      window_start = Clock::now();
    }
    if (rank == 0 && config_.posfreq_every() > 0 && step_ % config_.posfreq_every() == 0) {
      st = metrics_->Write(PositionFrequencyEvent());
      if (!st.ok()) return st;
    }
    if (has_eval_ && config_.eval_every() > 0 && step_ % config_.eval_every() == 0 && step_ != total_steps) {
      absl::StatusOr<std::unique_ptr<Packer>> ep = MakeEvalPacker(config_, tokens_.get());
      if (!ep.ok()) return ep.status();
      absl::StatusOr<EvalResult> ev = EvaluateLoss(*model_, **ep, *device_batch_, config_.eval_batches());
      if (!ev.ok()) return ev.status();
      if (rank == 0) {
        std::printf("eval   step %lld | loss %.4f over %lld tokens\n", static_cast<long long>(step_), ev->mean(),
                    static_cast<long long>(ev->tokens));
        st = metrics_->Write({{"kind", "eval"}, {"step", step_}, {"loss", ev->mean()}, {"tokens", ev->tokens}});
        if (!st.ok()) return st;
      }
    }
    if (rank == 0 && probe_settings_ && step_ % config_.probe_every() == 0) {
      const auto probe_start = Clock::now();
      st = RunPeriodicProbe();
      if (!st.ok()) return st;
      window_start += Clock::now() - probe_start;  // tokens/s counts training only
      probe_seconds_ += Seconds(probe_start, Clock::now());
      ++probes_run_;
    }
    if (config_.ckpt_every() > 0 && step_ % config_.ckpt_every() == 0 && step_ != total_steps) {
      absl::StatusOr<std::string> path = Save(last_batch_cursor, &micro[0]);
      if (!path.ok()) return path.status();
      last_ckpt = *path;
      if (rank == 0) std::printf("checkpoint %s\n", path->c_str());
    }
  }
  summary.final_step = step_;
  summary.last_loss = last_loss_;
  if (rank == 0 && probes_run_ > 0)
    std::printf("probe  %d probes took %.1f s, %.1f%% of this run's %.1f s\n", probes_run_, probe_seconds_,
                100.0 * probe_seconds_ / std::max(1e-9, Seconds(run_start, Clock::now())),
                Seconds(run_start, Clock::now()));
  if (step_ == total_steps) {
    // Final checkpoint, final batch loss and eval.
    absl::StatusOr<std::string> path = Save(last_batch_cursor, have_last ? &micro[0] : nullptr);
    if (!path.ok()) return path.status();
    summary.checkpoint = *path;
    if (have_last) summary.final_batch_loss = EvaluateBatch(*model_, micro[0], *device_batch_).mean();
    if (rank == 0) {
      std::printf("checkpoint %s\n", path->c_str());
      nlohmann::json pf = PositionFrequencyEvent();
      absl::Status st = metrics_->Write(pf);
      if (!st.ok()) return st;
      for (const char* kind : {"full", "sliding"})
        if (pf.contains(kind))
          std::printf("posfreq %-7s | pairs/layer %.4g | i >= L/2: %.2f%% | i >= 3L/4: %.2f%% | largest i with >= %g: %lld\n",
                      kind, pf[kind]["pairs_per_layer"].get<double>(), 100 * pf[kind]["share_ge_half"].get<double>(),
                      100 * pf[kind]["share_ge_three_quarters"].get<double>(), config_.posfreq_k(),
                      static_cast<long long>(pf[kind]["largest_i_with_k"].get<int64_t>()));
    }
    if (has_eval_) {
      absl::StatusOr<std::unique_ptr<Packer>> ep = MakeEvalPacker(config_, tokens_.get());
      if (!ep.ok()) return ep.status();
      absl::StatusOr<EvalResult> ev = EvaluateLoss(*model_, **ep, *device_batch_, config_.eval_batches());
      if (!ev.ok()) return ev.status();
      summary.eval_loss = ev->mean();
      summary.eval_tokens = ev->tokens;
      if (rank == 0) {
        std::printf("eval   step %lld | loss %.4f over %lld tokens\n", static_cast<long long>(step_), ev->mean(),
                    static_cast<long long>(ev->tokens));
        absl::Status st =
            metrics_->Write({{"kind", "eval"}, {"step", step_}, {"loss", ev->mean()}, {"tokens", ev->tokens}});
        if (!st.ok()) return st;
      }
    }
  } else if (steps_this_run > 0) {
    absl::StatusOr<std::string> path = Save(last_batch_cursor, &micro[0]);
    if (!path.ok()) return path.status();
    summary.checkpoint = *path;
  }
  return summary;
}

}  // namespace longctx
