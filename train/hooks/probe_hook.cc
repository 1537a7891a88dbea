// Why: see probe_hook.h.
#include "train/hooks/probe_hook.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "train/setup/niah_probe_config.h"
#include "train/probe/niah_probe_model.h"
#include "train/probe/niah_probe_report.h"
#include "train/probe/teacher_forced_recall.h"

namespace longctx {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

}  // namespace

absl::StatusOr<std::unique_ptr<ProbeHook>> ProbeHook::Create(const TrainConfig& config, const TokenDataset* tokens,
                                                             const Tokenizer* tokenizer, Transformer* model) {
  absl::StatusOr<ProbeSettings> ps = ProbeSettingsFromConfig(config);
  if (!ps.ok()) return ps.status();
  std::vector<uint32_t> docs = SplitDocuments(*tokens, config.data().eval_fraction(), /*eval_split=*/true);
  if (docs.empty())
    return absl::FailedPreconditionError(absl::StrCat(
        "probe_every: the eval split of ", config.data().path(), " is empty (data.eval_fraction ",
        config.data().eval_fraction(), "); the probe cuts its haystacks from eval documents"));
  std::unique_ptr<ProbeHook> h(new ProbeHook());
  h->settings_ = *ps;
  h->haystack_ = std::make_unique<HaystackSource>(tokens, std::move(docs), tokenizer);
  // Fail now, not at the first probe, when no trial can be built.
  const int64_t fixed = NeedleFixedTokens(ps->format, ps->needles, *tokenizer);
  int64_t first = -1;
  for (int64_t L : ProbeLengths(*ps))
    if (first < 0 && L >= fixed) first = L;
  if (first < 0)
    return absl::InvalidArgumentError(absl::StrCat("probe_max_len: ", ps->max_len, " is shorter than the ", fixed,
                                                   " tokens the '", ps->format.name, "' format takes with ",
                                                   ps->needles, " needles"));
  absl::StatusOr<NeedleSample> trial = MakeProbeTrial(*ps, *h->haystack_, first, 0);
  if (!trial.ok()) return absl::Status(trial.status().code(), absl::StrCat("probe: ", trial.status().message()));
  absl::StatusOr<std::unique_ptr<TransformerProbeModel>> pm = TransformerProbeModel::Create(model);
  if (!pm.ok()) return pm.status();
  h->model_ = std::move(*pm);
  return h;
}

absl::Status ProbeHook::OnRunStart(HookContext& ctx) {
  const ProbeSettings& p = settings_;
  const size_t lengths = ProbeLengths(p).size();
  std::printf("probe every %d steps: %d-needle '%s' NIAH at %lld..%lld step %lld, %d trials x %zu lengths = %zu %s\n",
              ctx.config->probe_every(), p.needles, p.format.name.c_str(), static_cast<long long>(p.min_len),
              static_cast<long long>(p.max_len), static_cast<long long>(p.len_step), p.trials, lengths,
              lengths * static_cast<size_t>(p.trials), p.decode ? "greedy decodes" : "answer-loss passes");
  if (p.teacher_forced)
    std::printf("probe teacher-forced recall: %s needles x %zu lengths x %d depths x %d repeats, one forward pass each\n",
                absl::StrJoin(p.tf_needles, ",").c_str(), lengths, p.depth_bins, p.tf_trials);
  return absl::OkStatus();
}

absl::Status ProbeHook::OnStepEnd(HookContext& ctx, const StepEvent& e) {
  if (e.result.step % ctx.config->probe_every() != 0) return absl::OkStatus();
  const auto start = Clock::now();
  absl::Status st = Probe(ctx, e.result.step);
  if (!st.ok()) return st;
  const double s = Seconds(start, Clock::now());
  ctx.excluded_seconds += s;  // tokens/s counts training only
  seconds_ += s;
  ++probes_run_;
  return absl::OkStatus();
}

absl::Status ProbeHook::Probe(HookContext& ctx, int64_t step) {
  absl::StatusOr<ProbeResult> r;
  {
    ScopedBackendThreads threads(ctx.backend, ctx.config->probe_threads());
    r = RunProbe(settings_, *haystack_, *model_, {.keep_trials = true});
    if (r.ok()) {
      absl::Status st = AddTeacherForcedRecall(*haystack_, *model_, &*r);
      if (!st.ok()) r = st;
    }
  }
  if (!r.ok()) return absl::Status(r.status().code(), absl::StrCat("step ", step, ": ", r.status().message()));
  recall_seconds_ += r->recall_seconds;
  const std::string dir = ctx.config->out_dir() + "/probe";
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::UnavailableError(absl::StrCat("probe: cannot create ", dir, ": ", ec.message()));
  const std::string base = absl::StrFormat("%s/step-%08d", dir, step);
  absl::Status st = WriteProbeJson(*r, base + ".json");
  if (st.ok() && r->settings.decode)
    st = WriteProbeHeatmap(*r,
                           absl::StrFormat("%s: %d-needle NIAH at step %d, effective length %d", ctx.dims->name,
                                           r->settings.needles, step, r->effective_length),
                           base + ".png");
  if (st.ok()) st = ctx.metrics->Write(ProbeMetricsEvent(*r, step));
  if (!st.ok()) return st;
  std::printf("probe  step %lld | %s | %s.%s\n", static_cast<long long>(step), ProbeSummaryLine(*r).c_str(),
              base.c_str(), r->settings.decode ? "png" : "json");
  std::fflush(stdout);
  return absl::OkStatus();
}

absl::Status ProbeHook::OnRunEnd(HookContext& ctx, const RunEndEvent&) {
  if (probes_run_ == 0) return absl::OkStatus();
  const double run = Seconds(ctx.run_start, Clock::now());
  std::printf("probe  %d probes took %.1f s, %.1f%% of this run's %.1f s", probes_run_, seconds_,
              100.0 * seconds_ / std::max(1e-9, run), run);
  if (settings_.teacher_forced)
    std::printf(" (teacher-forced recall %.1f s, %.1f%%)", recall_seconds_, 100.0 * recall_seconds_ / std::max(1e-9, run));
  std::printf("\n");
  return absl::OkStatus();
}

}  // namespace longctx
