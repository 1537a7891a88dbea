// Why: see commands.h.
#include "train/commands.h"

#include <cstdio>
#include <memory>

#include <nlohmann/json.hpp>

#include "absl/strings/str_format.h"
#include "data/text_corpus.h"
#include "data/token_file.h"
#include "data/tokenizer.h"
#include "launch/communicator.h"
#include "model/config.h"
#include "model/plan.h"
#include "train/checkpoint.h"
#include "train/config_loader.h"
#include "train/device_batch.h"
#include "train/evaluate.h"
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
  absl::StatusOr<TokenFileReader> tokens = TokenFileReader::Open(config->data().path());
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
    absl::StatusOr<std::unique_ptr<Packer>> packer = MakeTrainPacker(*config, &*tokens);
    if (!packer.ok()) return Fail(packer.status());
    absl::StatusOr<PackerCursor> cursor = PackerCursorFromJson(state->at("last_batch_cursor"));
    if (!cursor.ok()) return Fail(cursor.status());
    st = (*packer)->Seek(*cursor);
    if (!st.ok()) return Fail(st);
    absl::StatusOr<PackedBatch> b = (*packer)->Next();
    if (!b.ok()) return Fail(b.status());
    result = EvaluateBatch(model, *b, device_batch);
  } else if (batch == "eval") {
    absl::StatusOr<std::unique_ptr<Packer>> packer = MakeEvalPacker(*config, &*tokens);
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

}  // namespace longctx
