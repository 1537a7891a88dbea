// Why: see posfreq_analysis.h.
#include "data/posfreq_analysis.h"
#include "data/splitmix64.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "data/packer.h"
#include "base/log.h"

namespace longctx {
namespace {

PosfreqCase MakeCase(std::string name, std::string description, PositionFrequency counts, int64_t segments,
                     double k) {
  PosfreqCase c{std::move(name), std::move(description), std::move(counts), segments, {}};
  c.summary = c.counts.Summarize(k);
  return c;
}

}  // namespace

absl::StatusOr<std::vector<int32_t>> NaturalSegmentLengths(const TokenFileReader& reader, int64_t seq_len,
                                                           int64_t rows, uint64_t shuffle_seed,
                                                           double join_fraction) {
  if (seq_len < 1 || seq_len > std::numeric_limits<int32_t>::max())
    return absl::InvalidArgumentError(absl::StrCat("position frequency: seq_len ", seq_len, " outside [1, 2^31)"));
  if (rows < 1) return absl::InvalidArgumentError(absl::StrCat("position frequency: rows ", rows, " < 1"));
  PackerOptions o;
  o.seq_len = static_cast<int32_t>(seq_len);
  o.batch_size = 1;
  o.document_mask = true;
  o.shuffle = true;
  o.shuffle_seed = shuffle_seed;
  o.eval_fraction = 0;
  o.split = PackerSplit::kAll;
  o.join_fraction = join_fraction;
  absl::StatusOr<Packer> packer = Packer::Create(&reader, o);
  if (!packer.ok()) return packer.status();
  std::vector<int32_t> lengths;
  PackedBatch batch;
  for (int64_t r = 0; r < rows; ++r) {
    absl::Status st = packer->NextInto(&batch);
    if (!st.ok()) return st;
    for (size_t s = 1; s < batch.cu_seqlens.size(); ++s)
      lengths.push_back(batch.cu_seqlens[s] - batch.cu_seqlens[s - 1]);
  }
  return lengths;
}

std::vector<int64_t> UniformSegmentLengths(int64_t seq_len, int64_t total_tokens, uint64_t seed) {
  CHECK_GE(seq_len, 1);
  CHECK_GE(total_tokens, 0);
  SplitMix64 rng(seed);
  std::vector<int64_t> lengths;
  int64_t left = total_tokens;
  while (left > 0) {
    const int64_t len = std::min<int64_t>(left, 1 + static_cast<int64_t>(rng.Below(static_cast<uint64_t>(seq_len))));
    lengths.push_back(len);
    left -= len;
  }
  return lengths;
}

PositionFrequency ConcatenatedPositionFrequency(int64_t seq_len, int64_t rows) {
  PositionFrequency pf(seq_len);
  pf.AddSegment(seq_len, static_cast<uint64_t>(rows));
  return pf;
}

absl::StatusOr<PosfreqReport> AnalyzePositionFrequency(const TokenFileReader& reader, const PosfreqOptions& options) {
  const int64_t L = options.seq_len;
  if (L < 2 || L > std::numeric_limits<int32_t>::max())
    return absl::InvalidArgumentError(absl::StrCat("position frequency: seq_len ", L, " outside [2, 2^31)"));
  if (options.rows < 0)
    return absl::InvalidArgumentError(absl::StrCat("position frequency: rows ", options.rows, " < 0"));
  if (!(options.join_fraction >= 0 && options.join_fraction <= 1))
    return absl::InvalidArgumentError(
        absl::StrCat("position frequency: join_fraction ", options.join_fraction, " not in [0, 1]"));
  PosfreqReport report;
  report.data_path = reader.path();
  report.seq_len = L;
  report.options = options;
  report.corpus_docs = reader.n_docs();
  report.corpus_tokens = reader.n_tokens();
  report.rows = options.rows > 0 ? options.rows : std::max<int64_t>(1, reader.n_tokens() / L);
  report.tokens = report.rows * L;

  absl::StatusOr<std::vector<int32_t>> natural = NaturalSegmentLengths(reader, L, report.rows, options.shuffle_seed);
  if (!natural.ok()) return natural.status();
  PositionFrequency nat(L);
  for (int32_t len : *natural) nat.AddSegment(len);
  report.cases.push_back(MakeCase(
      "natural", absl::StrCat("document lengths of the corpus, packed with document masking (", natural->size(),
                              " segments in ", report.rows, " rows)"),
      std::move(nat), static_cast<int64_t>(natural->size()), options.k));

  const std::vector<int64_t> uniform = UniformSegmentLengths(L, report.tokens, options.uniform_seed);
  PositionFrequency uni(L);
  for (int64_t len : uniform) uni.AddSegment(len);
  report.cases.push_back(MakeCase("uniform",
                                  absl::StrCat("document lengths uniform in [1, ", L, "], one segment each (seed ",
                                               options.uniform_seed, ")"),
                                  std::move(uni), static_cast<int64_t>(uniform.size()), options.k));

  report.cases.push_back(MakeCase("concatenated",
                                  absl::StrCat("all documents concatenated, no masking: ", report.rows,
                                               " segments of ", L),
                                  ConcatenatedPositionFrequency(L, report.rows), report.rows, options.k));

  if (options.join_fraction > 0) {
    absl::StatusOr<std::vector<int32_t>> joined =
        NaturalSegmentLengths(reader, L, report.rows, options.shuffle_seed, options.join_fraction);
    if (!joined.ok()) return joined.status();
    PositionFrequency jf(L);
    for (int32_t len : *joined) jf.AddSegment(len);
    report.cases.push_back(MakeCase(
        "joined",
        absl::StrCat("the packer's join mode, join_fraction ", options.join_fraction, " (", joined->size(),
                     " segments in ", report.rows, " rows)"),
        std::move(jf), static_cast<int64_t>(joined->size()), options.k));
  }
  return report;
}

std::string FormatPosfreqTable(const PosfreqReport& r) {
  const int64_t lo = PosfreqLowThreshold(r.seq_len), hi = PosfreqHighThreshold(r.seq_len);
  std::string out = absl::StrFormat(
      "position frequency f(i) at L = %d: %s (%d documents, %d tokens); %d rows = %d tokens per case\n", r.seq_len,
      r.data_path, r.corpus_docs, r.corpus_tokens, r.rows, r.tokens);
  const std::string share_lo = absl::StrCat("i<=", lo), share_hi = absl::StrCat("i>=", hi);
  const std::string largest = absl::StrFormat("max i: f>=%g", r.options.k);
  const int64_t half = (r.seq_len + 1) / 2;  // the smallest i with 2i >= L
  const std::string pairs_half = absl::StrCat("f(i>=", half, ")"), pairs_hi = absl::StrCat("f(i>=", hi, ")");
  out += absl::StrFormat("%-13s %10s %10s %16s %16s %12s %12s %20s %17s\n", "case", share_lo, share_hi, pairs_half,
                         pairs_hi, "segments", "mean length", "total pairs", largest);
  for (const PosfreqCase& c : r.cases) {
    out += absl::StrFormat("%-13s %9.2f%% %9.2f%% %16.0f %16.0f %12d %12.1f %20.0f %17d\n", c.name,
                           100 * c.summary.share_le_half, 100 * c.summary.share_ge_three_quarters,
                           c.summary.pairs_ge_half, c.summary.pairs_ge_three_quarters, c.segments,
                           c.segments > 0 ? static_cast<double>(r.tokens) / c.segments : 0.0, c.summary.total_pairs,
                           c.summary.largest_i_with_k);
  }
  const PosfreqCase* natural = nullptr;
  const PosfreqCase* joined = nullptr;
  for (const PosfreqCase& c : r.cases) {
    if (c.name == "natural") natural = &c;
    if (c.name == "joined") joined = &c;
  }
  if (natural != nullptr && joined != nullptr) {
    auto ratio = [](double a, double b) { return b > 0 ? absl::StrFormat("%.2fx", a / b) : std::string("inf"); };
    out += absl::StrFormat("joined / natural over the same %d tokens: %s %s, %s %s\n", r.tokens, pairs_half,
                           ratio(joined->summary.pairs_ge_half, natural->summary.pairs_ge_half), pairs_hi,
                           ratio(joined->summary.pairs_ge_three_quarters, natural->summary.pairs_ge_three_quarters));
  }
  return out;
}

std::vector<double> NormalizedCounts(const PosfreqCase& c) {
  std::vector<double> f = c.counts.Counts();
  const double total = c.summary.total_pairs;
  for (double& v : f) v = total > 0 ? v / total : 0.0;
  return f;
}

nlohmann::json PosfreqReportToJson(const PosfreqReport& r) {
  nlohmann::json cases = nlohmann::json::array();
  for (const PosfreqCase& c : r.cases) {
    cases.push_back({{"name", c.name},
                     {"description", c.description},
                     {"segments", c.segments},
                     {"share_le_half", c.summary.share_le_half},
                     {"share_ge_three_quarters", c.summary.share_ge_three_quarters},
                     {"share_ge_half", c.summary.share_ge_half},
                     {"pairs_ge_half", c.summary.pairs_ge_half},
                     {"pairs_ge_three_quarters", c.summary.pairs_ge_three_quarters},
                     {"total_pairs", c.summary.total_pairs},
                     {"largest_i_with_k", c.summary.largest_i_with_k},
                     {"histogram", c.counts.ToJson()},
                     {"f", c.counts.Counts()}});
  }
  return {{"data", r.data_path},
          {"seq_len", r.seq_len},
          {"rows", r.rows},
          {"tokens", r.tokens},
          {"corpus_tokens", r.corpus_tokens},
          {"corpus_docs", r.corpus_docs},
          {"k", r.options.k},
          {"shuffle_seed", r.options.shuffle_seed},
          {"uniform_seed", r.options.uniform_seed},
          {"join_fraction", r.options.join_fraction},
          {"le_half_max_i", PosfreqLowThreshold(r.seq_len)},
          {"ge_three_quarters_min_i", PosfreqHighThreshold(r.seq_len)},
          {"cases", cases}};
}

}  // namespace longctx
