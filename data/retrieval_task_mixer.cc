// Why: see retrieval_task_mixer.h.
#include "data/retrieval_task_mixer.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "data/splitmix64.h"

namespace longctx {
namespace {

constexpr uint64_t kPickSalt = 0x6C6F6E6763747852ULL;  // "longctxR"
constexpr uint64_t kRowSalt = 0x6C6F6E6763747857ULL;   // "longctxW"

// The sample lengths of a row of T tokens for a stage.
std::vector<int32_t> SampleLengths(int32_t T, int32_t len) {
  if (len <= 0 || len >= T) return {T};
  std::vector<int32_t> lens(T / len, len);
  lens.back() += T % len;
  return lens;
}

}  // namespace

absl::StatusOr<std::vector<RetrievalStage>> ParseRetrievalCurriculum(const std::string& spec, int default_needles,
                                                                     const std::string& field) {
  std::vector<RetrievalStage> stages;
  if (spec.empty()) {
    stages.push_back({0, default_needles, 0});
    return stages;
  }
  for (absl::string_view part : absl::StrSplit(spec, ',', absl::SkipWhitespace())) {
    std::vector<std::string> f = absl::StrSplit(part, ':');
    RetrievalStage s;
    int64_t len = 0;
    if (f.size() != 3 || !absl::SimpleAtoi(f[0], &s.from_step) || !absl::SimpleAtoi(f[1], &s.needles) ||
        !absl::SimpleAtoi(f[2], &len) || s.from_step < 0 || s.needles < 1 || len < 0 || len > (int64_t{1} << 30))
      return absl::InvalidArgumentError(absl::StrCat(field, ": stage \"", std::string(part),
                                                     "\" is not STEP:NEEDLES:LEN (STEP >= 0, NEEDLES >= 1, LEN >= 0)"));
    s.sample_len = static_cast<int32_t>(len);
    if (stages.empty() ? s.from_step != 0 : s.from_step <= stages.back().from_step)
      return absl::InvalidArgumentError(absl::StrCat(field, ": stage steps must start at 0 and increase (\"", spec,
                                                     "\")"));
    stages.push_back(s);
  }
  if (stages.empty()) return absl::InvalidArgumentError(absl::StrCat(field, ": no stage in \"", spec, "\""));
  return stages;
}

RetrievalMixer::RetrievalMixer(RetrievalMixOptions options, const DocumentSource* source, std::vector<uint32_t> docs,
                               const Tokenizer* tokenizer, int32_t seq_len)
    : options_(std::move(options)), haystack_(source, std::move(docs), tokenizer), tokenizer_(tokenizer),
      seq_len_(seq_len) {}

absl::StatusOr<std::unique_ptr<RetrievalMixer>> RetrievalMixer::Create(const RetrievalMixOptions& options,
                                                                       const DocumentSource* source,
                                                                       std::vector<uint32_t> docs,
                                                                       const Tokenizer* tokenizer, int32_t seq_len) {
  const std::string& f = options.field;
  if (!(options.fraction >= 0 && options.fraction <= 1))
    return absl::InvalidArgumentError(absl::StrCat(f, "_fraction: must be in [0, 1] (got ", options.fraction, ")"));
  if (options.stages.empty()) return absl::InvalidArgumentError(absl::StrCat(f, "_curriculum: no stage"));
  if (docs.empty())
    return absl::FailedPreconditionError(absl::StrCat(f, ": the train split of ", source->source_name(),
                                                      " has no document to cut haystacks from"));
  for (const RetrievalStage& s : options.stages) {
    const int32_t shortest = SampleLengths(seq_len, s.sample_len).front();
    const std::string nines(options.format.digits, '9');
    const int64_t need = NeedleFixedTokens(options.format, s.needles, *tokenizer) +
                         static_cast<int64_t>(tokenizer->Encode(NeedleAnswerText(std::vector<std::string>(s.needles, nines))).size()) + 1;
    if (need > shortest)
      return absl::InvalidArgumentError(absl::StrCat(
          f, "_curriculum: stage from step ", s.from_step, ": ", s.needles, " needles in the '", options.format.name,
          "' format need ", need, " tokens per sample, but samples have ", shortest,
          options.format.name == "compact" ? " (fewer needles, or longer samples or rows)"
                                           : " (fewer needles, longer samples or rows, or retrieval_format \"compact\")"));
  }
  return std::unique_ptr<RetrievalMixer>(new RetrievalMixer(options, source, std::move(docs), tokenizer, seq_len));
}

bool RetrievalMixer::IsRetrievalRow(uint64_t row) const {
  if (options_.fraction <= 0) return false;
  const uint64_t h = Mix64(Mix64(options_.seed ^ kPickSalt) ^ row);
  return static_cast<double>(h >> 11) * 0x1.0p-53 < options_.fraction;
}

const RetrievalStage& RetrievalMixer::StageAt(int64_t step) const {
  size_t i = 0;
  while (i + 1 < options_.stages.size() && options_.stages[i + 1].from_step <= step) ++i;
  return options_.stages[i];
}

absl::Status RetrievalMixer::FillRow(const RetrievalStage& stage, uint64_t row, int32_t* inputs, int32_t* targets,
                                     std::vector<int32_t>* segment_lengths) const {
  const uint64_t row_seed = Mix64(options_.seed ^ kRowSalt) ^ Mix64(row);
  const int32_t eos = tokenizer_->eos_id(), pad = tokenizer_->pad_id();
  const std::string nines(options_.format.digits, '9');
  const int64_t answer_guess =
      static_cast<int64_t>(tokenizer_->Encode(NeedleAnswerText(std::vector<std::string>(stage.needles, nines))).size());
  int32_t offset = 0;
  std::vector<int32_t> seq;
  const std::vector<int32_t> lens = SampleLengths(seq_len_, stage.sample_len);
  for (size_t i = 0; i < lens.size(); ++i) {
    const int64_t n = lens[i];
    const uint64_t seed = Mix64(row_seed ^ Mix64(i + 1));
    int64_t budget = n - 1 - answer_guess;
    absl::StatusOr<NeedleSample> s;
    for (int attempt = 0; attempt < 3; ++attempt) {  // a longer answer than guessed: shrink the prompt
      s = BuildNeedleSample(options_.format, stage.needles, budget, haystack_, seed);
      if (!s.ok()) return absl::Status(s.status().code(), absl::StrCat(options_.field, ": row ", row, ": ", s.status().message()));
      const int64_t total = static_cast<int64_t>(s->prompt.size() + s->answer.size()) + 1;
      if (total <= n) break;
      budget -= total - n;
    }
    const int64_t P = static_cast<int64_t>(s->prompt.size()), A = static_cast<int64_t>(s->answer.size());
    if (P + A + 1 > n)
      return absl::InternalError(absl::StrCat(options_.field, ": row ", row, ": sample of ", P + A + 1,
                                              " tokens does not fit ", n));
    seq = s->prompt;
    seq.insert(seq.end(), s->answer.begin(), s->answer.end());
    seq.push_back(eos);
    seq.resize(n, pad);
    for (int64_t t = 0; t < n; ++t) {
      inputs[offset + t] = seq[t];
      // Target t is token t + 1; keep the answer tokens and the EOS (indices
      // P .. P + A), or everything up to the EOS.
      const bool keep = t + 1 <= P + A && (options_.loss == RetrievalLoss::kAll || t + 1 >= P);
      targets[offset + t] = keep ? seq[t + 1] : -1;
    }
    segment_lengths->push_back(static_cast<int32_t>(n));
    offset += static_cast<int32_t>(n);
  }
  return absl::OkStatus();
}

absl::Status RetrievalMixer::Apply(int64_t step, uint64_t first_row, PackedBatch* batch) const {
  const int32_t B = batch->batch_size, T = batch->seq_len;
  if (T != seq_len_)
    return absl::InvalidArgumentError(absl::StrCat(options_.field, ": batch rows of ", T, " tokens, mixer built for ", seq_len_));
  bool any = false;
  for (int32_t b = 0; b < B && !any; ++b) any = IsRetrievalRow(first_row + b);
  if (!any) return absl::OkStatus();
  const RetrievalStage& stage = StageAt(step);
  std::vector<int32_t> lens;
  for (int32_t b = 0; b < B; ++b) {
    if (!IsRetrievalRow(first_row + b)) {
      for (const auto& [start, len] : SegmentsOfRow(*batch, b)) lens.push_back(len);
      continue;
    }
    absl::Status st = FillRow(stage, first_row + b, batch->inputs.data() + int64_t{b} * T,
                              batch->targets.data() + int64_t{b} * T, &lens);
    if (!st.ok()) return st;
  }
  batch->cu_seqlens.assign(1, 0);
  batch->max_seqlen = 0;
  for (int32_t len : lens) {
    const int32_t start = batch->cu_seqlens.back();
    for (int32_t t = 0; t < len; ++t) batch->positions[start + t] = t;
    batch->cu_seqlens.push_back(start + len);
    batch->max_seqlen = std::max(batch->max_seqlen, len);
  }
  batch->num_target_tokens = std::count_if(batch->targets.begin(), batch->targets.end(), [](int32_t t) { return t >= 0; });
  return absl::OkStatus();
}

}  // namespace longctx
