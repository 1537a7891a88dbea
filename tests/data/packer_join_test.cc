// Why: join mode (PackerOptions::join_fraction) changes which tokens attend to
// which, so a bug there trains silently on the wrong thing: a document token
// lost or repeated at a join, a target that is no longer the next token, a
// segment that does not match its positions, or counters that report more long
// distances than the rows hold. Every token of these corpora is unique, so the
// rows of one epoch can be checked against the source as a multiset and in
// order; the position-frequency counters are recounted naively, pair by pair,
// from the emitted positions alone.
#include "data/packer.h"


#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "data/posfreq_analysis.h"
#include "data/position_frequency.h"
#include "gtest/gtest.h"
#include "tests/support/scratch_token_files.h"

namespace longctx {
namespace {

constexpr int64_t kVocab = 65536;

class PackerJoinTest : public ::testing::Test {
 protected:
  // Documents of the given lengths; token k of the file (counting from 0 over
  // all documents) is k, so every token says where it came from.
  const TokenFileReader& MakeFile(const std::vector<int>& lengths) {
    int32_t next = 0;
    std::vector<std::vector<int32_t>> docs = testing::DocumentsOfLengths(lengths, [&](size_t, int) { return next++; });
    EXPECT_LT(next, kVocab);
    return files_.Add(docs, kVocab);
  }

  testing::ScratchTokenFiles files_{"longctx_packer_join_test"};
};

// Mostly documents much shorter than a row (where joins matter), some empty,
// some of length 1, a few longer than two rows.
std::vector<int> RandomLengths(uint32_t seed, int n, int T) {
  std::mt19937 rng(seed);
  std::vector<int> lengths(n);
  for (int& len : lengths) {
    const uint32_t kind = rng() % 20;
    if (kind == 0) len = 0;
    else if (kind == 1) len = 1;
    else if (kind == 2) len = T + 1 + static_cast<int>(rng() % (2 * T));
    else len = 2 + static_cast<int>(rng() % (T / 3));
  }
  return lengths;
}

PackerOptions JoinOpts(int T, int B, double p, uint64_t seed) {
  PackerOptions o;
  o.seq_len = T;
  o.batch_size = B;
  o.document_mask = true;
  o.shuffle_seed = seed;
  o.eval_fraction = 0;
  o.split = PackerSplit::kAll;
  o.join_fraction = p;
  return o;
}

// Where each token of the file came from: token k is offset off[k] of document doc[k].
struct Source {
  std::vector<int64_t> doc, off, len;
};
Source SourceOf(const TokenFileReader& reader) {
  Source s;
  for (int64_t d = 0; d < reader.n_docs(); ++d) {
    for (int64_t p = 0; p < reader.doc_length(d); ++p) {
      s.doc.push_back(d);
      s.off.push_back(p);
      s.len.push_back(reader.doc_length(d));
    }
  }
  return s;
}

// The emitted rows, flattened: inputs, targets, positions, and the segment
// starts (flattened indices) from cu_seqlens.
struct Rows {
  std::vector<int32_t> inputs, targets, positions;
  std::vector<int64_t> seg_starts;
  std::vector<PackedBatch> batches;
};
Rows Emit(Packer& packer, int num_batches) {
  Rows r;
  for (int n = 0; n < num_batches; ++n) {
    absl::StatusOr<PackedBatch> b = packer.Next();
    EXPECT_TRUE(b.ok()) << b.status();
    EXPECT_TRUE(ValidatePackedBatch(*b).ok()) << ValidatePackedBatch(*b);
    const int64_t base = static_cast<int64_t>(r.inputs.size());
    r.inputs.insert(r.inputs.end(), b->inputs.begin(), b->inputs.end());
    r.targets.insert(r.targets.end(), b->targets.begin(), b->targets.end());
    r.positions.insert(r.positions.end(), b->positions.begin(), b->positions.end());
    for (size_t s = 0; s + 1 < b->cu_seqlens.size(); ++s) r.seg_starts.push_back(base + b->cu_seqlens[s]);
    r.batches.push_back(std::move(*b));
  }
  return r;
}

// One epoch in join mode: the rows' inputs, read in order, are every source
// token exactly once, each document whole and in order; every target is the
// next stream token, or −1 exactly where the next token starts a document;
// segments start at row starts and at the document starts that are not joins,
// nowhere else; positions count from each segment start.
void CheckOneEpoch(const TokenFileReader& reader, int T, int B, double p, uint64_t seed, int64_t* joins_out,
                   int64_t* starts_out) {
  SCOPED_TRACE(absl::StrCat("T ", T, " B ", B, " p ", p, " seed ", seed));
  absl::StatusOr<Packer> packer = Packer::Create(&reader, JoinOpts(T, B, p, seed));
  ASSERT_TRUE(packer.ok()) << packer.status();
  const Source src = SourceOf(reader);
  const int64_t N = packer->tokens_per_epoch();
  ASSERT_EQ(N, static_cast<int64_t>(src.doc.size()));
  // Enough batches for one epoch and the next token after it.
  const int num_batches = static_cast<int>((N + 1 + int64_t{B} * T - 1) / (int64_t{B} * T));
  const Rows rows = Emit(*packer, num_batches);
  ASSERT_GE(static_cast<int64_t>(rows.inputs.size()), N + 1);

  // The multiset: every source token once in the epoch's first N stream tokens.
  std::vector<int32_t> seen(rows.inputs.begin(), rows.inputs.begin() + N);
  std::sort(seen.begin(), seen.end());
  for (int64_t k = 0; k < N; ++k) ASSERT_EQ(seen[k], k) << "source token " << k << " lost or duplicated";

  // The order: documents whole, in the epoch order, each from offset 0 to its end.
  const std::vector<uint32_t> order = packer->EpochOrder(0);
  std::vector<uint8_t> is_start(rows.inputs.size(), 0), joined(rows.inputs.size(), 0);
  int64_t k = 0;
  for (uint64_t d = 0; d < order.size(); ++d) {
    for (int64_t off = 0; off < reader.doc_length(order[d]); ++off, ++k) {
      const int32_t tok = rows.inputs[k];
      ASSERT_EQ(src.doc[tok], order[d]) << "stream token " << k;
      ASSERT_EQ(src.off[tok], off) << "stream token " << k;
    }
    const int64_t start = k - reader.doc_length(order[d]);
    is_start[start] = 1;
    joined[start] = DocumentJoinsPrevious(seed, 0, d, p) ? 1 : 0;
  }
  ASSERT_EQ(k, N);
  is_start[N] = 1;  // the next epoch's first document

  // Targets and loss flags. Row r's inputs are stream tokens [rT, rT + T) and
  // its targets [rT + 1, rT + T], so the flattened inputs are the stream and
  // the target of flattened token t is input t + 1.
  const int64_t total = static_cast<int64_t>(rows.inputs.size());
  for (int64_t t = 0; t < N; ++t) {
    ASSERT_LT(t + 1, total);
    if (is_start[t + 1]) {
      ASSERT_EQ(rows.targets[t], -1) << "token " << t << ": its target starts another document";
    } else {
      ASSERT_EQ(rows.targets[t], rows.inputs[t + 1]) << "token " << t;
    }
  }
  int64_t valid = 0;
  for (const PackedBatch& b : rows.batches) {
    valid = 0;
    for (int32_t tg : b.targets) valid += tg >= 0;
    ASSERT_EQ(valid, b.num_target_tokens);
  }

  // Segments: starts at row starts and unjoined document starts.
  std::vector<int64_t> want_starts;
  int64_t joins = 0, starts = 0;
  for (int64_t t = 0; t < N; ++t) {
    const bool row_start = t % T == 0;
    if (is_start[t] && !row_start) {
      ++starts;
      joins += joined[t];
    }
    if (row_start || (is_start[t] && !joined[t])) want_starts.push_back(t);
  }
  std::vector<int64_t> got_starts;
  for (int64_t s : rows.seg_starts)
    if (s < N) got_starts.push_back(s);
  ASSERT_EQ(got_starts, want_starts);
  for (int64_t t = 0; t < N; ++t) {
    const bool seg_start = std::binary_search(want_starts.begin(), want_starts.end(), t);
    ASSERT_EQ(rows.positions[t], seg_start ? 0 : rows.positions[t - 1] + 1) << "token " << t;
  }
  *joins_out = joins;
  *starts_out = starts;
}

TEST_F(PackerJoinTest, OneEpochHasEveryTokenOnceAndSegmentsAtUnjoinedStarts) {
  for (uint32_t corpus_seed : {11u, 12u, 13u}) {
    for (int T : {16, 64}) {
      const TokenFileReader& reader = MakeFile(RandomLengths(corpus_seed, 300, T));
      for (double p : {0.0, 0.3, 0.7, 1.0}) {
        int64_t joins = 0, starts = 0;
        CheckOneEpoch(reader, T, 3, p, corpus_seed * 7 + 1, &joins, &starts);
        if (HasFatalFailure()) return;
        ASSERT_GT(starts, 100);
        // The joins are a share p of the document starts inside rows (binomial;
        // ±0.15 is > 4 standard deviations here).
        const double share = static_cast<double>(joins) / static_cast<double>(starts);
        EXPECT_NEAR(share, p, 0.15) << "corpus " << corpus_seed << " T " << T;
        if (p == 0.0) {
          EXPECT_EQ(joins, 0);
        }
        if (p == 1.0) {
          EXPECT_EQ(joins, starts);
        }
      }
    }
  }
}

// Join mode changes the segments only: inputs and targets are those of the
// default packer, batch for batch, across epochs; join_fraction 0 is the
// default packer in every field.
TEST_F(PackerJoinTest, SameRowsAndTargetsAsTheDefaultPacker) {
  const int T = 32, B = 4;
  const TokenFileReader& reader = MakeFile(RandomLengths(21, 120, T));
  PackerOptions def = JoinOpts(T, B, 0.0, 5);
  absl::StatusOr<Packer> base = Packer::Create(&reader, def);
  absl::StatusOr<Packer> zero = Packer::Create(&reader, JoinOpts(T, B, 0.0, 5));
  absl::StatusOr<Packer> half = Packer::Create(&reader, JoinOpts(T, B, 0.5, 5));
  ASSERT_TRUE(base.ok() && zero.ok() && half.ok());
  const int batches = static_cast<int>(3 * base->tokens_per_epoch() / (B * T)) + 2;  // three epochs
  int64_t differing_segments = 0;
  for (int n = 0; n < batches; ++n) {
    absl::StatusOr<PackedBatch> a = base->Next(), z = zero->Next(), h = half->Next();
    ASSERT_TRUE(a.ok() && z.ok() && h.ok());
    EXPECT_EQ(z->inputs, a->inputs);
    EXPECT_EQ(z->targets, a->targets);
    EXPECT_EQ(z->positions, a->positions);
    EXPECT_EQ(z->cu_seqlens, a->cu_seqlens);
    EXPECT_EQ(z->max_seqlen, a->max_seqlen);
    EXPECT_EQ(h->inputs, a->inputs) << "batch " << n;
    EXPECT_EQ(h->targets, a->targets) << "batch " << n;
    EXPECT_EQ(h->num_target_tokens, a->num_target_tokens);
    EXPECT_LE(h->cu_seqlens.size(), a->cu_seqlens.size());
    differing_segments += h->cu_seqlens != a->cu_seqlens;
    EXPECT_EQ(base->cursor(), half->cursor());
  }
  EXPECT_GT(differing_segments, batches / 2);
}

// Joins are a property of the document in the epoch order, not of where rows
// fall: other batch sizes and a resume from a saved cursor give the same rows.
TEST_F(PackerJoinTest, ResumeAndBatchSizeGiveTheSameSegments) {
  const int T = 24;
  const TokenFileReader& reader = MakeFile(RandomLengths(31, 80, T));
  absl::StatusOr<Packer> one = Packer::Create(&reader, JoinOpts(T, 1, 0.5, 9));
  absl::StatusOr<Packer> four = Packer::Create(&reader, JoinOpts(T, 4, 0.5, 9));
  ASSERT_TRUE(one.ok() && four.ok());
  const int batches = static_cast<int>(2 * one->tokens_per_epoch() / (4 * T)) + 3;  // two epochs and a bit
  const Rows r1 = Emit(*one, 4 * batches);
  const Rows r4 = Emit(*four, batches);
  EXPECT_EQ(r1.inputs, r4.inputs);
  EXPECT_EQ(r1.targets, r4.targets);
  EXPECT_EQ(r1.positions, r4.positions);
  EXPECT_EQ(r1.seg_starts, r4.seg_starts);

  absl::StatusOr<Packer> resumed = Packer::Create(&reader, JoinOpts(T, 4, 0.5, 9));
  ASSERT_TRUE(resumed.ok());
  const int skip = batches / 2;
  absl::StatusOr<Packer> ref = Packer::Create(&reader, JoinOpts(T, 4, 0.5, 9));
  ASSERT_TRUE(ref.ok());
  Emit(*ref, skip);
  absl::StatusOr<PackerCursor> c = PackerCursorFromJson(PackerCursorToJson(ref->cursor()));
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(resumed->Seek(*c).ok());
  const Rows a = Emit(*ref, batches - skip), b = Emit(*resumed, batches - skip);
  EXPECT_EQ(a.inputs, b.inputs);
  EXPECT_EQ(a.positions, b.positions);
  EXPECT_EQ(a.seg_starts, b.seg_starts);
}

// f(i) from the counters (segment-length histogram of cu_seqlens, what the
// trainer and `longctx analyze posfreq` count) equals a pair-by-pair recount
// from the emitted positions: (q, k) with k <= q attend iff no position
// restarts in (k, q].
TEST_F(PackerJoinTest, CountersEqualANaiveRecountFromTheRows) {
  for (double p : {0.0, 0.5, 1.0}) {
    SCOPED_TRACE(absl::StrCat("p ", p));
    const int T = 48, rows = 90;
    const TokenFileReader& reader = MakeFile(RandomLengths(41, 200, T));
    absl::StatusOr<Packer> packer = Packer::Create(&reader, JoinOpts(T, 1, p, 1234));
    ASSERT_TRUE(packer.ok());
    const Rows r = Emit(*packer, rows);
    PositionFrequency counters(T);
    for (const PackedBatch& b : r.batches) counters.AddCuSeqlens(b.cu_seqlens);

    std::vector<double> naive(T, 0.0);
    for (int row = 0; row < rows; ++row) {
      const int32_t* pos = &r.positions[static_cast<size_t>(row) * T];
      for (int q = 0; q < T; ++q) {
        for (int k = q; k >= 0; --k) {
          ++naive[q - k];
          if (pos[k] == 0) break;  // k starts q's segment: nothing before it is attended
        }
      }
    }
    EXPECT_EQ(counters.Counts(), naive);

    // The analysis tool's joined case counts the same segments.
    absl::StatusOr<std::vector<int32_t>> lengths = NaturalSegmentLengths(reader, T, rows, 1234, p);
    ASSERT_TRUE(lengths.ok()) << lengths.status();
    PositionFrequency tool(T);
    for (int32_t len : *lengths) tool.AddSegment(len);
    EXPECT_EQ(tool.Counts(), naive);
    if (p == 1.0) {
      // One segment per row: the concatenated case, f(i) = rows·(T − i).
      for (int i = 0; i < T; ++i) EXPECT_EQ(naive[i], static_cast<double>(rows) * (T - i)) << "i " << i;
    }
  }
}

// On a corpus of documents shorter than a row, joining raises f(i >= L/2) and
// f(i >= 3L/4) over the same tokens; the table reports both and their ratio.
TEST_F(PackerJoinTest, AnalysisJoinedCaseRaisesLongDistances) {
  std::mt19937 rng(51);
  std::vector<int> lengths(600);
  for (int& len : lengths) len = 4 + static_cast<int>(rng() % 40);  // all < L/2 = 64
  const TokenFileReader& reader = MakeFile(lengths);
  PosfreqOptions o;
  o.seq_len = 128;
  o.join_fraction = 0.75;
  absl::StatusOr<PosfreqReport> r = AnalyzePositionFrequency(reader, o);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->cases.size(), 4u);
  const PosfreqCase &natural = r->cases[0], &joined = r->cases[3];
  EXPECT_EQ(joined.name, "joined");
  // No document reaches i = 64, and a natural segment is at most one document.
  EXPECT_EQ(natural.summary.pairs_ge_half, 0.0);
  EXPECT_GT(joined.summary.pairs_ge_half, 0.0);
  EXPECT_GT(joined.summary.pairs_ge_three_quarters, 0.0);
  // Pairs in the summary are the sums of f.
  const std::vector<double> f = joined.counts.Counts();
  double ge_half = 0, ge_3q = 0;
  for (int i = 64; i < 128; ++i) ge_half += f[i];
  for (int i = 96; i < 128; ++i) ge_3q += f[i];
  EXPECT_EQ(joined.summary.pairs_ge_half, ge_half);
  EXPECT_EQ(joined.summary.pairs_ge_three_quarters, ge_3q);
  const std::string table = FormatPosfreqTable(*r);
  for (const char* want : {"joined", "f(i>=64)", "f(i>=96)", "joined / natural"})
    EXPECT_NE(table.find(want), std::string::npos) << want << " not in\n" << table;
  const nlohmann::json j = PosfreqReportToJson(*r);
  EXPECT_EQ(j["cases"][3]["name"], "joined");
  EXPECT_EQ(j["cases"][3]["pairs_ge_half"].get<double>(), ge_half);

  o.join_fraction = 1.5;
  EXPECT_FALSE(AnalyzePositionFrequency(reader, o).ok());
}

TEST_F(PackerJoinTest, RejectsBadJoinOptions) {
  const TokenFileReader& reader = MakeFile({5, 6, 7});
  for (double p : {-0.1, 1.01, std::numeric_limits<double>::quiet_NaN()}) {
    absl::StatusOr<Packer> packer = Packer::Create(&reader, JoinOpts(8, 1, p, 1));
    ASSERT_FALSE(packer.ok()) << p;
    EXPECT_NE(std::string(packer.status().message()).find("join_fraction"), std::string::npos)
        << packer.status();
  }
  PackerOptions o = JoinOpts(8, 1, 0.5, 1);
  o.document_mask = false;
  absl::StatusOr<Packer> packer = Packer::Create(&reader, o);
  ASSERT_FALSE(packer.ok());
  EXPECT_NE(std::string(packer.status().message()).find("document_mask"), std::string::npos) << packer.status();
}

}  // namespace
}  // namespace longctx
