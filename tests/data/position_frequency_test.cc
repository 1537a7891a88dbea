// Why: the live counters must equal the STRING paper's Eq. 2 computed
// independently, f(i) = Σ_s max(|s| − i, 0), from the segments attention really
// sees: documents with document masking, whole rows without, and only i < w in
// sliding-window layers.
#include "data/position_frequency.h"

#include <random>

#include "data/byte_tokenizer.h"
#include "data/packer.h"
#include "data/token_file.h"
#include "gtest/gtest.h"
#include "tests/support/test_seed.h"
#include "tests/support/test_util.h"

namespace longctx {
namespace {

// Eq. 2 by brute force over explicit segment lengths.
std::vector<double> BruteForce(const std::vector<int64_t>& segments, int64_t max_len, int64_t window) {
  std::vector<double> f(max_len, 0);
  for (int64_t s : segments)
    for (int64_t i = 0; i < max_len; ++i)
      if (window == 0 || i < window) f[i] += static_cast<double>(std::max<int64_t>(s - i, 0));
  return f;
}

TEST(PositionFrequencyTest, EqualsEquation2OnRandomSegments) {
  std::mt19937 rng(test::FreshSeed(3));
  const int64_t L = 97;
  std::uniform_int_distribution<int64_t> len(0, L);
  PositionFrequency pf(L);
  std::vector<int64_t> segs;
  for (int k = 0; k < 500; ++k) {
    segs.push_back(len(rng));
    pf.AddSegment(segs.back());
  }
  for (int64_t w : {0, 1, 7, 50, 97}) {
    const std::vector<double> want = BruteForce(segs, L, w), got = pf.Counts(w);
    for (int64_t i = 0; i < L; ++i) ASSERT_EQ(got[i], want[i]) << "i " << i << " window " << w;
  }
  // f(0) is the number of tokens; Σ_i f(i) the number of causal pairs.
  double tokens = 0, pairs = 0;
  for (int64_t s : segs) tokens += s, pairs += s * (s + 1) / 2.0;
  EXPECT_EQ(pf.Counts()[0], tokens);
  EXPECT_EQ(pf.Summarize(1).total_pairs, pairs);
}

TEST(PositionFrequencyTest, SummaryShares) {
  PositionFrequency pf(8);
  pf.AddSegment(8);  // f = 8,7,...,1; total 36
  PositionFrequencySummary s = pf.Summarize(/*k=*/3);
  EXPECT_DOUBLE_EQ(s.total_pairs, 36);
  EXPECT_DOUBLE_EQ(s.share_ge_half, (4 + 3 + 2 + 1) / 36.0);      // i >= 4
  EXPECT_DOUBLE_EQ(s.share_ge_three_quarters, (2 + 1) / 36.0);    // i >= 6
  EXPECT_DOUBLE_EQ(s.share_le_half, (8 + 7 + 6 + 5 + 4) / 36.0);  // i <= 4
  EXPECT_EQ(s.largest_i_with_k, 5);                                // f(5) = 3
}

TEST(PositionFrequencyTest, JsonAndHistogramRoundTrip) {
  PositionFrequency pf(64);
  pf.AddSegment(3, 5);
  pf.AddSegment(64, 2);
  absl::StatusOr<PositionFrequency> back = PositionFrequency::FromJson(pf.ToJson());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->Counts(), pf.Counts());
  PositionFrequency other(64);
  ASSERT_TRUE(other.SetHistogramFromDoubles(pf.HistogramAsDoubles()).ok());
  EXPECT_EQ(other.Counts(), pf.Counts());
  EXPECT_FALSE(PositionFrequency::FromJson(nlohmann::json{{"max_len", 4}, {"lengths", {{9, 1}}}}).ok());
  EXPECT_FALSE(other.SetHistogramFromDoubles(std::vector<double>(65, 0.5)).ok());
  // Binned counts keep the total.
  double total = 0;
  for (const auto& b : BinnedCounts(pf.Counts())) total += b[2].get<double>();
  EXPECT_EQ(total, pf.Summarize(1).total_pairs);
}

// Counting from cu_seqlens of packed batches equals Eq. 2 over segments
// recovered independently from the positions (a segment starts where the
// position is 0), with and without document masking.
TEST(PositionFrequencyTest, PackedBatchesWithAndWithoutDocumentMask) {
  ::longctx::testing::TempDir tmp;
  TokenFileWriter w;
  ASSERT_TRUE(w.Open(tmp / "t.ltok", ByteTokenizer::kVocabSize, "byte").ok());
  std::mt19937 rng(test::FreshSeed(9));
  std::geometric_distribution<int> doc_len(0.02);
  for (int d = 0; d < 300; ++d) {
    std::vector<int32_t> doc(1 + doc_len(rng), 65);
    doc.push_back(ByteTokenizer::kEos);
    ASSERT_TRUE(w.AddDocument(doc).ok());
  }
  ASSERT_TRUE(w.Finish().ok());
  absl::StatusOr<TokenFileReader> reader = TokenFileReader::Open(tmp / "t.ltok");
  ASSERT_TRUE(reader.ok());
  for (bool mask : {true, false}) {
    PackerOptions o;
    o.seq_len = 64;
    o.batch_size = 3;
    o.document_mask = mask;
    o.split = PackerSplit::kAll;
    absl::StatusOr<Packer> packer = Packer::Create(&*reader, o);
    ASSERT_TRUE(packer.ok());
    PositionFrequency pf(64);
    std::vector<int64_t> segs;
    for (int b = 0; b < 40; ++b) {
      absl::StatusOr<PackedBatch> batch = packer->Next();
      ASSERT_TRUE(batch.ok());
      pf.AddCuSeqlens(batch->cu_seqlens);
      int64_t run = 0;
      for (size_t t = 0; t < batch->positions.size(); ++t) {
        if (batch->positions[t] == 0 && run > 0) segs.push_back(run), run = 0;
        ++run;
      }
      segs.push_back(run);
    }
    if (!mask) {
      for (int64_t s : segs) ASSERT_EQ(s, 64);  // one segment per row
    }
    for (int64_t w : {0, 16}) {
      const std::vector<double> want = BruteForce(segs, 64, w), got = pf.Counts(w);
      for (int64_t i = 0; i < 64; ++i) ASSERT_EQ(got[i], want[i]) << "mask " << mask << " i " << i;
    }
    // Masking makes long distances rarer: the share of i >= L/2 drops.
    if (mask) EXPECT_LT(pf.Summarize(1).share_ge_half, 0.25);
    else EXPECT_NEAR(pf.Summarize(1).share_ge_half, (32.0 * 33 / 2) / (64.0 * 65 / 2), 1e-12);
  }
}

}  // namespace
}  // namespace longctx
