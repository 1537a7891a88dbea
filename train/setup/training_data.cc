// Why: see training_data.h.
#include "train/setup/training_data.h"

#include <algorithm>
#include <cstdio>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/log.h"
#include "data/make_tokenizer.h"
#include "train/setup/config_options.h"
#include "train/setup/niah_probe_config.h"
#include "train/setup/sft_config.h"

namespace longctx {

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

namespace {

// SFT (data.sft): the examples, checked against the run's tokenizer and
// model, and the length schedule over them.
absl::Status OpenSftInputs(const TrainConfig& config, const ModelDims& dims, int rank, TrainingInputs* in) {
  if (in->retrieval != nullptr)
    return absl::InvalidArgumentError(
        "data.retrieval_fraction: retrieval rows are not mixed into SFT steps (data.sft.path is set); set it to 0");
  absl::StatusOr<SftDataset> sft = OpenSftData(config);
  if (!sft.ok()) return sft.status();
  if (sft->tokenizer_name() != in->tokenizer->name())
    return absl::InvalidArgumentError(absl::StrCat("data.sft.path: ", SftDataFile(config), " was tokenized with '",
                                                   sft->tokenizer_name(), "', this run's data.tokenizer is '",
                                                   in->tokenizer->name(), "'"));
  if (sft->vocab_size() > dims.vocab)
    return absl::InvalidArgumentError(absl::StrCat("model.vocab_size: ", dims.vocab, " < vocab of ",
                                                   SftDataFile(config), " (", sft->vocab_size(), ")"));
  in->sft_data = std::make_unique<SftDataset>(std::move(*sft));
  absl::StatusOr<SftScheduleOptions> so = SftScheduleOptionsFor(config, in->tokenizer->pad_id());
  if (!so.ok()) return so.status();
  absl::StatusOr<SftSchedule> schedule = SftSchedule::Create(in->sft_data.get(), *so);
  if (!schedule.ok())
    return absl::Status(schedule.status().code(), absl::StrCat("data.sft: ", schedule.status().message()));
  in->sft_schedule = std::make_unique<SftSchedule>(std::move(*schedule));
  if (in->sft_schedule->dropped_examples() > 0 && rank == 0)
    std::printf("data.sft: dropped %lld of %lld examples longer than %d tokens (data.sft.long_examples: drop)\n",
                static_cast<long long>(in->sft_schedule->dropped_examples()),
                static_cast<long long>(in->sft_data->n_examples()), so->seq_lens.back());
  in->longest_row = std::max<int64_t>(in->longest_row, so->seq_lens.back());
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TrainingInputs> OpenTrainingInputs(const TrainConfig& config, const ModelDims& dims, int rank) {
  TrainingInputs in;
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok = MakeTokenizer(config.data().tokenizer());
  if (!tok.ok()) return absl::InvalidArgumentError(absl::StrCat("data.tokenizer: ", tok.status().message()));
  in.tokenizer = std::move(*tok);
  if (in.tokenizer->vocab_size() > dims.vocab)
    return absl::InvalidArgumentError(absl::StrCat("model.vocab_size: ", dims.vocab, " is smaller than tokenizer '",
                                                   in.tokenizer->name(), "' (", in.tokenizer->vocab_size(), " ids)"));
  if (IsSftConfig(config) && config.data().path().empty()) {
    // SFT trains from data.sft.path alone; a pretraining corpus is only read
    // to evaluate on it or to draw the probe's haystacks from it.
    if (config.data().retrieval_fraction() > 0)
      return absl::InvalidArgumentError(
          "data.retrieval_fraction: retrieval rows are not mixed into SFT steps (data.sft.path is set); set it to 0");
    if (config.probe_every() != 0)
      return absl::InvalidArgumentError(absl::StrCat(
          "probe_every: ", config.probe_every(),
          " draws the probe's haystacks from data.path, which is empty; set data.path to a token file or probe_every=0"));
    if (config.loss_by_position_every() != 0)
      return absl::InvalidArgumentError(absl::StrCat(
          "loss_by_position_every: ", config.loss_by_position_every(),
          " reads eval documents of data.path, which is empty; set data.path to a token file or "
          "loss_by_position_every=0"));
    if (config.eval_every() != 0)
      return absl::InvalidArgumentError(absl::StrCat(
          "eval_every: ", config.eval_every(),
          " evaluates on data.path, which is empty; set data.path to a token file or eval_every=0"));
    if (rank == 0) std::printf("data.path is empty: SFT from data.sft.path alone, no eval on pretraining text\n");
    in.has_eval = false;
    in.longest_row = config.data().seq_len();
    if (absl::Status st = OpenSftInputs(config, dims, rank, &in); !st.ok()) return st;
    return in;
  }
  absl::StatusOr<std::unique_ptr<TokenDataset>> tokens = OpenTrainingData(config);
  if (!tokens.ok()) return tokens.status();
  in.tokens = std::move(*tokens);
  if (in.tokens->vocab_size() > dims.vocab)
    return absl::InvalidArgumentError(absl::StrCat("model.vocab_size: ", dims.vocab, " < vocab of ",
                                                   config.data().path(), " (", in.tokens->vocab_size(), ")"));
  absl::StatusOr<std::unique_ptr<Packer>> packer = MakeTrainPacker(config, in.tokens.get());
  if (!packer.ok()) return packer.status();
  in.train_packer = std::move(*packer);
  absl::StatusOr<std::unique_ptr<RetrievalMixer>> mixer =
      MakeRetrievalMixer(config, in.tokens.get(), in.tokenizer.get());
  if (!mixer.ok()) return mixer.status();
  in.retrieval = std::move(*mixer);
  if (!MakeEvalPacker(config, in.tokens.get()).ok()) {
    LOG(WARNING) << "data.eval_fraction " << config.data().eval_fraction() << " leaves no eval documents in "
                 << config.data().path() << "; evaluation is skipped";
    in.has_eval = false;
  }
  in.longest_row = config.data().seq_len();
  if (IsSftConfig(config))
    if (absl::Status st = OpenSftInputs(config, dims, rank, &in); !st.ok()) return st;
  return in;
}

}  // namespace longctx
