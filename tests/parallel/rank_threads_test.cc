// Why: ranks × threads must not oversubscribe a node silently; these pin the
// default (cores / local ranks), the error naming the numbers, and --force.
#include "train/parallel/rank_threads.h"

#include "gtest/gtest.h"

namespace longctx {
namespace {

TEST(RankThreadsTest, DefaultSplitsCoresAmongLocalRanks) {
  EXPECT_EQ(ChooseThreadsPerRank(0, 2, 16, false)->threads, 8);
  EXPECT_EQ(ChooseThreadsPerRank(0, 4, 2, false)->threads, 1);
  EXPECT_FALSE(ChooseThreadsPerRank(0, 4, 2, false)->warning.empty());
  EXPECT_TRUE(ChooseThreadsPerRank(0, 2, 2, false)->warning.empty());
}

TEST(RankThreadsTest, OversubscriptionIsAnErrorUnlessForced) {
  absl::StatusOr<RankThreads> r = ChooseThreadsPerRank(2, 2, 2, false);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.status().message()).find("2 ranks on this node x 2 threads per rank = 4 threads for 2 cores"),
            std::string::npos)
      << r.status();
  r = ChooseThreadsPerRank(2, 2, 2, true);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->threads, 2);
  EXPECT_NE(r->warning.find("4 threads for 2 cores"), std::string::npos);
  EXPECT_TRUE(ChooseThreadsPerRank(1, 2, 2, false).ok());
}

}  // namespace
}  // namespace longctx
