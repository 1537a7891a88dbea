// Why: the STRING paper's Figure 1 argues that long relative distances are
// rare in pretraining (the "left-skewed position frequency"), and that this
// holds whatever the document lengths are: (a) natural lengths, (b) uniform
// lengths, (c) everything concatenated. `longctx analyze posfreq` reproduces
// the three cases for one of our corpora at a training length L, so we know how
// many (query, key) pairs at distance i a run on that corpus will ever see
// before training it. Pure functions over a token file; counting goes through
// PositionFrequency (Eq. 2, exact).
//
// The cases, all over the same number of tokens (rows·L):
//   natural       the Packer's segments with document masking (split kAll,
//                 shuffled as in training): documents cut at row boundaries,
//                 documents longer than L cut into L-token pieces;
//   uniform       document lengths drawn uniformly from [1, L] (own SplitMix64,
//                 fixed seed; the last one shortened so the totals match), each
//                 one segment, unpacked: the paper's idealised Figure 1b;
//   concatenated  no masking: every segment is a whole row of L tokens, f(i) = rows·(L − i).
// and, with join_fraction p > 0, a fourth:
//   joined        the Packer's join mode (data/packer.h): as natural, but a share
//                 p of the document starts continue the previous document's
//                 segment, so this is what `data.join_fraction: p` trains on.
#ifndef LONGCTX_DATA_POSFREQ_ANALYSIS_H_
#define LONGCTX_DATA_POSFREQ_ANALYSIS_H_

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "data/position_frequency.h"
#include "data/token_file.h"

namespace longctx {

inline constexpr uint64_t kPosfreqUniformSeed = 20240611;

struct PosfreqOptions {
  int64_t seq_len = 2048;  // L
  // Packed rows of L tokens; 0 = cover the corpus once: floor(tokens / L), at
  // least 1 (a corpus shorter than a row wraps around).
  int64_t rows = 0;
  uint64_t shuffle_seed = 1234;  // the Packer's document order (natural case)
  uint64_t uniform_seed = kPosfreqUniformSeed;
  double k = 1;  // reported: the largest i with f(i) >= k
  double join_fraction = 0;  // > 0 adds the "joined" case (the Packer's join mode)
};

struct PosfreqCase {
  std::string name;         // "natural", "uniform", "concatenated"
  std::string description;  // one line for tables and JSON
  PositionFrequency counts;
  int64_t segments = 0;  // attention segments (documents or rows)
  PositionFrequencySummary summary;
};

struct PosfreqReport {
  std::string data_path;
  int64_t seq_len = 0;
  int64_t rows = 0;
  int64_t tokens = 0;  // rows·L, the same in every case
  int64_t corpus_tokens = 0;
  int64_t corpus_docs = 0;
  PosfreqOptions options;
  std::vector<PosfreqCase> cases;  // natural, uniform, concatenated[, joined]
};

// Case (a): segment lengths of `rows` packed rows (document_mask, split kAll,
// batch size 1); with join_fraction > 0 the joined case. Errors: bad
// seq_len/rows/join_fraction, or a file with no non-empty document.
absl::StatusOr<std::vector<int32_t>> NaturalSegmentLengths(const TokenFileReader& reader, int64_t seq_len,
                                                           int64_t rows, uint64_t shuffle_seed,
                                                           double join_fraction = 0);
// Case (b): lengths uniform in [1, seq_len] summing to exactly total_tokens
// (the last one shortened). Deterministic in (seq_len, total_tokens, seed).
std::vector<int64_t> UniformSegmentLengths(int64_t seq_len, int64_t total_tokens, uint64_t seed);
// Case (c) counter: `rows` segments of seq_len.
PositionFrequency ConcatenatedPositionFrequency(int64_t seq_len, int64_t rows);

// All three cases (four with join_fraction > 0). Errors: as NaturalSegmentLengths; seq_len must be >= 2.
absl::StatusOr<PosfreqReport> AnalyzePositionFrequency(const TokenFileReader& reader, const PosfreqOptions& options);

// Share of Σf in i <= floor(L/2) and in i >= ceil(3L/4) are the summary's
// share_le_half and share_ge_three_quarters; these are their thresholds.
inline int64_t PosfreqLowThreshold(int64_t seq_len) { return seq_len / 2; }
inline int64_t PosfreqHighThreshold(int64_t seq_len) { return (3 * seq_len + 3) / 4; }

// The printed table: one line per case with the two shares, the pairs at
// i >= L/2 and i >= 3L/4, total pairs, segments and the largest i with at
// least k pairs; with a joined case, a last line with its ratios to natural.
std::string FormatPosfreqTable(const PosfreqReport& report);
// {"data", "seq_len", "rows", "tokens", "k", ..., "cases": [{"name", "share_le_half",
// "share_ge_three_quarters", "share_ge_half", "pairs_ge_half", "pairs_ge_three_quarters", "total_pairs", "largest_i_with_k",
// "segments", "histogram": {...}, "f": [f(0), ..., f(L−1)]}, ...]}.
nlohmann::json PosfreqReportToJson(const PosfreqReport& report);
// f(i)/Σf for a case (zeros when Σf = 0).
std::vector<double> NormalizedCounts(const PosfreqCase& c);

}  // namespace longctx

#endif  // LONGCTX_DATA_POSFREQ_ANALYSIS_H_
