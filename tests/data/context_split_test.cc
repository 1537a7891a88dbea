// Why: a context-parallel split that loses, duplicates or misplaces one token,
// target, position or segment edge trains a different model without any error.
// These tests cut fresh random packings (documents longer than a chunk and
// spanning 3+ chunks, one-token documents, rows that start mid-document) and
// require that every rank's pieces, put back in chunk order, are the row
// exactly, and that the metadata attention reads (global offsets, document
// starts, continuation flags) agrees with the row's own segments.
#include "data/context_split.h"

#include <algorithm>
#include <map>
#include <random>
#include <set>

#include <gtest/gtest.h>

#include "train/batch_source.h"

namespace longctx {
namespace {

// One batch of `rows` rows of T tokens whose segments have the given lengths
// (their sum is rows × T; a segment never crosses a row edge: the caller
// breaks lengths at row edges), positions restarting at every segment,
// targets random with about 1 in 5 being −1 (no loss).
PackedBatch MakeBatch(int32_t rows, int32_t T, const std::vector<int32_t>& lengths, std::mt19937* rng) {
  PackedBatch b;
  b.batch_size = rows;
  b.seq_len = T;
  b.cu_seqlens.push_back(0);
  for (int32_t len : lengths) {
    for (int32_t i = 0; i < len; ++i) {
      b.inputs.push_back(static_cast<int32_t>((*rng)() % 32000));
      b.positions.push_back(i);
      b.targets.push_back((*rng)() % 5 == 0 ? -1 : static_cast<int32_t>((*rng)() % 32000));
    }
    b.cu_seqlens.push_back(b.cu_seqlens.back() + len);
    b.max_seqlen = std::max(b.max_seqlen, len);
  }
  for (int32_t t : b.targets) b.num_target_tokens += t >= 0;
  return b;
}

// Document lengths filling `rows` rows of T, cut at row edges: a mix of
// one-token documents, short ones, and long ones (up to 3.5 rows' worth of
// chunks, so several span 3+ chunks and continue across rows).
std::vector<int32_t> RandomLengths(int32_t rows, int32_t T, int32_t chunk, std::mt19937* rng) {
  std::vector<int32_t> out;
  for (int32_t r = 0; r < rows; ++r) {
    int32_t left = T;
    int32_t carry = out.empty() ? 0 : static_cast<int32_t>((*rng)() % (2 * chunk + 1));  // continued document
    while (left > 0) {
      int32_t len;
      if (carry > 0) {
        len = carry, carry = 0;
      } else {
        switch ((*rng)() % 4) {
          case 0: len = 1; break;
          case 1: len = 1 + static_cast<int32_t>((*rng)() % chunk); break;
          case 2: len = chunk + static_cast<int32_t>((*rng)() % (3 * chunk)); break;
          default: len = 1 + static_cast<int32_t>((*rng)() % 7); break;
        }
      }
      len = std::min(len, left);
      out.push_back(len);
      left -= len;
    }
  }
  return out;
}

// Every rank's pieces back in chunk order must be row `row` of `batch`.
void ExpectReassemblesRow(const PackedBatch& batch, int32_t row, const ContextAssignment& a,
                          const std::vector<ContextShard>& shards) {
  const int32_t T = batch.seq_len, C = a.cp;
  const int64_t base = int64_t{row} * T;
  std::vector<int32_t> inputs(T, -7), targets(T, -7), positions(T, -7);
  std::vector<int> covered(T, 0);
  std::set<int32_t> starts;  // global segment starts rebuilt from the shards' document ranges
  for (int32_t r = 0; r < C; ++r) {
    const ContextShard& s = shards[r];
    ASSERT_EQ(s.num_tokens(), T / C) << "rank " << r;
    ASSERT_EQ(s.targets.size(), s.inputs.size());
    ASSERT_EQ(s.positions.size(), s.inputs.size());
    ASSERT_EQ(s.cu_seqlens.front(), 0);
    ASSERT_EQ(s.cu_seqlens.back(), s.num_tokens());
    ASSERT_EQ(s.segment_doc_begin.size() + 1, s.cu_seqlens.size());
    int64_t tt = 0;
    for (int32_t t : s.targets) tt += t >= 0;
    EXPECT_EQ(s.num_target_tokens, tt);
    int32_t local = 0, chunks = 0;
    for (const ContextPiece& p : s.pieces) {
      ASSERT_EQ(p.local_begin, local);
      ASSERT_EQ(p.global_begin, p.first_chunk * s.chunk_len);
      ASSERT_EQ(p.length, p.num_chunks * s.chunk_len);
      for (int32_t c = p.first_chunk; c < p.first_chunk + p.num_chunks; ++c) EXPECT_EQ(a.OwnerOf(c), r);
      chunks += p.num_chunks;
      for (int32_t i = 0; i < p.length; ++i) {
        const int32_t g = p.global_begin + i;
        ++covered[g];
        inputs[g] = s.inputs[local + i];
        targets[g] = s.targets[local + i];
        positions[g] = s.positions[local + i];
        EXPECT_EQ(s.GlobalPosition(local + i), g);
      }
      // Local segments of the piece tile it; the first and last carry the flags.
      ASSERT_GE(p.num_segments, 1);
      EXPECT_EQ(s.cu_seqlens[p.first_segment], p.local_begin);
      EXPECT_EQ(s.cu_seqlens[p.first_segment + p.num_segments], p.local_begin + p.length);
      const int32_t first = p.first_segment, last = p.first_segment + p.num_segments - 1;
      EXPECT_EQ(p.first_doc_begin, s.segment_doc_begin[first]);
      EXPECT_EQ(p.continues_from_previous, s.segment_doc_begin[first] < p.global_begin);
      EXPECT_EQ(p.last_doc_begin, s.segment_doc_begin[last]);
      EXPECT_EQ(p.continues_into_next, s.segment_doc_end[last] > p.global_end());
      for (int32_t k = first; k <= last; ++k) {
        const int32_t gb = s.GlobalPosition(s.cu_seqlens[k]), len = s.cu_seqlens[k + 1] - s.cu_seqlens[k];
        EXPECT_LE(s.segment_doc_begin[k], gb);
        EXPECT_GE(s.segment_doc_end[k], gb + len);
        if (k > first) {
          EXPECT_EQ(s.segment_doc_begin[k], gb) << "only a piece's first segment may continue";
        }
        if (k < last) {
          EXPECT_EQ(s.segment_doc_end[k], gb + len) << "only a piece's last segment may go on";
        }
        // Positions count per document, as in the row: offset from the document start.
        EXPECT_EQ(s.positions[s.cu_seqlens[k]], gb - s.segment_doc_begin[k]);
        starts.insert(s.segment_doc_begin[k]);
        starts.insert(s.segment_doc_end[k]);
      }
      local += p.length;
    }
    EXPECT_EQ(chunks, a.chunks_per_rank());
  }
  for (int32_t g = 0; g < T; ++g) ASSERT_EQ(covered[g], 1) << "token " << g;
  EXPECT_EQ(inputs, std::vector<int32_t>(batch.inputs.begin() + base, batch.inputs.begin() + base + T));
  EXPECT_EQ(targets, std::vector<int32_t>(batch.targets.begin() + base, batch.targets.begin() + base + T));
  EXPECT_EQ(positions, std::vector<int32_t>(batch.positions.begin() + base, batch.positions.begin() + base + T));
  std::set<int32_t> row_starts;
  for (int32_t c : batch.cu_seqlens)
    if (c >= base && c <= base + T) row_starts.insert(static_cast<int32_t>(c - base));
  EXPECT_EQ(starts, row_starts);
}

TEST(ContextSplitTest, ZigZagHoldsChunksRAndMirror) {
  absl::StatusOr<ContextAssignment> a = ZigZagAssignment(64, 4);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->num_chunks, 8);
  EXPECT_EQ(a->chunks_of_rank, (std::vector<std::vector<int32_t>>{{0, 7}, {1, 6}, {2, 5}, {3, 4}}));
  EXPECT_TRUE(ValidateContextAssignment(*a, 64).ok());
}

TEST(ContextSplitTest, RefusesRowsNotDivisibleBy2C) {
  absl::StatusOr<ContextAssignment> a = ZigZagAssignment(100, 4);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("seq_len 100 is not divisible by 2 x cp = 8"), std::string::npos)
      << a.status();
  EXPECT_FALSE(ZigZagAssignment(64, 0).ok());
  ContextAssignment bad{.cp = 2, .num_chunks = 4, .chunks_of_rank = {{0, 1}, {1, 3}}};
  EXPECT_FALSE(ValidateContextAssignment(bad, 64).ok());  // chunk 1 twice, chunk 2 never
  bad.chunks_of_rank = {{0, 1, 2}, {3}};
  EXPECT_FALSE(ValidateContextAssignment(bad, 64).ok());  // unequal token counts
  std::mt19937 rng(1);
  PackedBatch b = MakeBatch(1, 60, {60}, &rng);
  ContextAssignment z{.cp = 4, .num_chunks = 8, .chunks_of_rank = {{0, 7}, {1, 6}, {2, 5}, {3, 4}}};
  EXPECT_FALSE(SplitRowForContext(b, 0, z, 0).ok());  // 60 % 8 != 0
}

TEST(ContextSplitTest, OneRankIsTheRowUnchanged) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 20; ++trial) {
    const int32_t T = 64 * (1 + trial % 4);
    PackedBatch b = MakeBatch(2, T, RandomLengths(2, T, T / 2, &rng), &rng);
    ASSERT_TRUE(ValidatePackedBatch(b).ok());
    absl::StatusOr<ContextAssignment> a = ZigZagAssignment(T, 1);
    ASSERT_TRUE(a.ok());
    for (int32_t row = 0; row < 2; ++row) {
      absl::StatusOr<ContextShard> s = SplitRowForContext(b, row, *a, 0);
      ASSERT_TRUE(s.ok()) << s.status();
      const PackedBatch want = SliceRows(b, row, 1);
      EXPECT_EQ(s->inputs, want.inputs);
      EXPECT_EQ(s->targets, want.targets);
      EXPECT_EQ(s->positions, want.positions);
      EXPECT_EQ(s->cu_seqlens, want.cu_seqlens);
      EXPECT_EQ(s->max_seqlen, want.max_seqlen);
      EXPECT_EQ(s->num_target_tokens, want.num_target_tokens);
      ASSERT_EQ(s->pieces.size(), 1u);
      EXPECT_FALSE(s->pieces[0].continues_from_previous);
      EXPECT_FALSE(s->pieces[0].continues_into_next);
    }
  }
}

TEST(ContextSplitTest, RanksReassembleRandomPackings) {
  std::mt19937 rng(2026);
  int spanning3 = 0, one_token = 0;
  for (int32_t C : {2, 3, 4, 8}) {
    for (int trial = 0; trial < 25; ++trial) {
      const int32_t chunk = 1 + static_cast<int32_t>(rng() % 24), T = 2 * C * chunk;
      const std::vector<int32_t> lengths = RandomLengths(3, T, chunk, &rng);
      for (int32_t len : lengths) spanning3 += len > 2 * chunk, one_token += len == 1;
      PackedBatch b = MakeBatch(3, T, lengths, &rng);
      ASSERT_TRUE(ValidatePackedBatch(b).ok()) << ValidatePackedBatch(b);
      absl::StatusOr<ContextAssignment> a = ZigZagAssignment(T, C);
      ASSERT_TRUE(a.ok());
      for (int32_t row = 0; row < 3; ++row) {
        absl::StatusOr<std::vector<ContextShard>> shards = SplitRowForAllRanks(b, row, *a);
        ASSERT_TRUE(shards.ok()) << shards.status();
        SCOPED_TRACE(testing::Message() << "C " << C << " T " << T << " trial " << trial << " row " << row);
        ExpectReassemblesRow(b, row, *a, *shards);
        // The zig-zag's rank C-1 holds chunks C-1 and C as one piece; every other rank two.
        for (int32_t r = 0; r < C; ++r) EXPECT_EQ((*shards)[r].pieces.size(), r == C - 1 ? 1u : 2u);
      }
    }
  }
  EXPECT_GT(spanning3, 50);  // the packings did exercise documents over 3+ chunks
  EXPECT_GT(one_token, 50);  // and one-token documents
}

TEST(ContextSplitTest, ArbitraryAssignmentsReassemble) {
  // Any valid assignment, not only the zig-zag (data/context_balance.h deals
  // finer chunks by work): random permutations of 4C chunks.
  std::mt19937 rng(99);
  for (int trial = 0; trial < 40; ++trial) {
    const int32_t C = 1 + trial % 5, K = 4 * C, chunk = 1 + static_cast<int32_t>(rng() % 9), T = K * chunk;
    PackedBatch b = MakeBatch(1, T, RandomLengths(1, T, chunk, &rng), &rng);
    std::vector<int32_t> perm(K);
    for (int32_t i = 0; i < K; ++i) perm[i] = i;
    std::shuffle(perm.begin(), perm.end(), rng);
    ContextAssignment a{.cp = C, .num_chunks = K, .chunks_of_rank = std::vector<std::vector<int32_t>>(C)};
    for (int32_t i = 0; i < K; ++i) a.chunks_of_rank[i % C].push_back(perm[i]);
    for (auto& cs : a.chunks_of_rank) std::sort(cs.begin(), cs.end());
    absl::StatusOr<std::vector<ContextShard>> shards = SplitRowForAllRanks(b, 0, a);
    ASSERT_TRUE(shards.ok()) << shards.status();
    SCOPED_TRACE(testing::Message() << "C " << C << " T " << T << " trial " << trial);
    ExpectReassemblesRow(b, 0, a, *shards);
  }
}

// Documents of given lengths with token ids that name their place, for the packer.
class LengthsSource final : public DocumentSource {
 public:
  explicit LengthsSource(std::vector<int64_t> lengths) : lengths_(std::move(lengths)) {
    for (int64_t l : lengths_) total_ += l;
  }
  int64_t n_docs() const override { return static_cast<int64_t>(lengths_.size()); }
  int64_t n_tokens() const override { return total_; }
  int64_t vocab_size() const override { return 1 << 20; }
  int64_t doc_length(int64_t doc) const override { return lengths_[doc]; }
  void ReadTokens(int64_t doc, int64_t start, int64_t count, int32_t* out) const override {
    for (int64_t i = 0; i < count; ++i) out[i] = static_cast<int32_t>((doc * 7919 + start + i) % (1 << 20));
  }
  std::string source_name() const override { return "lengths"; }

 private:
  std::vector<int64_t> lengths_;
  int64_t total_ = 0;
};

TEST(ContextSplitTest, ThePackersRowsReassemble) {
  // Rows exactly as training packs them (document_mask on: segments and
  // positions restart per document, EOS targets −1; off: one segment per row).
  std::mt19937 rng(17);
  std::vector<int64_t> lengths;
  for (int i = 0; i < 400; ++i) lengths.push_back(i % 9 == 0 ? 1 : 1 + static_cast<int64_t>(rng() % (i % 5 == 0 ? 700 : 60)));
  LengthsSource source(lengths);
  for (bool mask : {true, false})
    for (int32_t C : {1, 2, 4, 8}) {
      PackerOptions o;
      o.seq_len = 256;
      o.batch_size = 3;
      o.document_mask = mask;
      o.eval_fraction = 0;
      absl::StatusOr<Packer> packer = Packer::Create(&source, o);
      ASSERT_TRUE(packer.ok()) << packer.status();
      absl::StatusOr<ContextAssignment> a = ZigZagAssignment(o.seq_len, C);
      ASSERT_TRUE(a.ok());
      for (int step = 0; step < 6; ++step) {
        absl::StatusOr<PackedBatch> b = packer->Next();
        ASSERT_TRUE(b.ok()) << b.status();
        for (int32_t row = 0; row < o.batch_size; ++row) {
          absl::StatusOr<std::vector<ContextShard>> shards = SplitRowForAllRanks(*b, row, *a);
          ASSERT_TRUE(shards.ok()) << shards.status();
          SCOPED_TRACE(testing::Message() << "mask " << mask << " C " << C << " step " << step << " row " << row);
          ExpectReassemblesRow(*b, row, *a, *shards);
          int64_t targets = 0;
          for (const ContextShard& s : *shards) targets += s.num_target_tokens;
          EXPECT_EQ(targets, SliceRows(*b, row, 1).num_target_tokens);
        }
      }
    }
}

TEST(ContextSplitTest, KeysToReceiveEqualAPerQueryCount) {
  // Per query: every key of its document within the window that another rank
  // holds; the union over the rank's queries is what it must receive.
  std::mt19937 rng(31);
  for (int trial = 0; trial < 60; ++trial) {
    const int32_t C = 1 + trial % 4, chunk = 1 + static_cast<int32_t>(rng() % 20), T = 2 * C * chunk;
    PackedBatch b = MakeBatch(1, T, RandomLengths(1, T, chunk, &rng), &rng);
    absl::StatusOr<ContextAssignment> a = ZigZagAssignment(T, C);
    ASSERT_TRUE(a.ok());
    for (int32_t w : {0, 1, 2, 5, chunk, 3 * chunk + 1}) {
      for (int32_t r = 0; r < C; ++r) {
        absl::StatusOr<ContextShard> s = SplitRowForContext(b, 0, *a, r);
        ASSERT_TRUE(s.ok());
        std::set<int32_t> own, need;
        for (int32_t i = 0; i < s->num_tokens(); ++i) own.insert(s->GlobalPosition(i));
        for (size_t k = 0; k + 1 < s->cu_seqlens.size(); ++k)
          for (int32_t i = s->cu_seqlens[k]; i < s->cu_seqlens[k + 1]; ++i) {
            const int32_t g = s->GlobalPosition(i);
            const int32_t lo = w > 0 ? std::max(s->segment_doc_begin[k], g - w + 1) : s->segment_doc_begin[k];
            for (int32_t key = lo; key <= g; ++key)
              if (!own.count(key)) need.insert(key);
          }
        std::set<int32_t> got;
        int32_t last_end = -1;
        for (const auto& [lo, hi] : ContextKeysToReceive(*s, w)) {
          EXPECT_LT(last_end, lo) << "ranges ascending and disjoint, not touching";
          EXPECT_LT(lo, hi);
          last_end = hi;
          for (int32_t key = lo; key < hi; ++key) got.insert(key);
        }
        EXPECT_EQ(got, need) << "C " << C << " T " << T << " w " << w << " rank " << r;
        EXPECT_EQ(ContextKeysToReceiveCount(*s, w), static_cast<int64_t>(need.size()));
      }
    }
  }
}

TEST(ContextSplitTest, PieceFlagsOfOneDocumentOverTheRow) {
  // One document over the whole row, C = 2: chunks 0,3 on rank 0; 1,2 on rank 1.
  std::mt19937 rng(5);
  PackedBatch b = MakeBatch(1, 16, {16}, &rng);
  absl::StatusOr<ContextAssignment> a = ZigZagAssignment(16, 2);
  ASSERT_TRUE(a.ok());
  absl::StatusOr<ContextShard> r0 = SplitRowForContext(b, 0, *a, 0), r1 = SplitRowForContext(b, 0, *a, 1);
  ASSERT_TRUE(r0.ok() && r1.ok());
  ASSERT_EQ(r0->pieces.size(), 2u);
  EXPECT_EQ(r0->pieces[0].global_begin, 0);
  EXPECT_FALSE(r0->pieces[0].continues_from_previous);
  EXPECT_TRUE(r0->pieces[0].continues_into_next);
  EXPECT_EQ(r0->pieces[1].global_begin, 12);
  EXPECT_TRUE(r0->pieces[1].continues_from_previous);
  EXPECT_EQ(r0->pieces[1].first_doc_begin, 0);
  EXPECT_FALSE(r0->pieces[1].continues_into_next);
  EXPECT_EQ(r0->positions, (std::vector<int32_t>{0, 1, 2, 3, 12, 13, 14, 15}));
  EXPECT_EQ(r0->cu_seqlens, (std::vector<int32_t>{0, 4, 8}));
  ASSERT_EQ(r1->pieces.size(), 1u);
  EXPECT_EQ(r1->pieces[0].global_begin, 4);
  EXPECT_EQ(r1->pieces[0].length, 8);
  EXPECT_TRUE(r1->pieces[0].continues_from_previous);
  EXPECT_TRUE(r1->pieces[0].continues_into_next);
  EXPECT_EQ(r1->pieces[0].last_doc_begin, 0);
  EXPECT_EQ(r1->cu_seqlens, (std::vector<int32_t>{0, 8}));
}

}  // namespace
}  // namespace longctx
