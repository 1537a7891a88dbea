// Why: see commands.h.
#include "train/cli/commands.h"

#include <optional>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "data/corpus_builder.h"
#include "data/make_tokenizer.h"
#include "data/posfreq_analysis.h"
#include "data/text_corpus.h"
#include "data/token_file.h"
#include "data/tokenizer.h"
#include "data/token_dataset.h"
#include "data/tokenize_shards.h"
#include "base/log.h"
#include "launch/communicator.h"
#include "model/config.h"
#include "model/plan.h"
#include "train/checkpoint/checkpoint.h"
#include "train/config_loader.h"
#include "train/device_batch.h"
#include "train/evaluate.h"
#include "train/setup/loaded_checkpoint.h"
#include "train/setup/niah_probe_config.h"
#include "train/probe/niah_probe_model.h"
#include "train/probe/niah_probe_report.h"
#include "train/report/png_plot.h"
#include "train/report/progress.h"
#include "train/setup/sft_config.h"
#include "train/string_config.h"
#include "train/preemption.h"
#include "train/setup/backend_for_config.h"
#include "train/trainer.h"

namespace longctx {
int RunTrainCommand(const std::string& config_path, const std::vector<std::string>& overrides) {
  absl::StatusOr<TrainConfig> config = LoadTrainConfig(config_path, overrides);
  if (!config.ok()) return FailCommand(config.status());
  // Under mpirun/srun a world of ranks (launch/communicator.h), else one process
  // as always. With peers, an error on any rank ends the whole job (AbortJob)
  // so no rank waits forever in a collective. The cuda backend's gradients
  // and shards live in device memory: its ranks talk over NCCL (host scalars
  // still over MPI), the cpu backend's over MPI.
  absl::StatusOr<BackendInfo> backend = FindBackend(config->backend());
  if (!backend.ok()) return FailCommand(backend.status());
  absl::StatusOr<std::unique_ptr<Communicator>> comm = MakeCommunicator(backend->device);
  if (!comm.ok()) return FailCommand(comm.status());
  const bool multi = (*comm)->world_size() > 1;
  const int rank = (*comm)->rank();
  auto fail = [multi](const absl::Status& st) {
    if (multi) AbortJob(st);
    return FailCommand(st);
  };
  absl::StatusOr<std::unique_ptr<Trainer>> trainer = Trainer::Create(*config, std::move(*comm));
  if (!trainer.ok()) return fail(trainer.status());
  absl::StatusOr<TrainSummary> s = (*trainer)->Run();
  if (!s.ok()) return fail(s.status());
  // Stopped by SIGTERM/SIGUSR1 with its checkpoint written: a distinct code (train/preemption.h).
  const int code = (*trainer)->preempted_signal() != 0 ? kPreemptedExitCode : 0;
  if (rank != 0) return code;
  nlohmann::json j = {{"start_step", s->start_step},
                      {"final_step", s->final_step},
                      {"first_loss", s->first_loss},
                      {"last_loss", s->last_loss},
                      {"final_batch_loss", s->final_batch_loss},
                      {"eval_loss", s->eval_loss},
                      {"eval_tokens", s->eval_tokens},
                      {"tokens_per_s", s->tokens_per_second},
                      {"checkpoint", s->checkpoint}};
  std::printf("%s\n", j.dump().c_str());
  return code;
}

int RunEvalCommand(const std::string& checkpoint, const std::string& data, const std::string& batch,
                   int eval_batches, const StringOptions& string) {
  absl::StatusOr<LoadedCheckpoint> loaded = LoadCheckpointForEval(checkpoint, data);
  if (!loaded.ok()) return FailCommand(loaded.status());
  const TrainConfig* config = &loaded->config;
  const std::unique_ptr<TokenDataset>* tokens = &loaded->tokens;
  Transformer& model = *loaded->model;
  absl::StatusOr<StringOptions> string_options = ResolveStringOptions(string, *config);
  if (!string_options.ok()) return FailCommand(string_options.status());
  absl::Status st = model.SetStringOptions(*string_options);
  if (!st.ok()) return FailCommand(st);
  DeviceBatch device_batch(loaded->backend.get());
  EvalResult result;
  if (batch == "last_train") {
    // Recompute the checkpoint_batch_loss the trainer recorded: the saved
    // weights on the first micro-batch of the last training step.
    absl::StatusOr<nlohmann::json> state = LoadTrainerState(checkpoint);
    if (!state.ok()) return FailCommand(state.status());
    if (IsSftConfig(*config)) {  // SFT: the step came from the length schedule (train/setup/sft_config.h)
      absl::StatusOr<std::unique_ptr<Tokenizer>> tok = MakeTokenizer(config->data().tokenizer());
      if (!tok.ok()) return FailCommand(tok.status());
      absl::StatusOr<PackedBatch> b = SftLastStepFirstMicroBatch(*config, *state, (*tok)->pad_id());
      if (!b.ok()) return FailCommand(absl::Status(b.status().code(), absl::StrCat(checkpoint, ": ", b.status().message())));
      result = EvaluateBatch(model, *b, device_batch);
    } else {
    if (!state->contains("last_batch_cursor"))
      return FailCommand(absl::DataLossError(checkpoint + ": trainer_state.json has no last_batch_cursor"));
    absl::StatusOr<std::unique_ptr<Packer>> packer = MakeTrainPacker(*config, tokens->get());
    if (!packer.ok()) return FailCommand(packer.status());
    absl::StatusOr<PackerCursor> cursor = PackerCursorFromJson(state->at("last_batch_cursor"));
    if (!cursor.ok()) return FailCommand(cursor.status());
    st = (*packer)->Seek(*cursor);
    if (!st.ok()) return FailCommand(st);
    absl::StatusOr<PackedBatch> b = (*packer)->Next();
    if (!b.ok()) return FailCommand(b.status());
    // Retrieval rows exactly as the trainer mixed them in at that step.
    st = MixRetrievalRows(*config, tokens->get(), state->value("step", int64_t{0}), cursor->rows_emitted, &*b);
    if (!st.ok()) return FailCommand(st);
    result = EvaluateBatch(model, *b, device_batch);
    }
  } else if (batch == "eval") {
    absl::StatusOr<std::unique_ptr<Packer>> packer = MakeEvalPacker(*config, tokens->get());
    if (!packer.ok()) return FailCommand(packer.status());
    absl::StatusOr<EvalResult> r =
        EvaluateLoss(model, **packer, device_batch, eval_batches > 0 ? eval_batches : config->eval_batches());
    if (!r.ok()) return FailCommand(r.status());
    result = *r;
  } else {
    return FailCommand(absl::InvalidArgumentError("--batch must be 'eval' or 'last_train', got '" + batch + "'"));
  }
  const std::string string_json =
      string_options->enabled ? absl::StrFormat(", \"string\": {\"s\": %d, \"w\": %d, \"rope_scale\": %s}",
                                                string_options->s, string_options->w,
                                                string_options->rope_scale ? "true" : "false")
                              : "";
  if (!std::isfinite(result.mean())) {  // JSON has no NaN: null, an error, exit 1
    std::printf("%s\n", nlohmann::json({{"loss", nullptr}, {"error", absl::StrFormat("non-finite loss (%g)", result.mean())},
                                        {"tokens", result.tokens}, {"batch", batch}, {"checkpoint", checkpoint}})
                             .dump()
                             .c_str());
    return FailCommand(absl::DataLossError(absl::StrFormat("%s: the loss is %g", checkpoint, result.mean())));
  }
  std::printf("{\"loss\": %.17g, \"tokens\": %lld, \"batches\": %d, \"batch\": \"%s\", \"checkpoint\": \"%s\"%s}\n",
              result.mean(), static_cast<long long>(result.tokens), result.batches, batch.c_str(), checkpoint.c_str(),
              string_json.c_str());
  return 0;
}

int RunPlanCommand(const std::string& config_path, const std::vector<std::string>& overrides, bool json,
                   int world, const std::string& mode, double rank_memory_gb) {
  absl::StatusOr<TrainConfig> config = LoadTrainConfig(config_path, overrides);
  if (!config.ok()) return FailCommand(config.status());
  absl::StatusOr<ModelDims> dims = ResolveModelConfig(config->model());
  if (!dims.ok()) return FailCommand(dims.status());
  PlanOptions o;
  o.batch = config->data().batch_size();
  o.seq_len = config->data().seq_len();
  o.grad_accum = config->grad_accum();
  o.recompute_every = config->model().recompute_every();
  absl::StatusOr<bool> bf16_activations = ResolveBf16Activations(config->model(), config->precision() == BF16);
  if (!bf16_activations.ok()) return FailCommand(bf16_activations.status());
  o.bf16_activations = *bf16_activations;
  o.bf16_products = config->precision() == BF16;
  o.bf16_operands = Bf16OperandsFor(*config);
  // SFT (data.sft): the schedule's micro-batch with the largest activations (train/setup/sft_config.h).
  if (IsSftConfig(*config)) {
    int64_t best = -1;
    for (const MicroBatchShape& m : TrainingMicroBatchShapes(*config, std::max(1, world))) {
      const int64_t a = EstimateTrainingMemory(*dims, m.batch, m.seq_len, o.logits_chunk_tokens, o.recompute_every,
                                                   o.bf16_activations, o.bf16_products, o.bf16_operands)
                            .activations;
      if (a > best) best = a, o.batch = m.batch, o.seq_len = m.seq_len;
    }
    if (!json)
      std::printf("SFT (data.sft): planned for the schedule's largest micro-batch, %lld x %lld tokens\n",
                  static_cast<long long>(o.batch), static_cast<long long>(o.seq_len));
  }
  Plan plan = MakePlan(*dims, o);
  std::optional<RankMemoryPlan> ranks;
  if (world > 0) {
    DataParallelMode m = config->mode() == ZERO1  ? DataParallelMode::kZero1
                         : config->mode() == FSDP ? DataParallelMode::kFsdp
                                                  : DataParallelMode::kDdp;
    if (!mode.empty() && !ParseParallelMode(mode, &m))
      return FailCommand(absl::InvalidArgumentError("--mode: '" + mode + "' is not ddp, zero1 or fsdp"));
    ranks = PlanRankMemory(plan, m, world, config->fsdp_reshard_after_forward(),
                           static_cast<int64_t>(rank_memory_gb * 1024.0 * 1024.0 * 1024.0), config->grad_sum_fp64());
  }
  if (json) {
    nlohmann::json j = PlanToJson(plan);
    if (ranks) j["per_rank"] = RankMemoryToJson(*ranks);
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("%s", FormatPlan(plan).c_str());
    if (ranks) std::printf("\n%s", FormatRankMemory(*ranks).c_str());
  }
  return 0;
}

int RunDataBuildCommand(const std::vector<std::string>& inputs, const std::string& out, const std::string& tokenizer,
                        bool split_blank_lines, int64_t max_doc_bytes) {
  if (inputs.empty()) return FailCommand(absl::InvalidArgumentError("--inputs: give at least one file or directory"));
  if (out.empty()) return FailCommand(absl::InvalidArgumentError("--out: give the token file to write"));
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok = MakeTokenizer(tokenizer);
  if (!tok.ok()) return FailCommand(tok.status());
  TextCorpusOptions opts;
  opts.split_on_blank_lines = split_blank_lines;
  opts.max_doc_bytes = max_doc_bytes;
  TextCorpusStats stats;
  absl::Status st = BuildTokenFileFromText(inputs, **tok, out, opts, &stats);
  if (!st.ok()) return FailCommand(st);
  std::printf("%s\nwrote %s\n", stats.Summary().c_str(), out.c_str());
  return 0;
}

int RunDataEncodeCommand(const std::string& tokenizer) {
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok = MakeTokenizer(tokenizer);
  if (!tok.ok()) return FailCommand(tok.status());
  std::string line, out;
  auto emit = [&] {
    out.clear();
    for (int32_t id : (*tok)->Encode(line)) {
      if (!out.empty()) out.push_back(' ');
      out += std::to_string(id);
    }
    out.push_back('\n');
    std::fwrite(out.data(), 1, out.size(), stdout);
  };
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), stdin)) > 0) {
    for (size_t i = 0; i < n; ++i) {
      if (buf[i] != '\n') {
        line.push_back(buf[i]);
        continue;
      }
      emit();
      line.clear();
    }
  }
  if (!line.empty()) emit();
  if (std::ferror(stdin)) return FailCommand(absl::DataLossError("error reading stdin"));
  return std::fflush(stdout) == 0 ? 0 : FailCommand(absl::DataLossError("error writing stdout"));
}

int RunAnalyzePosfreqCommand(const std::string& data, int64_t seq_len, int64_t rows, double min_pairs,
                             const std::string& png, const std::string& json_out) {
  if (data.empty()) return FailCommand(absl::InvalidArgumentError("--data: give the token file to analyze"));
  absl::StatusOr<TokenFileReader> tokens = TokenFileReader::Open(data);
  if (!tokens.ok()) return FailCommand(tokens.status());
  PosfreqOptions opts;
  opts.seq_len = seq_len;
  opts.rows = rows;
  opts.k = min_pairs;
  absl::StatusOr<PosfreqReport> report = AnalyzePositionFrequency(*tokens, opts);
  if (!report.ok()) return FailCommand(report.status());
  std::printf("%s", FormatPosfreqTable(*report).c_str());
  if (!json_out.empty()) {
    std::ofstream f(json_out, std::ios::binary | std::ios::trunc);
    f << PosfreqReportToJson(*report).dump(1) << "\n";
    f.close();
    if (!f) return FailCommand(absl::InternalError("writing " + json_out + ": cannot write the JSON report"));
    std::printf("wrote %s\n", json_out.c_str());
  }
  if (!png.empty()) {
    // f(i)/Σf of the three cases on a log axis (the STRING paper's Figure 1),
    // with the L/2 and 3L/4 boundaries of the printed shares marked.
    const int64_t L = report->seq_len;
    LinePlotOptions po;
    po.width = 1000;
    po.height = 620;
    po.log_y = true;
    po.title = absl::StrFormat("Position frequency at L = %d: %s", L, data.substr(data.find_last_of('/') + 1));
    po.x_label = absl::StrFormat("relative position i (%d rows of %d tokens per case)", report->rows, L);
    po.y_label = "f(i) / sum f  (log scale)";
    po.x_min = 0;
    po.x_max = static_cast<double>(L);
    for (int k = 0; k <= 8; ++k) po.x_ticks.push_back(static_cast<double>(k * L) / 8);
    po.legend_corner = LegendCorner::kBottomLeft;
    LinePlot plot(po);
    std::vector<double> x(L);
    for (int64_t i = 0; i < L; ++i) x[i] = static_cast<double>(i);
    const char* const kLabels[] = {"(a) natural", "(b) uniform", "(c) concatenated"};
    for (size_t c = 0; c < report->cases.size(); ++c) {
      const PosfreqCase& pc = report->cases[c];
      plot.AddSeries(absl::StrFormat("%s: %.1f%% of pairs at i<=%d, %.2f%% at i>=%d", c < 3 ? kLabels[c] : pc.name,
                                     100 * pc.summary.share_le_half, PosfreqLowThreshold(L),
                                     100 * pc.summary.share_ge_three_quarters, PosfreqHighThreshold(L)),
                     x, NormalizedCounts(pc));
    }
    plot.AddMarker(static_cast<double>(PosfreqLowThreshold(L)), absl::StrCat("L/2 = ", PosfreqLowThreshold(L)));
    plot.AddMarker(static_cast<double>(PosfreqHighThreshold(L)), absl::StrCat("3L/4 = ", PosfreqHighThreshold(L)));
    absl::Status st = plot.WritePng(png);
    if (!st.ok()) return FailCommand(st);
    std::printf("wrote %s\n", png.c_str());
  }
  return 0;
}

int RunDataCorpusCommand(const std::string& out, const std::string& brown_dir, int threads) {
  if (out.empty()) return FailCommand(absl::InvalidArgumentError("--out: give the corpus directory to write"));
  CorpusBuildOptions o;
  o.out_dir = out;
  o.brown_dir = brown_dir;
  o.threads = threads;
  // Progress on stderr, one Progress per stage ("corpus: man pages 120/480 pages | rate | ETA").
  std::optional<Progress> progress;
  std::string stage_now;
  o.progress = [&](const std::string& stage, int64_t done, int64_t total) {
    if (stage != stage_now || !progress) {
      progress.reset();
      stage_now = stage;
      progress.emplace("corpus: " + stage, total, stage == "shards" ? "docs" : "pages", stderr);
    }
    progress->Tick(done);
  };
  absl::StatusOr<CorpusBuildSummary> s = BuildDefaultCorpus(o);
  progress.reset();
  if (!s.ok()) return FailCommand(s.status());
  std::printf("%s", s->ConsoleSummary(out).c_str());  // the full summary is out/corpus.json
  return 0;
}

int RunDataTokenizeCommand(const std::vector<std::string>& inputs, const std::string& out,
                           const std::string& tokenizer, int threads, const std::vector<std::string>& exclude_sets,
                           const std::vector<std::string>& include_sets, int64_t max_line_bytes) {
  if (inputs.empty()) return FailCommand(absl::InvalidArgumentError("--input: give shard files or directories"));
  if (out.empty()) return FailCommand(absl::InvalidArgumentError("--out: give the output directory"));
  TokenizeShardsOptions o;
  o.inputs = inputs;
  o.out_dir = out;
  o.tokenizer = tokenizer;
  o.threads = threads;
  o.reader.exclude_sets = exclude_sets;
  o.reader.include_sets = include_sets;
  o.reader.max_line_bytes = max_line_bytes;
  absl::StatusOr<TokenizeShardsResult> r = TokenizeShards(o);
  if (!r.ok()) return FailCommand(r.status());
  LOG(INFO) << "tokenize: " << r->totals.Summary();
  const nlohmann::json j = {{"shards", r->shards.size()}, {"resumed", r->resumed},   {"docs", r->docs},
                            {"tokens", r->tokens},        {"seconds", r->seconds},   {"manifest", r->manifest_path},
                            {"problems", r->totals.ToJson()["errors"]},            {"filtered", r->totals.filtered}};
  std::printf("%s\n", j.dump().c_str());
  return 0;
}

int RunDataMergeCommand(const std::vector<std::string>& inputs, const std::string& out) {
  if (inputs.empty()) return FailCommand(absl::InvalidArgumentError("--input: give token files or directories"));
  if (out.empty()) return FailCommand(absl::InvalidArgumentError("--out: give the token file to write"));
  absl::StatusOr<TokenDataset> d = TokenDataset::Open(inputs);
  if (!d.ok()) return FailCommand(d.status());
  absl::Status st = WriteMergedTokenFile(*d, out);
  if (!st.ok()) return FailCommand(st);
  std::printf("merged %d token files: %lld documents, %lld tokens -> %s\n", d->n_files(),
              static_cast<long long>(d->n_docs()), static_cast<long long>(d->n_tokens()), out.c_str());
  return 0;
}

int RunProbeCommand(const ProbeCommandArgs& a) {
  absl::StatusOr<LoadedCheckpoint> loaded = LoadCheckpointForEval(a.checkpoint, a.data);
  if (!loaded.ok()) return FailCommand(loaded.status());
  const TrainConfig& config = loaded->config;
  ProbeSettings s;
  s.min_len = a.min_len;
  s.max_len = a.max_len > 0 ? a.max_len : 2 * int64_t{config.data().seq_len()};
  s.len_step = a.len_step;
  s.trials = a.trials;
  s.needles = a.needles;
  s.depth_bins = a.depth_bins;
  s.threshold = a.threshold;
  s.seed = a.seed;
  s.decode = !a.answer_loss_only;
  absl::StatusOr<NeedleFormat> format = NeedleFormatByName(a.format, "--format");
  if (!format.ok()) return FailCommand(format.status());
  s.format = *format;
  if (absl::Status st = ValidateProbeSettings(s, "--"); !st.ok()) return FailCommand(st);
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok = MakeTokenizer(config.data().tokenizer());
  if (!tok.ok()) return FailCommand(tok.status());
  std::vector<uint32_t> docs = SplitDocuments(*loaded->tokens, config.data().eval_fraction(), /*eval_split=*/true);
  if (docs.empty())
    return FailCommand(absl::FailedPreconditionError(
        absl::StrCat(config.data().path(), ": the eval split (data.eval_fraction ", config.data().eval_fraction(),
                     ") has no document to cut haystacks from")));
  HaystackSource haystack(loaded->tokens.get(), std::move(docs), tok->get());
  EngineOptions engine;
  engine.string = a.string;
  if (engine.string.enabled && engine.string.s == 0) engine.string.s = config.data().seq_len() / 3;
  absl::StatusOr<std::unique_ptr<TransformerProbeModel>> model = TransformerProbeModel::Create(loaded->model.get(), engine);
  if (!model.ok()) return FailCommand(model.status());
  std::printf("longctx probe: %s | %d-needle '%s' NIAH | lengths %lld..%lld step %lld | %d trials each | "
              "haystacks from %lld eval documents%s\n",
              a.checkpoint.c_str(), s.needles, s.format.name.c_str(), static_cast<long long>(s.min_len),
              static_cast<long long>(s.max_len), static_cast<long long>(s.len_step), s.trials,
              static_cast<long long>(haystack.num_docs()),
              engine.string.enabled ? absl::StrFormat(" | STRING S=%d W=%d%s", engine.string.s, engine.string.w,
                                                      engine.string.rope_scale ? " rope_scale" : "").c_str()
                                    : "");
  // As the trainer's probe ran (0: the run's count).
  ScopedBackendThreads probe_threads(loaded->backend.get(), config.probe_threads());
  ProbeRunOptions o;
  o.keep_trials = true;
  // Each length's line ends with the elapsed time and an ETA: the lengths left at
  // this run's seconds per prompt token so far (a trial's cost grows with its length).
  const auto probe_start = std::chrono::steady_clock::now();
  int64_t lengths_done = 0, lengths_left = 0;
  for (int64_t L : ProbeLengths(s)) lengths_left += L;
  auto timing = [&]() {
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - probe_start).count();
    const std::string eta = lengths_left == 0 ? "done" : FormatDuration(secs / lengths_done * lengths_left);
    return absl::StrFormat(" | %s elapsed | ETA %s", FormatDuration(secs), eta);
  };
  o.on_length = [&](const ProbeLengthResult& l) {
    lengths_done += l.length;
    lengths_left -= l.length;
    if (!l.tested) {
      std::printf("length %6lld | skipped: shorter than the format's fixed parts\n", static_cast<long long>(l.length));
    } else if (!s.decode) {
      std::printf("length %6lld | answer loss %.4f | %d trials%s\n", static_cast<long long>(l.length), l.answer_loss,
                  l.trials, timing().c_str());
    } else {
      std::printf("length %6lld | pass %.3f | needles %.3f | answer loss %.4f | %d trials%s\n",
                  static_cast<long long>(l.length), l.pass_rate, l.needle_accuracy, l.answer_loss, l.trials,
                  timing().c_str());
    }
    std::fflush(stdout);
  };
  absl::StatusOr<ProbeResult> r = RunProbe(s, haystack, **model, o);
  if (!r.ok()) return FailCommand(r.status());
  if (!a.json_out.empty()) {
    if (absl::Status st = WriteProbeJson(*r, a.json_out); !st.ok()) return FailCommand(st);
    std::printf("wrote %s\n", a.json_out.c_str());
  }
  if (!a.png.empty() && s.decode) {
    const std::string title = absl::StrFormat("%s: %d-needle NIAH, effective length %d", loaded->dims.name,
                                              s.needles, r->effective_length);
    if (absl::Status st = WriteProbeHeatmap(*r, title, a.png); !st.ok()) return FailCommand(st);
    std::printf("wrote %s\n", a.png.c_str());
  }
  absl::StatusOr<nlohmann::json> state = LoadTrainerState(a.checkpoint);
  nlohmann::json j = ProbeMetricsEvent(*r, state.ok() ? state->value("step", int64_t{0}) : 0);
  j["checkpoint"] = a.checkpoint;
  if (engine.string.enabled)
    j["string"] = {{"s", engine.string.s}, {"w", engine.string.w}, {"rope_scale", engine.string.rope_scale}};
  std::printf("%s\n", j.dump().c_str());
  return 0;
}

}  // namespace longctx
