// Why: see niah_probe_config.h.
#include "train/setup/niah_probe_config.h"

#include "absl/strings/str_cat.h"
#include "data/make_tokenizer.h"
#include "train/probe/teacher_forced_recall.h"

namespace longctx {

absl::StatusOr<ProbeSettings> ProbeSettingsFromConfig(const TrainConfig& c) {
  if (c.probe_every() < 0)
    return absl::InvalidArgumentError(absl::StrCat("probe_every: must be >= 0 (got ", c.probe_every(), ")"));
  if (c.probe_threads() < 0)
    return absl::InvalidArgumentError(absl::StrCat("probe_threads: must be >= 0 (got ", c.probe_threads(), ")"));
  ProbeSettings s;
  s.min_len = c.probe_min_len();
  s.max_len = c.probe_max_len() > 0 ? c.probe_max_len() : 2 * int64_t{c.data().seq_len()};
  s.len_step = c.probe_len_step();
  s.trials = c.probe_trials();
  s.needles = c.probe_needles();
  s.depth_bins = c.probe_depth_bins();
  s.threshold = c.probe_threshold();
  s.seed = c.probe_seed();
  s.decode = c.probe_decode();
  s.teacher_forced = c.probe_teacher_forced();
  s.tf_trials = c.probe_tf_trials();
  absl::StatusOr<std::vector<int>> tf_needles = ParseNeedleCounts(c.probe_tf_needles(), "probe_tf_needles");
  if (!tf_needles.ok()) return tf_needles.status();
  s.tf_needles = *tf_needles;
  absl::StatusOr<NeedleFormat> f = NeedleFormatByName(c.probe_format(), "probe_format");
  if (!f.ok()) return f.status();
  s.format = *f;
  absl::Status st = ValidateProbeSettings(s, "probe_");
  if (!st.ok()) return st;
  return s;
}

absl::StatusOr<std::unique_ptr<RetrievalMixer>> MakeRetrievalMixer(const TrainConfig& c, const DocumentSource* tokens,
                                                                   const Tokenizer* tokenizer) {
  const DataConfig& d = c.data();
  if (d.retrieval_fraction() == 0) return std::unique_ptr<RetrievalMixer>();
  RetrievalMixOptions o;
  o.field = "data.retrieval";
  o.fraction = d.retrieval_fraction();
  o.seed = d.retrieval_seed();
  absl::StatusOr<NeedleFormat> f = NeedleFormatByName(d.retrieval_format(), "data.retrieval_format");
  if (!f.ok()) return f.status();
  o.format = *f;
  if (d.retrieval_loss() == "answer") {
    o.loss = RetrievalLoss::kAnswer;
  } else if (d.retrieval_loss() == "all") {
    o.loss = RetrievalLoss::kAll;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("data.retrieval_loss: must be \"answer\" or \"all\" (got \"", d.retrieval_loss(), "\")"));
  }
  if (d.retrieval_needles() < 1)
    return absl::InvalidArgumentError(absl::StrCat("data.retrieval_needles: must be >= 1 (got ", d.retrieval_needles(), ")"));
  absl::StatusOr<std::vector<RetrievalStage>> stages =
      ParseRetrievalCurriculum(d.retrieval_curriculum(), d.retrieval_needles(), "data.retrieval_curriculum");
  if (!stages.ok()) return stages.status();
  o.stages = *stages;
  return RetrievalMixer::Create(o, tokens, SplitDocuments(*tokens, d.eval_fraction(), /*eval_split=*/false),
                                tokenizer, d.seq_len());
}

absl::Status MixRetrievalRows(const TrainConfig& config, const DocumentSource* tokens, int64_t step,
                              uint64_t first_row, PackedBatch* batch) {
  if (config.data().retrieval_fraction() == 0) return absl::OkStatus();
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok = MakeTokenizer(config.data().tokenizer());
  if (!tok.ok()) return absl::InvalidArgumentError(absl::StrCat("data.tokenizer: ", tok.status().message()));
  absl::StatusOr<std::unique_ptr<RetrievalMixer>> mixer = MakeRetrievalMixer(config, tokens, tok->get());
  if (!mixer.ok()) return mixer.status();
  return (*mixer)->Apply(step, first_row, batch);
}

}  // namespace longctx
