// Why: issue 45 asks that the most loaded rank of a context-parallel group do
// at most 1.1 × the mean attention work, on causal rows and on packed rows of
// natural document lengths, for C = 2, 4, 8 at T = 4,096 … 65,536. No
// helper gives real corpus document lengths here (the demo corpus is built
// from Brown samples of ~2,000 words each, not a natural spread), so packed
// rows draw lengths from a long-tailed log-normal: median e^5.98 ≈ 400
// tokens, σ = 1.4, mean ≈ 1,060 tokens, i.e. most documents far shorter than
// a chunk and a few longer than the whole row; each row starts mid-document
// as the packer's rows do. The test also pins down why the balanced
// assignment exists: the 2C zig-zag fails 1.1 on such rows.
#include "data/context_balance.h"

#include <cmath>
#include <cstdio>
#include <random>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace longctx {
namespace {

PackedBatch RowOfSegments(int32_t T, const std::vector<int32_t>& lengths) {
  PackedBatch b;
  b.batch_size = 1;
  b.seq_len = T;
  b.cu_seqlens.push_back(0);
  for (int32_t len : lengths) {
    for (int32_t i = 0; i < len; ++i) b.inputs.push_back(1), b.targets.push_back(1), b.positions.push_back(i);
    b.cu_seqlens.push_back(b.cu_seqlens.back() + len);
    b.max_seqlen = std::max(b.max_seqlen, len);
  }
  b.num_target_tokens = T;
  return b;
}

int32_t LogNormalLength(std::mt19937_64* rng) {
  std::lognormal_distribution<double> d(5.98, 1.4);
  return 1 + static_cast<int32_t>(std::min(d(*rng), 1e7));
}

// A packed row: the tail of one document (uniform offset into it), then whole
// documents, the last one cut at T.
PackedBatch NaturalRow(int32_t T, std::mt19937_64* rng) {
  std::vector<int32_t> lengths;
  const int32_t first = LogNormalLength(rng);
  int32_t left = T, len = 1 + static_cast<int32_t>((*rng)() % first);
  while (left > 0) {
    len = std::min(len, left);
    lengths.push_back(len);
    left -= len;
    len = LogNormalLength(rng);
  }
  return RowOfSegments(T, lengths);
}

TEST(ContextBalanceTest, VisiblePairsClosedFormMatchesCount) {
  for (int32_t w : {0, 1, 3, 8, 50})
    for (int64_t b = 0; b < 20; ++b)
      for (int64_t e = b; e < 40; ++e) {
        int64_t n = 0;
        for (int64_t i = b; i < e; ++i) n += w == 0 ? i + 1 : std::min<int64_t>(i + 1, w);
        ASSERT_EQ(VisiblePairs(b, e, w), n) << b << " " << e << " " << w;
      }
}

TEST(ContextBalanceTest, ShardWorkEqualsChunkWork) {
  // Two independent counts: per token from a shard's metadata, per chunk in
  // closed form from cu_seqlens. Any split and any window.
  std::mt19937_64 rng(3);
  for (int trial = 0; trial < 30; ++trial) {
    const int32_t C = 1 + trial % 4, T = 512 * C;
    PackedBatch b = NaturalRow(T, &rng);
    const std::vector<int32_t> windows = {0, 64, 1000};
    absl::StatusOr<ContextAssignment> z = ZigZagAssignment(T, C);
    absl::StatusOr<ContextAssignment> g = BalancedAssignment(b, 0, C, 4, windows);
    ASSERT_TRUE(z.ok() && g.ok()) << g.status();
    for (const ContextAssignment* a : {&*z, &*g}) {
      const std::vector<int64_t> work = RankAttentionWork(b, 0, *a, windows);
      for (int32_t r = 0; r < C; ++r) {
        absl::StatusOr<ContextShard> s = SplitRowForContext(b, 0, *a, r);
        ASSERT_TRUE(s.ok());
        EXPECT_EQ(ShardAttentionWork(*s, windows), work[r]) << "rank " << r;
      }
    }
  }
}

TEST(ContextBalanceTest, ZigZagBalancesOneCausalDocument) {
  for (int32_t T : {4096, 8192, 16384, 32768, 65536})
    for (int32_t C : {2, 4, 8}) {
      PackedBatch b = RowOfSegments(T, {T});
      absl::StatusOr<ContextAssignment> a = ZigZagAssignment(T, C);
      ASSERT_TRUE(a.ok());
      EXPECT_LE(MaxOverMean(RankAttentionWork(b, 0, *a, {0})), 1.1) << "T " << T << " C " << C;
    }
}

TEST(ContextBalanceTest, WindowedLayersOfOneDocument) {
  // A window makes work flat after the first w tokens, so the zig-zag's rank
  // 0 (chunk 0: the ramp, plus a flat chunk) is light when chunks are short
  // next to w; the balanced assignment is not. Printed for the zig-zag,
  // asserted for the balanced assignment.
  for (const std::vector<int32_t>& windows : {std::vector<int32_t>{1024}, std::vector<int32_t>{0, 4096, 4096, 4096}})
    for (int32_t T : {4096, 16384, 65536})
      for (int32_t C : {2, 4, 8}) {
        PackedBatch b = RowOfSegments(T, {T});
        absl::StatusOr<ContextAssignment> z = ZigZagAssignment(T, C), g = BalancedAssignment(b, 0, C, 8, windows);
        ASSERT_TRUE(z.ok() && g.ok());
        const double zr = MaxOverMean(RankAttentionWork(b, 0, *z, windows)),
                     gr = MaxOverMean(RankAttentionWork(b, 0, *g, windows));
        std::printf("one document, %s, T %6d C %d: zig-zag %.3f balanced(8/rank) %.3f\n",
                    windows.size() == 1 ? "SWA 1024" : "full + 3 SWA 4096", T, C, zr, gr);
        EXPECT_LE(gr, 1.1) << "T " << T << " C " << C;
      }
}

// The worst max/mean over `rows` natural rows for an assignment maker.
template <typename Make>
double WorstOverRows(int32_t T, int32_t C, int rows, uint64_t seed, const std::vector<int32_t>& windows, Make make) {
  std::mt19937_64 rng(seed);
  double worst = 0;
  for (int i = 0; i < rows; ++i) {
    PackedBatch b = NaturalRow(T, &rng);
    absl::StatusOr<ContextAssignment> a = make(b);
    EXPECT_TRUE(a.ok()) << a.status();
    if (!a.ok()) return 1e9;
    EXPECT_TRUE(ValidateContextAssignment(*a, T).ok());
    worst = std::max(worst, MaxOverMean(RankAttentionWork(b, 0, *a, windows)));
  }
  return worst;
}

TEST(ContextBalanceTest, PackedNaturalRows) {
  // chunks_per_rank 8 (8C equal chunks) is the smallest that stays under 1.1
  // on these rows; the zig-zag (2 chunks per rank) does not.
  const std::vector<int32_t> full = {0};
  double zig_worst = 0;
  for (int32_t T : {4096, 8192, 16384, 32768, 65536})
    for (int32_t C : {2, 4, 8}) {
      const int rows = T >= 65536 ? 12 : 40;
      const double zig = WorstOverRows(T, C, rows, 11 + T + C, full, [&](const PackedBatch& b) {
        return ZigZagAssignment(b.seq_len, C);
      });
      const double bal4 = WorstOverRows(T, C, rows, 11 + T + C, full, [&](const PackedBatch& b) {
        return BalancedAssignment(b, 0, C, 4, full);
      });
      const double bal8 = WorstOverRows(T, C, rows, 11 + T + C, full, [&](const PackedBatch& b) {
        return BalancedAssignment(b, 0, C, 8, full);
      });
      const double bal8_mixed = WorstOverRows(T, C, rows, 11 + T + C, {0, 4096, 4096, 4096}, [&](const PackedBatch& b) {
        return BalancedAssignment(b, 0, C, 8, {0, 4096, 4096, 4096});
      });
      std::printf("T %6d C %d  worst max/mean over %2d rows: zig-zag %.3f  balanced(4/rank) %.3f  "
                  "balanced(8/rank) %.3f  (full+3 SWA-4096 layers: %.3f)\n",
                  T, C, rows, zig, bal4, bal8, bal8_mixed);
      zig_worst = std::max(zig_worst, zig);
      EXPECT_LE(bal8, 1.1) << "T " << T << " C " << C;
      EXPECT_LE(bal8_mixed, 1.1) << "T " << T << " C " << C;
      EXPECT_LE(bal8, zig) << "T " << T << " C " << C;
    }
  EXPECT_GT(zig_worst, 1.1) << "the zig-zag alone balances these rows: the balanced assignment is not needed";
}

TEST(ContextBalanceTest, HaloPriceOfTheBalancedAssignment) {
  // More pieces mean more piece edges, so a sliding-window layer needs more
  // keys from other ranks (document starts cut the halo on packed rows).
  // Printed: the most any rank must receive per row, zig-zag beside the
  // balanced assignment (8 chunks per rank). Asserted: never more than the
  // other ranks' tokens, and the zig-zag's within 2 (w − 1).
  std::mt19937_64 rng(5);
  for (int32_t T : {8192, 32768, 65536})
    for (int32_t C : {2, 4, 8}) {
      PackedBatch b = NaturalRow(T, &rng);
      absl::StatusOr<ContextAssignment> z = ZigZagAssignment(T, C), g = BalancedAssignment(b, 0, C, 8, {0});
      ASSERT_TRUE(z.ok() && g.ok());
      std::string line = absl::StrFormat("T %6d C %d  keys to receive (max over ranks), zig-zag / balanced:", T, C);
      for (int32_t w : {1024, 4096, 0}) {
        int64_t zmax = 0, gmax = 0;
        for (int32_t r = 0; r < C; ++r) {
          absl::StatusOr<ContextShard> zs = SplitRowForContext(b, 0, *z, r), gs = SplitRowForContext(b, 0, *g, r);
          ASSERT_TRUE(zs.ok() && gs.ok());
          zmax = std::max(zmax, ContextKeysToReceiveCount(*zs, w));
          gmax = std::max(gmax, ContextKeysToReceiveCount(*gs, w));
        }
        EXPECT_LE(gmax, T - T / C);
        if (w > 0) {
          EXPECT_LE(zmax, 2 * (w - 1));
        }
        line += absl::StrFormat("  %s %d / %d", w == 0 ? "full" : absl::StrCat("w=", w), zmax, gmax);
      }
      std::printf("%s\n", line.c_str());
    }
}

TEST(ContextBalanceTest, BalancedAssignmentOnOneCausalDocument) {
  for (int32_t T : {4096, 65536})
    for (int32_t C : {2, 4, 8}) {
      PackedBatch b = RowOfSegments(T, {T});
      absl::StatusOr<ContextAssignment> a = BalancedAssignment(b, 0, C, 8, {0});
      ASSERT_TRUE(a.ok());
      EXPECT_LE(MaxOverMean(RankAttentionWork(b, 0, *a, {0})), 1.1) << "T " << T << " C " << C;
    }
  PackedBatch b = RowOfSegments(100, {100});
  EXPECT_FALSE(BalancedAssignment(b, 0, 4, 8, {0}).ok());  // 100 % 32
}

}  // namespace
}  // namespace longctx
