// Why: see analyze_attention.h. Samples come from the eval split (the text the
// model never trained on), as the probe's do.
#include "train/analyze/analyze_attention.h"

#include <cmath>
#include <cstdio>
#include <fstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "data/make_tokenizer.h"
#include "data/retrieval_task.h"
#include "data/tokenizer.h"
#include "model/attention_analysis.h"
#include "model/inference.h"
#include "train/setup/loaded_checkpoint.h"
#include "train/report/progress.h"

namespace longctx {
namespace {

// Mean NLL (nats/token) of `answer` after `prompt`, from one prefill's logits.
absl::StatusOr<double> AnswerNll(InferenceEngine& engine, const std::vector<int32_t>& prompt,
                                 const std::vector<int32_t>& answer, int64_t vocab) {
  std::vector<int32_t> all = prompt;
  all.insert(all.end(), answer.begin(), answer.end());
  engine.Reset();
  std::vector<float> logits;
  absl::StatusOr<std::vector<float>> last = engine.Prefill(all, &logits);
  if (!last.ok()) return last.status();
  double nll = 0;
  for (size_t a = 0; a < answer.size(); ++a) {
    const float* row = logits.data() + (prompt.size() - 1 + a) * vocab;  // predicts all[prompt.size() + a]
    double mx = row[0];
    for (int64_t v = 1; v < vocab; ++v) mx = std::max<double>(mx, row[v]);
    double z = 0;
    for (int64_t v = 0; v < vocab; ++v) z += std::exp(row[v] - mx);
    nll += mx + std::log(z) - row[answer[a]];
  }
  return nll / static_cast<double>(answer.size());
}

}  // namespace

absl::StatusOr<std::vector<std::pair<int, int>>> ParseHeadList(const std::string& text) {
  std::vector<std::pair<int, int>> out;
  for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    std::vector<absl::string_view> lh = absl::StrSplit(item, ':');
    int l = 0, h = 0;
    if (lh.size() != 2 || !absl::SimpleAtoi(lh[0], &l) || !absl::SimpleAtoi(lh[1], &h) || l < 0 || h < 0)
      return absl::InvalidArgumentError(absl::StrCat("--ablate_heads: '", item, "' is not LAYER:HEAD"));
    out.emplace_back(l, h);
  }
  return out;
}

absl::StatusOr<nlohmann::json> AnalyzeAttention(const AnalyzeAttentionOptions& o) {
  if (o.samples < 1) return absl::InvalidArgumentError("--samples: must be >= 1");
  if (o.needles < 1) return absl::InvalidArgumentError("--needles: must be >= 1");
  if (!(o.depth >= 0 && o.depth < 1)) return absl::InvalidArgumentError("--depth: must be in [0, 1)");
  absl::StatusOr<LoadedCheckpoint> ck = LoadCheckpointForEval(o.checkpoint, o.data);
  if (!ck.ok()) return ck.status();
  const ModelDims& dims = ck->dims;
  for (const auto& [l, h] : o.ablate_heads)
    if (l >= dims.layers || h >= dims.heads)
      return absl::InvalidArgumentError(absl::StrCat("--ablate_heads: ", l, ":", h, " is outside ", dims.layers,
                                                     " layers x ", dims.heads, " heads"));
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok = MakeTokenizer(ck->config.data().tokenizer());
  if (!tok.ok()) return tok.status();
  absl::StatusOr<NeedleFormat> format =
      NeedleFormatByName(o.format.empty() ? ck->config.probe_format() : o.format, "--format");
  if (!format.ok()) return format.status();
  const int64_t length = o.length > 0 ? o.length : ck->config.data().seq_len();

  std::vector<uint32_t> docs = SplitDocuments(*ck->tokens, ck->config.data().eval_fraction(), /*eval_split=*/true);
  if (docs.empty()) docs = SplitDocuments(*ck->tokens, 0.0, /*eval_split=*/false);  // no held-out text: say so below
  const bool held_out = !SplitDocuments(*ck->tokens, ck->config.data().eval_fraction(), true).empty();
  HaystackSource haystack(ck->tokens.get(), docs, tok->get());

  EngineOptions eo;
  eo.prefill_chunk = 0;  // the whole prompt at once: one capture per layer
  absl::StatusOr<std::unique_ptr<InferenceEngine>> engine = InferenceEngine::Create(ck->model.get(), eo);
  if (!engine.ok()) return engine.status();
  std::unique_ptr<InferenceEngine> ablated;
  if (!o.ablate_heads.empty()) {
    EngineOptions ea = eo;
    ea.ablate_heads = o.ablate_heads;
    absl::StatusOr<std::unique_ptr<InferenceEngine>> e = InferenceEngine::Create(ck->model.get(), ea);
    if (!e.ok()) return e.status();
    ablated = std::move(*e);
  }

  std::vector<std::vector<LayerMass>> masses;
  std::vector<std::vector<HeadContribution>> contribs;
  double base_nll = 0, ablated_nll = 0;
  uint64_t seed = o.seed;
  int tried = 0;
  // Progress on stderr (stdout carries the summary and the JSON): a live line on
  // a terminal, otherwise a line at each quarter of the samples (Progress::Tick).
  Progress progress("analyze attention", o.samples, "samples", stderr);
  for (int sample = 0; sample < o.samples; ++sample) {
    if (sample > 0) progress.Tick(sample);
    // Draw until the first needle sits within ±0.05 of the requested depth.
    absl::StatusOr<NeedleSample> ns = absl::InternalError("no sample");
    for (;;) {
      if (++tried > 200 * o.samples)
        return absl::FailedPreconditionError(absl::StrCat("--depth ", o.depth, ": no sample within ±0.05 after ",
                                                          tried - 1, " draws (use fewer needles)"));
      ns = BuildNeedleSample(*format, o.needles, length, haystack, seed++);
      if (!ns.ok()) return ns.status();
      if (std::abs(ns->depths[0] - o.depth) <= 0.05) break;
    }
    std::vector<int32_t> tokens = ns->prompt;
    tokens.insert(tokens.end(), ns->answer.begin(), ns->answer.end());
    // Segments: begin = first 10 tokens; needle = the needle sentences; qc =
    // the question (after the last needle/haystack piece) and the answer.
    const int64_t T = static_cast<int64_t>(tokens.size());
    std::vector<Segment> labels(T, Segment::kContext);
    const std::vector<int32_t> question = (*tok)->Encode("\n" + format->question);
    for (int64_t t = static_cast<int64_t>(ns->prompt.size() - question.size()); t < T; ++t) labels[t] = Segment::kQc;
    for (size_t j = 0; j < ns->needle_offsets.size(); ++j) {
      const int64_t len = static_cast<int64_t>(
          (*tok)->Encode(" " + format->needle_before + ns->numbers[j] + format->needle_after).size());
      for (int64_t t = ns->needle_offsets[j]; t < ns->needle_offsets[j] + len && t < T; ++t) labels[t] = Segment::kNeedle;
    }
    for (int64_t t = 0; t < std::min<int64_t>(10, T); ++t) labels[t] = Segment::kBegin;

    std::vector<CapturedAttention> layers;
    (*engine)->set_capture_hook([&](const CapturedAttention& a, int64_t) { layers.push_back(a); });
    absl::StatusOr<double> nll = AnswerNll(**engine, ns->prompt, ns->answer, dims.vocab);
    (*engine)->set_capture_hook(nullptr);
    if (!nll.ok()) return nll.status();
    base_nll += *nll;
    if (static_cast<int>(layers.size()) != dims.layers)
      return absl::InternalError(absl::StrCat("capture: got ", layers.size(), " layers of ", dims.layers));
    masses.push_back(AttentionMass(layers, labels));
    contribs.push_back(RopePairContributions(layers, o.max_pairs, o.seed + sample));
    if (ablated) {
      absl::StatusOr<double> a = AnswerNll(*ablated, ns->prompt, ns->answer, dims.vocab);
      if (!a.ok()) return a.status();
      ablated_nll += *a;
    }
  }

  progress.Tick(o.samples);

  // Average over samples, layer by layer and head by head.
  std::vector<LayerMass> mass = masses[0];
  for (size_t l = 0; l < mass.size(); ++l) {
    for (int s = 0; s < kNumSegments; ++s) {
      double sum = 0;
      for (const auto& m : masses) sum += m[l].mass[s];
      mass[l].mass[s] = sum / static_cast<double>(masses.size());
    }
    double e = 0;
    for (const auto& m : masses) e += m[l].entropy;
    mass[l].entropy = e / static_cast<double>(masses.size());
  }
  std::vector<HeadContribution> heads = contribs[0];
  for (size_t h = 0; h < heads.size(); ++h) {
    double corr = 0;
    int64_t pairs = 0;
    for (auto& share : heads[h].share) share = 0;
    for (const auto& c : contribs) {
      corr += c[h].dominant_distance_corr;
      pairs += c[h].pairs;
      for (size_t p = 0; p < c[h].share.size(); ++p) heads[h].share[p] += c[h].share[p];
    }
    for (auto& share : heads[h].share) share /= static_cast<double>(contribs.size());
    heads[h].dominant_distance_corr = corr / static_cast<double>(contribs.size());
    heads[h].pairs = pairs;
  }

  nlohmann::json j;
  j["checkpoint"] = o.checkpoint;
  j["length"] = length;
  j["samples"] = o.samples;
  j["needles"] = o.needles;
  j["depth"] = o.depth;
  j["format"] = format->name;
  j["haystack"] = held_out ? "eval split" : "train split (the checkpoint's data has no eval split)";
  j["mass"] = MassToJson(mass, SummarizeMass(mass));
  j["rope_pairs"] = ContributionsToJson(heads, o.positional_threshold);
  j["answer_nll"] = base_nll / o.samples;
  if (ablated) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& [l, h] : o.ablate_heads) a.push_back({{"layer", l}, {"head", h}});
    j["ablation"] = {{"heads", a}, {"answer_nll", ablated_nll / o.samples}, {"answer_nll_intact", base_nll / o.samples}};
  }
  return j;
}

int RunAnalyzeAttentionCommand(const AnalyzeAttentionOptions& options, const std::string& json_out) {
  absl::StatusOr<nlohmann::json> j = AnalyzeAttention(options);
  if (!j.ok()) {
    std::fprintf(stderr, "longctx analyze attention: %s\n", std::string(j.status().message()).c_str());
    return 1;
  }
  // Human summary first, then the JSON.
  for (const auto& g : (*j)["mass"]["summary"])
    std::printf("%-4s layers %d: begin %.4f needle %.4f context %.4f qc %.4f entropy %.3f\n",
                g["group"].get<std::string>().c_str(), g["layers"].get<int>(), g["mass"]["begin"].get<double>(),
                g["mass"]["needle"].get<double>(), g["mass"]["context"].get<double>(), g["mass"]["qc"].get<double>(),
                g["entropy"].get<double>());
  std::printf("positional heads (|corr| >= %.2f): %zu of %zu RoPE heads\n", options.positional_threshold,
              (*j)["rope_pairs"]["positional_heads"].size(), (*j)["rope_pairs"]["heads"].size());
  if (j->contains("ablation"))
    std::printf("answer NLL: intact %.4f, ablated %.4f\n", (*j)["ablation"]["answer_nll_intact"].get<double>(),
                (*j)["ablation"]["answer_nll"].get<double>());
  const std::string text = j->dump();
  std::printf("%s\n", text.c_str());
  if (!json_out.empty()) {
    std::ofstream f(json_out);
    f << j->dump(2) << "\n";
    if (!f.good()) {
      std::fprintf(stderr, "longctx analyze attention: cannot write %s\n", json_out.c_str());
      return 1;
    }
  }
  return 0;
}

}  // namespace longctx
