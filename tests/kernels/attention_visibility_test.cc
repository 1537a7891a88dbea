// Why: kernels/math/attention_visibility.h is the one visibility rule of the
// CPU and CUDA attention kernels, the KV cache and the analyses; the kernels
// also skip whole tiles from its ranges, so a rule that is wrong by one key at
// a window edge, a diagonal offset or a short query segment would be wrong
// everywhere at once. This test enumerates every small case — segment sizes
// Lq <= Lk, windows 0..Lk+1, offsets 0..Lk+1, segments that do not start at 0
// — and compares the predicate, a query's key range and a key's query range
// with a brute-force definition written here from the words of ops.h, not
// from the header.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/math/attention_visibility.h"

namespace longctx {
namespace {

// ops.h: segment of Lq queries and Lk keys; query r sits at key index
// Lk - Lq + r; it sees key j (0 <= j < Lk) when j is at most r's key index
// minus the offset and, with a window w > 0, fewer than w keys back.
bool BruteSees(int64_t lq, int64_t lk, int window, int offset, int64_t r, int64_t j) {
  if (j < 0 || j >= lk || r < 0 || r >= lq) return false;
  const int64_t distance = (lk - lq + r) - j;
  if (distance < offset) return false;
  return window == 0 || distance < window;
}

std::string Where(int64_t lq, int64_t lk, int window, int offset, int64_t r, int64_t j) {
  return "Lq=" + std::to_string(lq) + " Lk=" + std::to_string(lk) + " window=" + std::to_string(window) +
         " offset=" + std::to_string(offset) + " row=" + std::to_string(r) + " key=" + std::to_string(j);
}

// Absolute placements of the segment: queries start at q0, keys at k0.
constexpr int64_t kPlacements[][2] = {{0, 0}, {3, 11}, {17, 2}};
constexpr int kMaxKeys = 9;

TEST(AttentionVisibility, PredicateMatchesBruteForce) {
  int64_t checked = 0;
  for (const auto& pl : kPlacements)
    for (int64_t lk = 1; lk <= kMaxKeys; ++lk)
      for (int64_t lq = 1; lq <= lk; ++lq)
        for (int window = 0; window <= lk + 1; ++window)
          for (int offset = 0; offset <= lk + 1; ++offset) {
            const math::AttentionMask m{window, offset};
            const int64_t q0 = pl[0], k0 = pl[1], q_end = q0 + lq, k_end = k0 + lk;
            for (int64_t r = 0; r < lq; ++r) {
              const int64_t p = math::QueryKeyIndex(q0 + r, q_end, k_end);
              ASSERT_EQ(p, k0 + lk - lq + r) << Where(lq, lk, window, offset, r, 0);
              for (int64_t j = 0; j < lk; ++j) {
                ASSERT_EQ(math::KeyVisible(m, k0, p, k0 + j), BruteSees(lq, lk, window, offset, r, j))
                    << Where(lq, lk, window, offset, r, j);
                ++checked;
              }
            }
          }
  EXPECT_GT(checked, 10000);
}

// The key range [FirstVisibleKey, EndVisibleKey) of every query is exactly
// the set of keys it sees (empty iff it sees none), lies inside the segment
// when not empty, and both ends are nondecreasing over the rows — what lets a
// block of rows take its keys from its first row's start to its last row's end.
TEST(AttentionVisibility, KeyRangeIsExactAndMonotone) {
  for (const auto& pl : kPlacements)
    for (int64_t lk = 1; lk <= kMaxKeys; ++lk)
      for (int64_t lq = 1; lq <= lk; ++lq)
        for (int window = 0; window <= lk + 1; ++window)
          for (int offset = 0; offset <= lk + 1; ++offset) {
            const math::AttentionMask m{window, offset};
            const int64_t q0 = pl[0], k0 = pl[1], q_end = q0 + lq, k_end = k0 + lk;
            int64_t prev_lo = INT64_MIN, prev_hi = INT64_MIN;
            for (int64_t r = 0; r < lq; ++r) {
              const int64_t p = math::QueryKeyIndex(q0 + r, q_end, k_end);
              const int64_t lo = math::FirstVisibleKey(m, k0, p), hi = math::EndVisibleKey(m, p);
              const std::string at = Where(lq, lk, window, offset, r, -1);
              std::vector<int64_t> seen, ranged;
              for (int64_t j = 0; j < lk; ++j)
                if (BruteSees(lq, lk, window, offset, r, j)) seen.push_back(k0 + j);
              for (int64_t j = lo; j < hi; ++j) ranged.push_back(j);
              ASSERT_EQ(ranged, seen) << at << " range [" << lo << ", " << hi << ")";
              ASSERT_GE(lo, k0) << at;
              ASSERT_LE(hi, k_end) << at;
              ASSERT_GE(lo, prev_lo) << at;
              ASSERT_GE(hi, prev_hi) << at;
              prev_lo = lo;
              prev_hi = hi;
            }
          }
}

// The queries that see key j are exactly the rows whose key index lies in
// [FirstQuerySeeing(j), EndQuerySeeing(k_end, j)) (clamped to the segment's
// queries), and both ends are nondecreasing in j, so a block of keys is seen
// only by the rows from its first key's start to its last key's end.
TEST(AttentionVisibility, QueryRangeIsExactAndMonotone) {
  for (const auto& pl : kPlacements)
    for (int64_t lk = 1; lk <= kMaxKeys; ++lk)
      for (int64_t lq = 1; lq <= lk; ++lq)
        for (int window = 0; window <= lk + 1; ++window)
          for (int offset = 0; offset <= lk + 1; ++offset) {
            const math::AttentionMask m{window, offset};
            const int64_t q0 = pl[0], k0 = pl[1], q_end = q0 + lq, k_end = k0 + lk;
            const int64_t first_row_index = math::QueryKeyIndex(q0, q_end, k_end);
            int64_t prev_lo = INT64_MIN, prev_hi = INT64_MIN;
            for (int64_t j = 0; j < lk; ++j) {
              const int64_t lo = math::FirstQuerySeeing(m, k0 + j), hi = math::EndQuerySeeing(m, k_end, k0 + j);
              const std::string at = Where(lq, lk, window, offset, -1, j);
              std::vector<int64_t> seeing, ranged;
              for (int64_t r = 0; r < lq; ++r)
                if (BruteSees(lq, lk, window, offset, r, j)) seeing.push_back(r);
              for (int64_t p = std::max(lo, first_row_index); p < hi; ++p) ranged.push_back(p - first_row_index);
              ASSERT_EQ(ranged, seeing) << at << " range [" << lo << ", " << hi << ")";
              ASSERT_LE(hi, k_end) << at;
              ASSERT_GE(lo, prev_lo) << at;
              ASSERT_GE(hi, prev_hi) << at;
              prev_lo = lo;
              prev_hi = hi;
            }
          }
}

// Training's plain cases in the words of the kernels' old comments: causal
// (window 0) sees [segment start, i]; a window w sees i - w < j <= i.
TEST(AttentionVisibility, TrainingCasesSpelledOut) {
  const math::AttentionMask causal{0, 0}, window4{4, 0};
  EXPECT_EQ(math::FirstVisibleKey(causal, 10, 15), 10);
  EXPECT_EQ(math::EndVisibleKey(causal, 15), 16);
  EXPECT_EQ(math::FirstVisibleKey(window4, 10, 15), 12);
  EXPECT_EQ(math::FirstVisibleKey(window4, 10, 11), 10);
  EXPECT_EQ(math::EndQuerySeeing(window4, 20, 12), 16);
  EXPECT_EQ(math::EndQuerySeeing(window4, 20, 18), 20);
  EXPECT_EQ(math::EndQuerySeeing(causal, 20, 12), 20);
  // A decode step: 1 query, 7 keys, at key index 6; offset 2 sees keys 0..4.
  const math::AttentionMask shifted{0, 2};
  const int64_t p = math::QueryKeyIndex(0, 1, 7);
  EXPECT_EQ(p, 6);
  EXPECT_EQ(math::FirstVisibleKey(shifted, 0, p), 0);
  EXPECT_EQ(math::EndVisibleKey(shifted, p), 5);
  // An offset past the window leaves nothing.
  const math::AttentionMask none{2, 3};
  EXPECT_LE(math::EndVisibleKey(none, 6), math::FirstVisibleKey(none, 0, 6));
}

}  // namespace
}  // namespace longctx
