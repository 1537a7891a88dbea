// Why: `longctx analyze posfreq` is how we quote the STRING paper's Figure 1
// numbers for our own corpora, so each case must be exactly what it claims:
// (c) concatenated is rows·(L − i); (a) natural is Eq. 2 over the segments the
// Packer really produces (recovered here independently, with another batch
// size); (b) uniform draws lengths in [1, L] with the same token total; the
// shares use the right thresholds (i <= floor(L/2), i >= ceil(3L/4)); and the
// three cases order as the paper says for a corpus of short documents.
#include "data/posfreq_analysis.h"

#include <algorithm>
#include <numeric>
#include <random>

#include "absl/strings/str_cat.h"
#include "data/packer.h"
#include "data/token_file.h"
#include "gtest/gtest.h"
#include "tests/support/test_seed.h"
#include "tests/support/test_util.h"

namespace longctx {
namespace {

// A token file with documents of the given lengths (token values arbitrary).
std::string WriteTokenFile(const std::string& path, const std::vector<int>& doc_lengths) {
  TokenFileWriter w;
  EXPECT_TRUE(w.Open(path, 256, "byte").ok());
  int32_t next = 0;
  for (int len : doc_lengths) {
    std::vector<int32_t> ids(len);
    for (int32_t& id : ids) id = (next++ * 37) % 256;
    EXPECT_TRUE(w.AddDocument(ids).ok());
  }
  EXPECT_TRUE(w.Finish().ok());
  return path;
}

std::vector<int> RandomLengths(int n, int lo, int hi, int seed) {
  std::mt19937 rng(test::FreshSeed(seed));
  std::uniform_int_distribution<int> len(lo, hi);
  std::vector<int> out(n);
  for (int& v : out) v = len(rng);
  return out;
}

// Eq. 2 by brute force.
std::vector<double> BruteForce(const std::vector<int64_t>& segments, int64_t L) {
  std::vector<double> f(L, 0);
  for (int64_t s : segments)
    for (int64_t i = 0; i < L; ++i) f[i] += static_cast<double>(std::max<int64_t>(s - i, 0));
  return f;
}

const PosfreqCase& Case(const PosfreqReport& r, const std::string& name) {
  for (const PosfreqCase& c : r.cases)
    if (c.name == name) return c;
  ADD_FAILURE() << "no case " << name;
  return r.cases.front();
}

class PosfreqAnalysisTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Mostly short documents plus a few longer than a row.
    std::vector<int> lengths = RandomLengths(2000, 1, 60, 7);
    lengths.push_back(500);
    lengths.push_back(0);  // empty documents are skipped by the packer
    lengths.push_back(333);
    path_ = WriteTokenFile(dir_ / "corpus.ltok", lengths);
    absl::StatusOr<TokenFileReader> r = TokenFileReader::Open(path_);
    ASSERT_TRUE(r.ok()) << r.status();
    reader_ = std::make_unique<TokenFileReader>(std::move(*r));
    tokens_ = std::accumulate(lengths.begin(), lengths.end(), int64_t{0});
  }

  testing::TempDir dir_;
  std::string path_;
  std::unique_ptr<TokenFileReader> reader_;
  int64_t tokens_ = 0;
};

TEST_F(PosfreqAnalysisTest, ConcatenatedIsRowsTimesLMinusI) {
  PosfreqOptions o;
  o.seq_len = 130;
  absl::StatusOr<PosfreqReport> r = AnalyzePositionFrequency(*reader_, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->rows, tokens_ / 130);  // cover the corpus once
  EXPECT_EQ(r->tokens, r->rows * 130);
  ASSERT_EQ(r->cases.size(), 3u);
  const PosfreqCase& c = Case(*r, "concatenated");
  EXPECT_EQ(c.segments, r->rows);
  const std::vector<double> f = c.counts.Counts();
  ASSERT_EQ(f.size(), 130u);
  for (int64_t i = 0; i < 130; ++i) ASSERT_EQ(f[i], static_cast<double>(r->rows * (130 - i))) << i;
}

TEST_F(PosfreqAnalysisTest, NaturalIsEquation2OverThePackersSegments) {
  const int64_t L = 64;
  PosfreqOptions o;
  o.seq_len = L;
  o.rows = 40;  // a multiple of the batch size below
  o.shuffle_seed = 99;
  absl::StatusOr<PosfreqReport> r = AnalyzePositionFrequency(*reader_, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->rows, 40);

  // The same stream through a packer with batch size 8, segments read per row.
  PackerOptions po;
  po.seq_len = L;
  po.batch_size = 8;
  po.document_mask = true;
  po.shuffle_seed = 99;
  po.eval_fraction = 0;
  po.split = PackerSplit::kAll;
  absl::StatusOr<Packer> packer = Packer::Create(reader_.get(), po);
  ASSERT_TRUE(packer.ok()) << packer.status();
  std::vector<int64_t> segments;
  for (int b = 0; b < 5; ++b) {
    absl::StatusOr<PackedBatch> batch = packer->Next();
    ASSERT_TRUE(batch.ok());
    for (int row = 0; row < 8; ++row)
      for (const auto& [start, len] : SegmentsOfRow(*batch, row)) segments.push_back(len);
  }
  const PosfreqCase& c = Case(*r, "natural");
  EXPECT_EQ(c.segments, static_cast<int64_t>(segments.size()));
  EXPECT_GT(c.segments, 40);  // short documents: several per row
  EXPECT_EQ(std::accumulate(segments.begin(), segments.end(), int64_t{0}), 40 * L);
  const std::vector<double> want = BruteForce(segments, L), got = c.counts.Counts();
  for (int64_t i = 0; i < L; ++i) ASSERT_EQ(got[i], want[i]) << i;

  // The lengths helper is the same list.
  absl::StatusOr<std::vector<int32_t>> lengths = NaturalSegmentLengths(*reader_, L, 40, 99);
  ASSERT_TRUE(lengths.ok());
  EXPECT_EQ(std::vector<int64_t>(lengths->begin(), lengths->end()), segments);
}

TEST(PosfreqUniformTest, LengthsAreUniformInRangeWithTheTokenTotal) {
  const std::vector<int64_t> a = UniformSegmentLengths(100, 200000, 5);
  EXPECT_EQ(std::accumulate(a.begin(), a.end(), int64_t{0}), 200000);
  int64_t min = 1000, max = 0;
  std::vector<int> hist(101, 0);
  for (size_t i = 0; i + 1 < a.size(); ++i) {  // the last one may be shortened
    min = std::min(min, a[i]);
    max = std::max(max, a[i]);
    ++hist[a[i]];
  }
  EXPECT_EQ(min, 1);
  EXPECT_EQ(max, 100);
  // About 3960 draws, ~40 per length: every length occurs, none dominates.
  for (int len = 1; len <= 100; ++len) {
    EXPECT_GT(hist[len], 10) << len;
    EXPECT_LT(hist[len], 90) << len;
  }
  const double mean = 200000.0 / a.size();
  EXPECT_NEAR(mean, 50.5, 2.0);
  EXPECT_EQ(UniformSegmentLengths(100, 200000, 5), a);  // deterministic
  EXPECT_NE(UniformSegmentLengths(100, 200000, 6), a);
  EXPECT_TRUE(UniformSegmentLengths(100, 0, 5).empty());
  EXPECT_EQ(UniformSegmentLengths(1, 7, 5), std::vector<int64_t>(7, 1));
}

TEST_F(PosfreqAnalysisTest, SharesUseTheRightThresholds) {
  const int64_t L = 130;  // floor(L/2) = 65, ceil(3L/4) = 98
  EXPECT_EQ(PosfreqLowThreshold(L), 65);
  EXPECT_EQ(PosfreqHighThreshold(L), 98);
  EXPECT_EQ(PosfreqLowThreshold(2048), 1024);
  EXPECT_EQ(PosfreqHighThreshold(2048), 1536);
  PosfreqOptions o;
  o.seq_len = L;
  o.k = 50;
  absl::StatusOr<PosfreqReport> r = AnalyzePositionFrequency(*reader_, o);
  ASSERT_TRUE(r.ok()) << r.status();
  for (const PosfreqCase& c : r->cases) {
    const std::vector<double> f = c.counts.Counts();
    double total = 0, le = 0, ge = 0;
    int64_t largest = -1;
    for (int64_t i = 0; i < L; ++i) {
      total += f[i];
      if (i <= 65) le += f[i];
      if (i >= 98) ge += f[i];
      if (f[i] >= 50) largest = i;
    }
    EXPECT_DOUBLE_EQ(c.summary.total_pairs, total) << c.name;
    EXPECT_DOUBLE_EQ(c.summary.share_le_half, le / total) << c.name;
    EXPECT_DOUBLE_EQ(c.summary.share_ge_three_quarters, ge / total) << c.name;
    EXPECT_EQ(c.summary.largest_i_with_k, largest) << c.name;
    // f(0) is the token count, the same in every case.
    EXPECT_EQ(f[0], static_cast<double>(r->tokens)) << c.name;
    const std::vector<double> norm = NormalizedCounts(c);
    EXPECT_NEAR(std::accumulate(norm.begin(), norm.end(), 0.0), 1.0, 1e-12);
  }
  // Closed form for (c): Σ_{i>=98} (130 − i) / Σ_i (130 − i) = (32·33/2) / (130·131/2).
  EXPECT_DOUBLE_EQ(Case(*r, "concatenated").summary.share_ge_three_quarters, (32.0 * 33) / (130.0 * 131));
}

TEST_F(PosfreqAnalysisTest, UniformLiesBetweenNaturalAndConcatenatedForShortDocuments) {
  PosfreqOptions o;
  o.seq_len = 256;  // documents are mostly <= 60 tokens: (a) has almost no long pairs
  absl::StatusOr<PosfreqReport> r = AnalyzePositionFrequency(*reader_, o);
  ASSERT_TRUE(r.ok()) << r.status();
  const PosfreqCase &a = Case(*r, "natural"), &b = Case(*r, "uniform"), &c = Case(*r, "concatenated");
  EXPECT_LT(a.summary.share_ge_half, b.summary.share_ge_half);
  EXPECT_LT(b.summary.share_ge_half, c.summary.share_ge_half);
  EXPECT_LT(a.summary.share_ge_three_quarters, b.summary.share_ge_three_quarters);
  EXPECT_LT(b.summary.share_ge_three_quarters, c.summary.share_ge_three_quarters);
  EXPECT_GT(a.summary.share_le_half, b.summary.share_le_half);
  EXPECT_GT(b.summary.share_le_half, c.summary.share_le_half);
  // Idealised values: (c) ≈ 1/4 at i >= L/2, (b) ≈ 1/8 (quadratic decline).
  EXPECT_NEAR(c.summary.share_ge_half, 0.25, 0.01);
  EXPECT_NEAR(b.summary.share_ge_half, 0.125, 0.03);
  // Same tokens, fewer and shorter segments in (a) than in (b).
  EXPECT_GT(a.segments, b.segments);
  EXPECT_GT(b.segments, c.segments);
}

TEST_F(PosfreqAnalysisTest, RowsOptionTableAndJson) {
  PosfreqOptions o;
  o.seq_len = 128;
  o.rows = 3;
  absl::StatusOr<PosfreqReport> r = AnalyzePositionFrequency(*reader_, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->rows, 3);
  EXPECT_EQ(r->tokens, 384);
  const std::string table = FormatPosfreqTable(*r);
  for (const char* want : {"i<=64", "i>=96", "natural", "uniform", "concatenated", path_.c_str()})
    EXPECT_NE(table.find(want), std::string::npos) << want << " in\n" << table;
  const nlohmann::json j = PosfreqReportToJson(*r);
  EXPECT_EQ(j["seq_len"], 128);
  EXPECT_EQ(j["rows"], 3);
  ASSERT_EQ(j["cases"].size(), 3u);
  EXPECT_EQ(j["cases"][2]["name"], "concatenated");
  EXPECT_EQ(j["cases"][0]["f"].size(), 128u);
  EXPECT_DOUBLE_EQ(j["cases"][1]["share_le_half"].get<double>(), r->cases[1].summary.share_le_half);
  absl::StatusOr<PositionFrequency> back = PositionFrequency::FromJson(j["cases"][0]["histogram"]);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->Counts(), r->cases[0].counts.Counts());

  // A corpus shorter than one row still gives one (wrapped) row; bad options fail.
  o.rows = 0;
  o.seq_len = 1 << 18;
  absl::StatusOr<PosfreqReport> wide = AnalyzePositionFrequency(*reader_, o);
  ASSERT_TRUE(wide.ok()) << wide.status();
  EXPECT_EQ(wide->rows, 1);
  o.seq_len = 1;
  EXPECT_FALSE(AnalyzePositionFrequency(*reader_, o).ok());
  o.seq_len = 64;
  o.rows = -1;
  EXPECT_FALSE(AnalyzePositionFrequency(*reader_, o).ok());
}

TEST_F(PosfreqAnalysisTest, CommandWritesTableJsonAndPng) {
  const std::string json = dir_ / "posfreq.json", png = dir_ / "posfreq.png";
  testing::CommandResult run = testing::RunCommand(
      absl::StrCat(testing::LongctxBinary(), " analyze posfreq --data ", path_, " --seq_len 128 --png ", png,
                   " --json_out ", json));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("i<=64"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("i>=96"), std::string::npos) << run.output;
  const nlohmann::json j = nlohmann::json::parse(testing::ReadFile(json));
  PosfreqOptions o;
  o.seq_len = 128;
  absl::StatusOr<PosfreqReport> r = AnalyzePositionFrequency(*reader_, o);
  ASSERT_TRUE(r.ok());
  for (int c = 0; c < 3; ++c) {
    EXPECT_DOUBLE_EQ(j["cases"][c]["share_le_half"].get<double>(), r->cases[c].summary.share_le_half);
    EXPECT_DOUBLE_EQ(j["cases"][c]["share_ge_three_quarters"].get<double>(),
                     r->cases[c].summary.share_ge_three_quarters);
  }
  const std::string bytes = testing::ReadFile(png);
  ASSERT_GT(bytes.size(), 24u);
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  // Width 1000 and height 620 in the IHDR chunk (big-endian at offsets 16, 20).
  auto be32 = [&](size_t at) {
    return (static_cast<uint32_t>(static_cast<uint8_t>(bytes[at])) << 24) |
           (static_cast<uint32_t>(static_cast<uint8_t>(bytes[at + 1])) << 16) |
           (static_cast<uint32_t>(static_cast<uint8_t>(bytes[at + 2])) << 8) |
           static_cast<uint32_t>(static_cast<uint8_t>(bytes[at + 3]));
  };
  EXPECT_EQ(be32(16), 1000u);
  EXPECT_EQ(be32(20), 620u);

  // --json is plan's switch; a missing file is reported with its path.
  run = testing::RunCommand(absl::StrCat(testing::LongctxBinary(), " analyze posfreq --data ", path_, " --json"));
  EXPECT_NE(run.exit_code, 0);
  EXPECT_NE(run.output.find("--json_out"), std::string::npos) << run.output;
  run = testing::RunCommand(absl::StrCat(testing::LongctxBinary(), " analyze posfreq --data ", dir_ / "missing.ltok"));
  EXPECT_NE(run.exit_code, 0);
  EXPECT_NE(run.output.find("missing.ltok"), std::string::npos) << run.output;
}

}  // namespace
}  // namespace longctx
