// Why: see commands.h.
#include "train/commands.h"

#include <cstdio>
#include <fstream>
#include <memory>

#include <nlohmann/json.hpp>

#include "absl/strings/str_format.h"
#include "data/corpus_builder.h"
#include "data/posfreq_analysis.h"
#include "data/text_corpus.h"
#include "data/token_file.h"
#include "data/tokenizer.h"
#include "data/token_dataset.h"
#include "data/tokenize_shards.h"
#include "kernels/log.h"
#include "launch/communicator.h"
#include "model/config.h"
#include "model/plan.h"
#include "train/checkpoint.h"
#include "train/config_loader.h"
#include "train/device_batch.h"
#include "train/evaluate.h"
#include "train/png_plot.h"
#include "train/trainer.h"

namespace longctx {
namespace {

int Fail(const absl::Status& st) {
  std::fprintf(stderr, "longctx: error: %s\n", std::string(st.message()).c_str());
  return 1;
}

}  // namespace

int RunTrainCommand(const std::string& config_path, const std::vector<std::string>& overrides) {
  absl::StatusOr<TrainConfig> config = LoadTrainConfig(config_path, overrides);
  if (!config.ok()) return Fail(config.status());
  absl::StatusOr<std::unique_ptr<Trainer>> trainer = Trainer::Create(*config, MakeLocalCommunicator());
  if (!trainer.ok()) return Fail(trainer.status());
  absl::StatusOr<TrainSummary> s = (*trainer)->Run();
  if (!s.ok()) return Fail(s.status());
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
  return 0;
}

int RunEvalCommand(const std::string& checkpoint, const std::string& data, const std::string& batch,
                   int eval_batches) {
  if (checkpoint.empty()) return Fail(absl::InvalidArgumentError("--checkpoint is required"));
  absl::StatusOr<TrainConfig> config = LoadCheckpointConfig(checkpoint);
  if (!config.ok()) return Fail(config.status());
  if (!data.empty()) config->mutable_data()->set_path(data);
  absl::StatusOr<ModelDims> dims = ResolveModelConfig(config->model());
  if (!dims.ok()) return Fail(dims.status());
  SetComputeThreads(config->threads());  // the trainer's thread count: bitwise-equal sums
  absl::StatusOr<std::unique_ptr<TokenDataset>> tokens = OpenTrainingData(*config);
  if (!tokens.ok()) return Fail(tokens.status());
  absl::StatusOr<std::unique_ptr<Backend>> backend = MakeBackend(config->backend());
  if (!backend.ok()) return Fail(backend.status());
  Transformer model(*dims, backend->get(), DType::kF32);
  absl::Status st = LoadModelWeights(checkpoint, &model);
  if (!st.ok()) return Fail(st);
  DeviceBatch device_batch(backend->get());
  EvalResult result;
  if (batch == "last_train") {
    // Recompute the checkpoint_batch_loss the trainer recorded: the saved
    // weights on the first micro-batch of the last training step.
    absl::StatusOr<nlohmann::json> state = LoadTrainerState(checkpoint);
    if (!state.ok()) return Fail(state.status());
    if (!state->contains("last_batch_cursor"))
      return Fail(absl::DataLossError(checkpoint + ": trainer_state.json has no last_batch_cursor"));
    absl::StatusOr<std::unique_ptr<Packer>> packer = MakeTrainPacker(*config, tokens->get());
    if (!packer.ok()) return Fail(packer.status());
    absl::StatusOr<PackerCursor> cursor = PackerCursorFromJson(state->at("last_batch_cursor"));
    if (!cursor.ok()) return Fail(cursor.status());
    st = (*packer)->Seek(*cursor);
    if (!st.ok()) return Fail(st);
    absl::StatusOr<PackedBatch> b = (*packer)->Next();
    if (!b.ok()) return Fail(b.status());
    result = EvaluateBatch(model, *b, device_batch);
  } else if (batch == "eval") {
    absl::StatusOr<std::unique_ptr<Packer>> packer = MakeEvalPacker(*config, tokens->get());
    if (!packer.ok()) return Fail(packer.status());
    absl::StatusOr<EvalResult> r =
        EvaluateLoss(model, **packer, device_batch, eval_batches > 0 ? eval_batches : config->eval_batches());
    if (!r.ok()) return Fail(r.status());
    result = *r;
  } else {
    return Fail(absl::InvalidArgumentError("--batch must be 'eval' or 'last_train', got '" + batch + "'"));
  }
  std::printf("{\"loss\": %.17g, \"tokens\": %lld, \"batches\": %d, \"batch\": \"%s\", \"checkpoint\": \"%s\"}\n",
              result.mean(), static_cast<long long>(result.tokens), result.batches, batch.c_str(), checkpoint.c_str());
  return 0;
}

int RunPlanCommand(const std::string& config_path, const std::vector<std::string>& overrides, bool json) {
  absl::StatusOr<TrainConfig> config = LoadTrainConfig(config_path, overrides);
  if (!config.ok()) return Fail(config.status());
  absl::StatusOr<ModelDims> dims = ResolveModelConfig(config->model());
  if (!dims.ok()) return Fail(dims.status());
  PlanOptions o;
  o.batch = config->data().batch_size();
  o.seq_len = config->data().seq_len();
  o.grad_accum = config->grad_accum();
  Plan plan = MakePlan(*dims, o);
  if (json) {
    std::printf("%s\n", PlanToJson(plan).dump(2).c_str());
  } else {
    std::printf("%s", FormatPlan(plan).c_str());
  }
  return 0;
}

int RunDataBuildCommand(const std::vector<std::string>& inputs, const std::string& out, const std::string& tokenizer,
                        bool split_blank_lines, int64_t max_doc_bytes) {
  if (inputs.empty()) return Fail(absl::InvalidArgumentError("--inputs: give at least one file or directory"));
  if (out.empty()) return Fail(absl::InvalidArgumentError("--out: give the token file to write"));
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok = MakeTokenizer(tokenizer);
  if (!tok.ok()) return Fail(tok.status());
  TextCorpusOptions opts;
  opts.split_on_blank_lines = split_blank_lines;
  opts.max_doc_bytes = max_doc_bytes;
  TextCorpusStats stats;
  absl::Status st = BuildTokenFileFromText(inputs, **tok, out, opts, &stats);
  if (!st.ok()) return Fail(st);
  std::printf("%s\nwrote %s\n", stats.Summary().c_str(), out.c_str());
  return 0;
}

int RunDataEncodeCommand(const std::string& tokenizer) {
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok = MakeTokenizer(tokenizer);
  if (!tok.ok()) return Fail(tok.status());
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
  if (std::ferror(stdin)) return Fail(absl::DataLossError("error reading stdin"));
  return std::fflush(stdout) == 0 ? 0 : Fail(absl::DataLossError("error writing stdout"));
}

int RunAnalyzePosfreqCommand(const std::string& data, int64_t seq_len, int64_t rows, double min_pairs,
                             const std::string& png, const std::string& json_out) {
  if (data.empty()) return Fail(absl::InvalidArgumentError("--data: give the token file to analyze"));
  absl::StatusOr<TokenFileReader> tokens = TokenFileReader::Open(data);
  if (!tokens.ok()) return Fail(tokens.status());
  PosfreqOptions opts;
  opts.seq_len = seq_len;
  opts.rows = rows;
  opts.k = min_pairs;
  absl::StatusOr<PosfreqReport> report = AnalyzePositionFrequency(*tokens, opts);
  if (!report.ok()) return Fail(report.status());
  std::printf("%s", FormatPosfreqTable(*report).c_str());
  if (!json_out.empty()) {
    std::ofstream f(json_out, std::ios::binary | std::ios::trunc);
    f << PosfreqReportToJson(*report).dump(1) << "\n";
    f.close();
    if (!f) return Fail(absl::InternalError("writing " + json_out + ": cannot write the JSON report"));
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
    if (!st.ok()) return Fail(st);
    std::printf("wrote %s\n", png.c_str());
  }
  return 0;
}

int RunDataCorpusCommand(const std::string& out, const std::string& brown_dir, int threads) {
  if (out.empty()) return Fail(absl::InvalidArgumentError("--out: give the corpus directory to write"));
  CorpusBuildOptions o;
  o.out_dir = out;
  o.brown_dir = brown_dir;
  o.threads = threads;
  absl::StatusOr<CorpusBuildSummary> s = BuildDefaultCorpus(o);
  if (!s.ok()) return Fail(s.status());
  std::printf("%s\n", s->ToJson().dump().c_str());
  return 0;
}

int RunDataTokenizeCommand(const std::vector<std::string>& inputs, const std::string& out,
                           const std::string& tokenizer, int threads, const std::vector<std::string>& exclude_sets,
                           const std::vector<std::string>& include_sets, int64_t max_line_bytes) {
  if (inputs.empty()) return Fail(absl::InvalidArgumentError("--input: give shard files or directories"));
  if (out.empty()) return Fail(absl::InvalidArgumentError("--out: give the output directory"));
  TokenizeShardsOptions o;
  o.inputs = inputs;
  o.out_dir = out;
  o.tokenizer = tokenizer;
  o.threads = threads;
  o.reader.exclude_sets = exclude_sets;
  o.reader.include_sets = include_sets;
  o.reader.max_line_bytes = max_line_bytes;
  absl::StatusOr<TokenizeShardsResult> r = TokenizeShards(o);
  if (!r.ok()) return Fail(r.status());
  LOG(INFO) << "tokenize: " << r->totals.Summary();
  const nlohmann::json j = {{"shards", r->shards.size()}, {"resumed", r->resumed},   {"docs", r->docs},
                            {"tokens", r->tokens},        {"seconds", r->seconds},   {"manifest", r->manifest_path},
                            {"problems", r->totals.ToJson()["errors"]},            {"filtered", r->totals.filtered}};
  std::printf("%s\n", j.dump().c_str());
  return 0;
}

int RunDataMergeCommand(const std::vector<std::string>& inputs, const std::string& out) {
  if (inputs.empty()) return Fail(absl::InvalidArgumentError("--input: give token files or directories"));
  if (out.empty()) return Fail(absl::InvalidArgumentError("--out: give the token file to write"));
  absl::StatusOr<TokenDataset> d = TokenDataset::Open(inputs);
  if (!d.ok()) return Fail(d.status());
  absl::Status st = WriteMergedTokenFile(*d, out);
  if (!st.ok()) return Fail(st);
  std::printf("merged %d token files: %lld documents, %lld tokens -> %s\n", d->n_files(),
              static_cast<long long>(d->n_docs()), static_cast<long long>(d->n_tokens()), out.c_str());
  return 0;
}

}  // namespace longctx
