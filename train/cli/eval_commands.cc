// Why: the commands that use a trained checkpoint as a model — `longctx eval`
// (its loss), `longctx generate` (a continuation) and `longctx probe` (its
// NIAH effective length) — each body beside the flags it is registered with
// (command_table.h). All three load the checkpoint the same way
// (train/setup/loaded_checkpoint.h) and take the same STRING flags; generate's
// and probe's `--seed` are their own sampling / trial seeds, not TrainConfig's.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/command_status.h"
#include "data/make_tokenizer.h"
#include "data/packer.h"
#include "data/retrieval_task.h"
#include "data/token_dataset.h"
#include "data/tokenizer.h"
#include "kernels/backend.h"
#include "model/inference.h"
#include "model/layer_attention.h"
#include "model/sampling.h"
#include "model/transformer.h"
#include "train/checkpoint/checkpoint.h"
#include "train/cli/command_table.h"
#include "train/device_batch.h"
#include "train/evaluate.h"
#include "train/probe/niah_probe.h"
#include "train/probe/niah_probe_model.h"
#include "train/probe/loss_by_position_probe.h"
#include "train/probe/niah_probe_report.h"
#include "train/probe/teacher_forced_recall.h"
#include "train/report/run_plots.h"
#include "train/report/progress.h"
#include "train/setup/loaded_checkpoint.h"
#include "train/setup/niah_probe_config.h"
#include "train/setup/sft_config.h"
#include "train/setup/training_data.h"
#include "train/string_config.h"

namespace longctx::cli {
namespace {

// --string, --string_s, --string_w, --string_rope_scale (eval, generate, probe).
void AddStringFlags(CLI::App* app, StringOptions* s) {
  app->add_flag("--string", s->enabled, "STRING positions (inference only; model/layer_attention.h)");
  app->add_option("--string_s", s->s, "STRING shift S (0 = the run's data.seq_len / 3)");
  app->add_option("--string_w", s->w, "STRING local window W (distance d >= S becomes d - S + W)");
  app->add_flag("--string_rope_scale", s->rope_scale, "STRING's RoPE table scale 1 + 0.1 ln 2");
}

// `longctx eval --checkpoint DIR --data FILE [--batch=eval|last_train] [--eval_batches N]
//  [--string [--string_s N] [--string_w N] [--string_rope_scale]]`: with STRING (s 0 = the run's
// data.seq_len / 3) the loss is the forward with STRING positions (Transformer::SetStringOptions).
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

// `longctx eval --checkpoint DIR --loss_by_position [--max_len N] [--docs N] [--png F] [--string ...]`:
// the loss-by-position probe (train/probe/loss_by_position_probe.h) of a checkpoint on the eval split
// of its data; the metrics event as one JSON line (what the trainer's loss_by_position_every writes).
struct LossByPositionArgs {
  std::string checkpoint, data, png;
  int64_t max_len = 0;  // 0: the run's loss_by_position_max_len, or 4 x data.seq_len
  int docs = 0;         // 0: the run's loss_by_position_docs
  StringOptions string;
};

int RunLossByPositionCommand(const LossByPositionArgs& a) {
  absl::StatusOr<LoadedCheckpoint> loaded = LoadCheckpointForEval(a.checkpoint, a.data);
  if (!loaded.ok()) return FailCommand(loaded.status());
  const TrainConfig& config = loaded->config;
  absl::StatusOr<StringOptions> string_options = ResolveStringOptions(a.string, config);
  if (!string_options.ok()) return FailCommand(string_options.status());
  if (absl::Status st = loaded->model->SetStringOptions(*string_options); !st.ok()) return FailCommand(st);
  LossByPositionSettings s;
  s.train_len = config.data().seq_len();
  s.max_len = a.max_len > 0 ? a.max_len
                            : (config.loss_by_position_max_len() > 0 ? config.loss_by_position_max_len() : 4 * s.train_len);
  s.max_docs = a.docs > 0 ? a.docs : config.loss_by_position_docs();
  s.tokens_per_forward = std::max<int64_t>(s.max_len, int64_t{config.data().seq_len()} * config.data().batch_size());
  if (a.max_len < 0 || a.docs < 0)
    return FailCommand(absl::InvalidArgumentError(absl::StrCat("--max_len (", a.max_len, ") and --docs (", a.docs,
                                                               ") must be >= 0 (0 = the run's setting)")));
  if (absl::Status st = ValidateLossByPositionSettings(s, "--"); !st.ok()) return FailCommand(st);
  const std::vector<uint32_t> eval_docs =
      SplitDocuments(*loaded->tokens, config.data().eval_fraction(), /*eval_split=*/true);
  const std::vector<uint32_t> docs = LongDocuments(*loaded->tokens, eval_docs, s.train_len, s.max_docs);
  DeviceBatch device_batch(loaded->backend.get());
  absl::StatusOr<LossByPosition> r = RunLossByPosition(*loaded->model, device_batch, *loaded->tokens, docs, s);
  if (!r.ok()) return FailCommand(r.status());
  absl::StatusOr<nlohmann::json> state = LoadTrainerState(a.checkpoint);
  nlohmann::json j = LossByPositionEvent(*r, state.ok() ? state->value("step", int64_t{0}) : 0);
  j["checkpoint"] = a.checkpoint;
  if (string_options->enabled)
    j["string"] = {{"s", string_options->s}, {"w", string_options->w}, {"rope_scale", string_options->rope_scale}};
  if (!a.png.empty()) {
    absl::StatusOr<std::string> png = LossByPositionPlotPng(
        {&j}, absl::StrFormat("%s: loss by position, step %d%s", loaded->dims.name, j["step"].get<int64_t>(),
                              string_options->enabled ? " (STRING)" : ""));
    if (!png.ok()) return FailCommand(png.status());
    std::ofstream out(a.png, std::ios::binary);
    out.write(png->data(), static_cast<std::streamsize>(png->size()));
    if (!out) return FailCommand(absl::UnavailableError(absl::StrCat("cannot write ", a.png)));
  }
  std::printf("%s\n", j.dump().c_str());
  return 0;
}

void AddEval(CommandTable& table) {
  struct Args {
    std::string checkpoint, data, batch = "eval";
    int eval_batches = 0;
    StringOptions string;
    bool loss_by_position = false;
    LossByPositionArgs lbp;
  };
  auto a = std::make_shared<Args>();
  CLI::App* c = table.Add(
      {.path = "eval",
       .summary = "Mean loss of a checkpoint on the eval split or its last training batch (one JSON line)",
       .notes = "--loss_by_position: instead, the mean loss of long eval documents per position bucket\n"
                "(0-L/8, ..., L/2-L, L-2L, 2L-4L up to --max_len; L = the run's data.seq_len).",
       .run = [a](const std::vector<std::string>&) {
         if (a->loss_by_position) {
           a->lbp.checkpoint = a->checkpoint;
           a->lbp.data = a->data;
           a->lbp.string = a->string;
           return RunLossByPositionCommand(a->lbp);
         }
         if (a->lbp.max_len != 0 || a->lbp.docs != 0 || !a->lbp.png.empty())
           return FailCommand(absl::InvalidArgumentError("--max_len, --docs and --png need --loss_by_position"));
         return RunEvalCommand(a->checkpoint, a->data, a->batch, a->eval_batches, a->string);
       }});
  c->add_flag("--loss_by_position", a->loss_by_position, "mean loss per position bucket of long eval documents");
  c->add_option("--max_len", a->lbp.max_len, "--loss_by_position: positions probed (0 = the run's setting, 4 x seq_len)");
  c->add_option("--docs", a->lbp.docs, "--loss_by_position: documents longer than seq_len read (0 = the run's setting)");
  c->add_option("--png", a->lbp.png, "--loss_by_position: plot of the curve to write");
  c->add_option("--checkpoint", a->checkpoint, "checkpoint directory (runs/NAME/step-NNNNNNNN)");
  c->add_option("--data", a->data, "token file (default: the checkpoint's data.path)");
  c->add_option("--batch", a->batch, "'eval' (eval split) or 'last_train' (the last training batch)");
  c->add_option("--eval_batches", a->eval_batches, "batches of the eval split (0 = the config's eval_batches)");
  AddStringFlags(c, &a->string);
}

// `longctx generate --checkpoint DIR --prompt TEXT [--max_new_tokens 64] [--temperature 0] [--top_k 0]
//  [--seed 1] [--string [--string_s N] [--string_w N] [--string_rope_scale]] [--json]`: the smallest
// end-to-end use of a checkpoint as a language model. The prompt is encoded with the run's own
// tokenizer (data.tokenizer) and continued by KV-cache decoding (model/inference.h) with seeded
// sampling (model/sampling.h), optionally under STRING, stopping at max_new_tokens or the
// tokenizer's EOS; prints the continuation (--json: one JSON line with the ids too).
struct GenerateCommandArgs {
  std::string checkpoint, prompt;
  int max_new_tokens = 64;
  SamplingOptions sampling;
  StringOptions string;  // s 0 = the run's data.seq_len / 3
  bool json = false;
};

int RunGenerateCommand(const GenerateCommandArgs& a) {
  if (a.prompt.empty()) return FailCommand(absl::InvalidArgumentError("--prompt: give the text to continue"));
  if (a.max_new_tokens < 0)
    return FailCommand(
        absl::InvalidArgumentError(absl::StrCat("--max_new_tokens: must be >= 0 (got ", a.max_new_tokens, ")")));
  absl::Status st = ValidateSamplingOptions(a.sampling);
  if (!st.ok()) return FailCommand(absl::InvalidArgumentError(absl::StrCat("--", st.message())));

  absl::StatusOr<LoadedCheckpoint> loaded = LoadCheckpointForEval(a.checkpoint, "", CheckpointData::kSkip);
  if (!loaded.ok()) return FailCommand(loaded.status());
  const TrainConfig& config = loaded->config;
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok = MakeTokenizer(config.data().tokenizer());
  if (!tok.ok())
    return FailCommand(absl::Status(
        tok.status().code(),
        absl::StrCat(a.checkpoint, ": data.tokenizer '", config.data().tokenizer(), "': ", tok.status().message())));
  const std::vector<int32_t> prompt = (*tok)->Encode(a.prompt);
  if (prompt.empty()) return FailCommand(absl::InvalidArgumentError("--prompt: encodes to no tokens"));

  absl::StatusOr<StringOptions> string = ResolveStringOptions(a.string, config);
  if (!string.ok()) return FailCommand(string.status());
  EngineOptions eo;
  eo.string = *string;
  absl::StatusOr<std::unique_ptr<InferenceEngine>> engine = InferenceEngine::Create(loaded->model.get(), eo);
  if (!engine.ok()) return FailCommand(engine.status());

  absl::StatusOr<std::vector<float>> logits = (*engine)->Prefill(prompt);
  if (!logits.ok())
    return FailCommand(absl::InvalidArgumentError(absl::StrCat("--prompt: ", logits.status().message())));
  Sampler sampler(a.sampling);
  const int32_t eos = (*tok)->eos_id();
  std::vector<int32_t> out;
  bool stopped_at_eos = false;
  for (int i = 0; i < a.max_new_tokens; ++i) {
    const int32_t next = sampler.Next(*logits);
    if (next == eos) {
      stopped_at_eos = true;
      break;
    }
    out.push_back(next);
    if (i + 1 == a.max_new_tokens) break;
    logits = (*engine)->Decode(next);
    if (!logits.ok()) return FailCommand(logits.status());
  }
  const std::string text = (*tok)->Decode(out);
  if (a.json) {
    nlohmann::json j = {{"checkpoint", a.checkpoint},
                        {"prompt_tokens", prompt.size()},
                        {"tokens", out},
                        {"text", text},
                        {"stopped_at_eos", stopped_at_eos},
                        {"temperature", a.sampling.temperature},
                        {"top_k", a.sampling.top_k},
                        {"seed", a.sampling.seed}};
    if (string->enabled)
      j["string"] = {{"s", string->s}, {"w", string->w}, {"rope_scale", string->rope_scale}};
    // Byte-level continuations need not be valid UTF-8: replace, never throw.
    std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    std::fwrite(text.data(), 1, text.size(), stdout);  // may hold NUL bytes
    std::fputc('\n', stdout);
  }
  return std::fflush(stdout) == 0 ? 0 : FailCommand(absl::DataLossError("error writing stdout"));
}

void AddGenerate(CommandTable& table) {
  auto a = std::make_shared<GenerateCommandArgs>();
  CLI::App* c = table.Add(
      {.path = "generate",
       .summary = "Continue a prompt with a checkpoint's model and tokenizer (KV-cache decoding)",
       .run = [a](const std::vector<std::string>&) { return RunGenerateCommand(*a); }});
  c->add_option("--checkpoint", a->checkpoint, "checkpoint directory");
  c->add_option("--prompt", a->prompt, "the text to continue");
  c->add_option("--max_new_tokens", a->max_new_tokens, "tokens to generate at most (stops early at EOS)");
  c->add_option("--temperature", a->sampling.temperature, "sampling temperature (0 = greedy)");
  c->add_option("--top_k", a->sampling.top_k, "sample among the k most likely tokens (0 = all)");
  c->add_option("--seed", a->sampling.seed, "sampling seed");
  AddStringFlags(c, &a->string);
  c->add_flag("--json", a->json, "one JSON line with the ids too");
}

// `longctx probe --checkpoint DIR [--min_len 128] [--max_len N] [--len_step 128] [--trials N]
//  [--needles 4] [--depth_bins 10] [--threshold 0.5] [--seed S] [--format paper|compact]
//  [--json_out F] [--png F] [--data FILE]`: the NIAH effective-length probe
// (train/probe/niah_probe.h) on a checkpoint, haystacks from the eval split of its data.
// The member defaults are the flag defaults `longctx probe --help` shows.
struct ProbeCommandArgs {
  std::string checkpoint, data, json_out, png;
  int64_t min_len = 128, max_len = 0, len_step = 128;  // max_len 0: 2 x the run's data.seq_len
  int trials = 10, needles = 4, depth_bins = 10;
  double threshold = 0.5;
  uint64_t seed = 1;
  std::string format = "paper";
  bool answer_loss_only = false;  // no decoding: answer losses per length only
  bool teacher_forced = false;    // teacher-forced needle recall grid too
  std::string tf_needles = "1,4";
  int tf_trials = 1;
  // STRING for the greedy decoding (s 0 = the run's data.seq_len / 3).
  StringOptions string;
};

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
  s.teacher_forced = a.teacher_forced;
  s.tf_trials = a.tf_trials;
  absl::StatusOr<std::vector<int>> tf_needles = ParseNeedleCounts(a.tf_needles, "--tf_needles");
  if (!tf_needles.ok()) return FailCommand(tf_needles.status());
  s.tf_needles = *tf_needles;
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
      std::printf("length %6lld | pass %.3f [%.3f, %.3f]%s | needles %.3f | answer loss %.4f | %d trials%s\n",
                  static_cast<long long>(l.length), l.pass_rate, l.pass_low, l.pass_high,
                  l.pass_low < s.threshold && s.threshold <= l.pass_high ? " uncertain" : "", l.needle_accuracy,
                  l.answer_loss, l.trials, timing().c_str());
    }
    std::fflush(stdout);
  };
  absl::StatusOr<ProbeResult> r = RunProbe(s, haystack, **model, o);
  if (!r.ok()) return FailCommand(r.status());
  if (absl::Status st = AddTeacherForcedRecall(haystack, **model, &*r); !st.ok()) return FailCommand(st);
  std::printf("%s\n", ProbeSummaryLine(*r).c_str());
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

void AddProbe(CommandTable& table) {
  auto a = std::make_shared<ProbeCommandArgs>();
  CLI::App* c = table.Add(
      {.path = "probe",
       .summary = "The NIAH effective-length probe of the STRING paper on a checkpoint",
       .notes = "Haystacks come from the eval split of the run's data; writes per-(length, depth) accuracy JSON\n"
                "(--json_out) and a heatmap (--png).",
       .run = [a](const std::vector<std::string>&) { return RunProbeCommand(*a); }});
  c->add_option("--checkpoint", a->checkpoint, "checkpoint directory");
  c->add_option("--data", a->data, "token file (default: the checkpoint's data.path)");
  c->add_option("--min_len", a->min_len, "shortest test length (prompt tokens)");
  c->add_option("--max_len", a->max_len, "longest test length (0 = 2 x the run's data.seq_len)");
  c->add_option("--len_step", a->len_step, "test length step");
  c->add_option("--trials", a->trials, "trials per length");
  c->add_option("--needles", a->needles, "needles per trial (a trial passes when at least half come back)");
  c->add_option("--depth_bins", a->depth_bins, "needle-depth bins of the heatmap");
  c->add_option("--threshold", a->threshold, "a length fails when its pass rate is below this");
  c->add_option("--seed", a->seed, "trial seed (the trainer's probe_seed defaults to 1 too)");
  c->add_option("--format", a->format, "needle format, paper or compact");
  c->add_flag("--answer_loss_only", a->answer_loss_only, "no decoding, only the answer loss per length");
  c->add_flag("--teacher_forced", a->teacher_forced,
              "also the teacher-forced needle recall: answer-digit log-prob per length x depth, one forward pass "
              "per trial");
  c->add_option("--tf_needles", a->tf_needles, "needle counts of the teacher-forced recall, comma-separated");
  c->add_option("--tf_trials", a->tf_trials, "teacher-forced repeats per (length, depth cell)");
  c->add_option("--json_out", a->json_out, "JSON report to write");
  c->add_option("--png", a->png, "heatmap PNG to write");
  AddStringFlags(c, &a->string);
}

}  // namespace

void RegisterEvalCommands(CommandTable& table) {
  AddEval(table);
  AddGenerate(table);
  AddProbe(table);
}

}  // namespace longctx::cli
