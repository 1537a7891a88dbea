// Why: the packer decides what every training row contains. A row that is one
// token short, a target that crosses into another document, a position that
// does not restart, or a resumed run that repeats or skips a row would all
// train silently on the wrong thing. These tests rebuild the expected stream
// independently (from the epoch orders and the token file) and compare every
// row, under masking and without it, across epoch boundaries and resumes.
#include "data/packer.h"


#include <algorithm>
#include <numeric>
#include <random>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/support/scratch_token_files.h"

namespace longctx {
namespace {

constexpr int64_t kVocab = 65536;
constexpr int32_t kEos = kVocab - 1;

class PackerTest : public ::testing::Test {
 protected:
  // Writes documents of the given lengths (tokens identify document and
  // position; the last token of a non-empty document is EOS) and opens them.
  const TokenFileReader& MakeFile(const std::vector<int>& lengths) {
    std::vector<std::vector<int32_t>> docs = testing::DocumentsOfLengths(lengths, [](size_t d, int p) {
      return static_cast<int32_t>((d * 1009 + p * 31 + 7) % (kVocab - 1));
    });
    for (std::vector<int32_t>& ids : docs)
      if (!ids.empty()) ids.back() = kEos;
    return files_.Add(docs, kVocab);
  }

  testing::ScratchTokenFiles files_{"longctx_packer_test"};
};

// The expected stream, built independently of the packer's row logic.
struct Stream {
  std::vector<int32_t> tokens;
  std::vector<uint8_t> start;     // first token of a document instance
  std::vector<int64_t> instance;  // which document instance (epoch-unique)
};

Stream BuildStream(const Packer& packer, const TokenFileReader& reader, int64_t min_tokens) {
  Stream s;
  int64_t instance = 0;
  for (uint64_t epoch = 0; static_cast<int64_t>(s.tokens.size()) < min_tokens; ++epoch) {
    for (uint32_t doc : packer.EpochOrder(epoch)) {
      const std::vector<int32_t> ids = reader.DocCopy(doc);
      for (size_t i = 0; i < ids.size(); ++i) {
        s.tokens.push_back(ids[i]);
        s.start.push_back(i == 0);
        s.instance.push_back(instance);
      }
      ++instance;
    }
  }
  return s;
}

// Compares num_batches batches of the packer (from its current cursor, which
// must be at row first_row) with the stream, token by token.
void CheckRows(Packer& packer, const TokenFileReader& reader, int num_batches, int64_t first_row = 0) {
  const PackerOptions& o = packer.options();
  const int T = o.seq_len, B = o.batch_size;
  const Stream s = BuildStream(packer, reader, (first_row + int64_t{num_batches} * B + 1) * T + 1);
  int64_t row = first_row;
  for (int n = 0; n < num_batches; ++n) {
    auto batch = packer.Next();
    ASSERT_TRUE(batch.ok()) << batch.status();
    ASSERT_TRUE(ValidatePackedBatch(*batch).ok()) << ValidatePackedBatch(*batch);
    ASSERT_EQ(batch->batch_size, B);
    ASSERT_EQ(batch->seq_len, T);
    ASSERT_EQ(batch->inputs.size(), size_t(B) * T);
    ASSERT_EQ(batch->targets.size(), size_t(B) * T);
    ASSERT_EQ(batch->positions.size(), size_t(B) * T);
    int64_t valid = 0;
    for (int b = 0; b < B; ++b, ++row) {
      const int64_t r0 = row * T;
      const int32_t* in = &batch->inputs[b * T];
      const int32_t* tg = &batch->targets[b * T];
      const int32_t* ps = &batch->positions[b * T];
      std::vector<int32_t> expected_starts = {0};
      for (int t = 0; t < T; ++t) {
        ASSERT_EQ(in[t], s.tokens[r0 + t]) << "row " << row << " t " << t;
        const bool cross = s.start[r0 + t + 1];  // target begins another document
        if (o.document_mask && cross) {
          ASSERT_EQ(tg[t], -1) << "row " << row << " t " << t;
        } else {
          ASSERT_EQ(tg[t], s.tokens[r0 + t + 1]) << "row " << row << " t " << t;
        }
        valid += tg[t] >= 0;
        const bool restart = t == 0 || (o.document_mask && s.start[r0 + t]);
        if (t > 0 && restart) expected_starts.push_back(t);
        ASSERT_EQ(ps[t], restart ? 0 : ps[t - 1] + 1) << "row " << row << " t " << t;
        if (!o.document_mask) {
          ASSERT_EQ(ps[t], t);
        }
      }
      const auto segs = SegmentsOfRow(*batch, b);
      std::vector<int32_t> seg_starts;
      int32_t covered = 0;
      for (const auto& [start, len] : segs) {
        seg_starts.push_back(start);
        ASSERT_EQ(start, covered);
        covered += len;
        if (o.document_mask) {
          // A segment never spans two documents.
          EXPECT_EQ(s.instance[r0 + start], s.instance[r0 + start + len - 1]) << "row " << row;
        }
      }
      ASSERT_EQ(covered, T);
      ASSERT_EQ(seg_starts, expected_starts) << "row " << row;
    }
    EXPECT_EQ(batch->num_target_tokens, valid);
    EXPECT_EQ(packer.cursor().rows_emitted, static_cast<uint64_t>(row));
  }
}

// Lengths with documents of length 1 and documents longer than 3 rows of 16.
const std::vector<int> kMixedLengths = {1, 1, 5, 70, 16, 17, 3, 1, 100, 2, 33, 1, 9, 0, 4};

PackerOptions Opts(int T, int B, bool mask, uint64_t seed = 1) {
  PackerOptions o;
  o.seq_len = T;
  o.batch_size = B;
  o.document_mask = mask;
  o.shuffle_seed = seed;
  o.split = PackerSplit::kAll;
  return o;
}

TEST_F(PackerTest, RowsMatchStreamWithDocumentMask) {
  const TokenFileReader& r = MakeFile(kMixedLengths);
  auto p = Packer::Create(&r, Opts(16, 3, true));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->num_docs(), 14);  // the empty document is excluded
  EXPECT_EQ(p->tokens_per_epoch(), 263);
  CheckRows(*p, r, 20);  // 960 tokens: more than 3 epochs
  EXPECT_GE(p->cursor().epoch, 3u);
}

TEST_F(PackerTest, RowsMatchStreamWithoutDocumentMask) {
  const TokenFileReader& r = MakeFile(kMixedLengths);
  auto p = Packer::Create(&r, Opts(16, 3, false));
  ASSERT_TRUE(p.ok()) << p.status();
  CheckRows(*p, r, 20);
  // TinyLlama style: one segment per row, every target kept.
  auto b = p->Next();
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->cu_seqlens, (std::vector<int32_t>{0, 16, 32, 48}));
  EXPECT_EQ(b->num_target_tokens, 48);
  EXPECT_EQ(b->max_seqlen, 16);
  for (int32_t t : b->targets) EXPECT_GE(t, 0);
}

TEST_F(PackerTest, OtherShapes) {
  const TokenFileReader& r = MakeFile(kMixedLengths);
  for (int T : {1, 2, 7, 64, 300}) {
    for (bool mask : {true, false}) {
      auto p = Packer::Create(&r, Opts(T, 2, mask, 5));
      ASSERT_TRUE(p.ok()) << p.status();
      SCOPED_TRACE(::testing::Message() << "T=" << T << " mask=" << mask);
      CheckRows(*p, r, 6);
    }
  }
}

TEST_F(PackerTest, EpochShorterThanARow) {
  const TokenFileReader& r = MakeFile({3, 2});
  for (bool mask : {true, false}) {
    auto p = Packer::Create(&r, Opts(16, 2, mask));
    ASSERT_TRUE(p.ok()) << p.status();
    CheckRows(*p, r, 5);
    EXPECT_EQ(p->cursor().epoch, 5 * 2 * 16 / 5u);  // 160 tokens = 32 epochs of 5
  }
}

TEST_F(PackerTest, ConcatenatedRowsReproduceThePermutedStream) {
  const TokenFileReader& r = MakeFile(kMixedLengths);
  const int T = 16;
  auto p = Packer::Create(&r, Opts(T, 1, false, 99));
  ASSERT_TRUE(p.ok());
  std::vector<int32_t> expected;
  for (uint32_t doc : p->EpochOrder(0)) {
    const auto ids = r.DocCopy(doc);
    expected.insert(expected.end(), ids.begin(), ids.end());
  }
  std::vector<int32_t> concat;
  int32_t last_target = 0;
  while (concat.size() + 1 < expected.size()) {
    auto b = p->Next();
    ASSERT_TRUE(b.ok());
    concat.insert(concat.end(), b->inputs.begin(), b->inputs.end());
    last_target = b->targets.back();
  }
  concat.push_back(last_target);
  ASSERT_GE(concat.size(), expected.size());
  EXPECT_EQ(std::vector<int32_t>(concat.begin(), concat.begin() + expected.size()), expected);
}

TEST_F(PackerTest, LengthOneDocuments) {
  const TokenFileReader& r = MakeFile(std::vector<int>(20, 1));
  auto masked = Packer::Create(&r, Opts(8, 2, true));
  ASSERT_TRUE(masked.ok());
  auto b = masked->Next();
  ASSERT_TRUE(b.ok());
  // Every token is its own document: 16 segments of 1, nothing to predict.
  EXPECT_EQ(b->cu_seqlens.size(), 17u);
  EXPECT_EQ(b->max_seqlen, 1);
  EXPECT_EQ(b->num_target_tokens, 0);
  for (int32_t t : b->targets) EXPECT_EQ(t, -1);
  for (int32_t pos : b->positions) EXPECT_EQ(pos, 0);
  auto plain = Packer::Create(&r, Opts(8, 2, false));
  ASSERT_TRUE(plain.ok());
  auto c = plain->Next();
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->num_target_tokens, 16);
}

TEST_F(PackerTest, LongDocumentSpansRowsWithRestartedPositions) {
  const TokenFileReader& r = MakeFile({100});  // > 3 rows of 16
  auto p = Packer::Create(&r, Opts(16, 4, true));
  ASSERT_TRUE(p.ok());
  auto b = p->Next();
  ASSERT_TRUE(b.ok());
  // Each row is one piece of the document: one segment, positions 0..15, and
  // every target kept (the next row continues the same document).
  EXPECT_EQ(b->cu_seqlens, (std::vector<int32_t>{0, 16, 32, 48, 64}));
  for (int i = 0; i < 64; ++i) {
    EXPECT_EQ(b->positions[i], i % 16);
    EXPECT_EQ(b->targets[i], r.token(i + 1));
  }
}

TEST_F(PackerTest, EpochOrdersArePermutations) {
  const TokenFileReader& r = MakeFile(kMixedLengths);
  auto p = Packer::Create(&r, Opts(16, 2, true, 3));
  ASSERT_TRUE(p.ok());
  std::vector<uint32_t> sorted_docs = p->docs();
  EXPECT_TRUE(std::is_sorted(sorted_docs.begin(), sorted_docs.end()));
  std::set<std::vector<uint32_t>> distinct;
  for (uint64_t e = 0; e < 5; ++e) {
    std::vector<uint32_t> order = p->EpochOrder(e);
    distinct.insert(order);
    std::sort(order.begin(), order.end());
    EXPECT_EQ(order, sorted_docs) << "epoch " << e;
  }
  EXPECT_EQ(distinct.size(), 5u);  // each epoch reshuffles
  PackerOptions o = Opts(16, 2, true, 3);
  o.shuffle = false;
  auto q = Packer::Create(&r, o);
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->EpochOrder(4), sorted_docs);
}

bool SameBatch(const PackedBatch& a, const PackedBatch& b) {
  return a.inputs == b.inputs && a.targets == b.targets && a.positions == b.positions &&
         a.cu_seqlens == b.cu_seqlens && a.num_target_tokens == b.num_target_tokens &&
         a.max_seqlen == b.max_seqlen;
}

TEST_F(PackerTest, DeterministicPerSeedAndDifferentAcrossSeeds) {
  const TokenFileReader& r = MakeFile(kMixedLengths);
  auto a = Packer::Create(&r, Opts(16, 2, true, 42));
  auto b = Packer::Create(&r, Opts(16, 2, true, 42));
  auto c = Packer::Create(&r, Opts(16, 2, true, 43));
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(a->EpochOrder(0), b->EpochOrder(0));
  EXPECT_NE(a->EpochOrder(0), c->EpochOrder(0));
  bool any_difference = false;
  for (int i = 0; i < 8; ++i) {
    auto x = a->Next(), y = b->Next(), z = c->Next();
    ASSERT_TRUE(x.ok() && y.ok() && z.ok());
    EXPECT_TRUE(SameBatch(*x, *y)) << "batch " << i;
    any_difference |= !SameBatch(*x, *z);
  }
  EXPECT_TRUE(any_difference);
}

TEST_F(PackerTest, TrainAndEvalSplitsAreDisjointAndCovering) {
  std::mt19937 rng(1);
  std::vector<int> lengths(1000);
  for (int& l : lengths) l = static_cast<int>(rng() % 20);  // some empty
  const TokenFileReader& r = MakeFile(lengths);
  PackerOptions o = Opts(32, 2, true, 7);
  o.eval_fraction = 0.1;
  o.split = PackerSplit::kTrain;
  auto train = Packer::Create(&r, o);
  o.split = PackerSplit::kEval;
  auto eval = Packer::Create(&r, o);
  o.shuffle_seed = 8;  // the split does not depend on the seed
  auto eval2 = Packer::Create(&r, o);
  o.split = PackerSplit::kAll;
  auto all = Packer::Create(&r, o);
  ASSERT_TRUE(train.ok() && eval.ok() && eval2.ok() && all.ok());
  EXPECT_EQ(eval->docs(), eval2->docs());
  std::set<uint32_t> t(train->docs().begin(), train->docs().end());
  std::set<uint32_t> e(eval->docs().begin(), eval->docs().end());
  for (uint32_t d : e) EXPECT_EQ(t.count(d), 0u) << d;
  std::set<uint32_t> both = t;
  both.insert(e.begin(), e.end());
  std::set<uint32_t> nonempty;
  for (int i = 0; i < 1000; ++i)
    if (lengths[i] > 0) nonempty.insert(i);
  EXPECT_EQ(both, nonempty);
  EXPECT_EQ(std::set<uint32_t>(all->docs().begin(), all->docs().end()), nonempty);
  EXPECT_GT(e.size(), 50u);  // ~95 expected
  EXPECT_LT(e.size(), 150u);
  for (uint32_t d : e) EXPECT_TRUE(DocumentInEvalSplit(d, 0.1));
  // Eval rows only contain eval documents (checked token by token).
  CheckRows(*eval, r, 3);
}

TEST_F(PackerTest, EmptySplitIsAnError) {
  const TokenFileReader& r = MakeFile(kMixedLengths);
  PackerOptions o = Opts(16, 2, true);
  o.split = PackerSplit::kEval;
  o.eval_fraction = 0.0;
  auto p = Packer::Create(&r, o);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(p.status().message().find("eval"), absl::string_view::npos) << p.status();
  o.split = PackerSplit::kTrain;
  o.eval_fraction = 1.0;
  EXPECT_FALSE(Packer::Create(&r, o).ok());
  const TokenFileReader& empty_docs = MakeFile({0, 0, 0});
  EXPECT_FALSE(Packer::Create(&empty_docs, Opts(16, 2, true)).ok());
}

TEST_F(PackerTest, RejectsBadOptions) {
  const TokenFileReader& r = MakeFile(kMixedLengths);
  EXPECT_FALSE(Packer::Create(nullptr, Opts(16, 2, true)).ok());
  EXPECT_FALSE(Packer::Create(&r, Opts(0, 2, true)).ok());
  EXPECT_FALSE(Packer::Create(&r, Opts(16, 0, true)).ok());
  EXPECT_FALSE(Packer::Create(&r, Opts(1 << 16, 1 << 16, true)).ok());  // B*T overflows int32
  PackerOptions o = Opts(16, 2, true);
  o.eval_fraction = 1.5;
  EXPECT_FALSE(Packer::Create(&r, o).ok());
}

void CheckResume(PackerTest* test, const TokenFileReader& r, bool mask) {
  const PackerOptions o = Opts(16, 3, mask, 11);
  auto uninterrupted = Packer::Create(&r, o);
  ASSERT_TRUE(uninterrupted.ok());
  std::vector<PackedBatch> reference;
  for (int i = 0; i < 12; ++i) {
    auto b = uninterrupted->Next();
    ASSERT_TRUE(b.ok());
    reference.push_back(*b);
  }

  auto first = Packer::Create(&r, o);
  ASSERT_TRUE(first.ok());
  for (int i = 0; i < 7; ++i) ASSERT_TRUE(first->Next().ok());
  EXPECT_EQ(first->cursor().rows_emitted, 21u);
  // Through a JSON string, as a checkpoint would store it.
  const std::string saved = PackerCursorToJson(first->cursor()).dump();
  auto cursor = PackerCursorFromJson(nlohmann::json::parse(saved));
  ASSERT_TRUE(cursor.ok()) << cursor.status();
  EXPECT_EQ(*cursor, first->cursor());

  auto resumed = Packer::Create(&r, o);
  ASSERT_TRUE(resumed.ok());
  ASSERT_TRUE(resumed->Seek(*cursor).ok()) << resumed->Seek(*cursor);
  for (int i = 7; i < 12; ++i) {
    auto b = resumed->Next();
    ASSERT_TRUE(b.ok());
    EXPECT_TRUE(SameBatch(*b, reference[i])) << "batch " << i;
  }
  EXPECT_EQ(resumed->cursor(), uninterrupted->cursor());

  // A different batch size may resume the same row stream.
  PackerOptions o1 = o;
  o1.batch_size = 1;
  auto single = Packer::Create(&r, o1);
  ASSERT_TRUE(single.ok());
  ASSERT_TRUE(single->Seek(*cursor).ok());
  for (int row = 0; row < 3; ++row) {
    auto b = single->Next();
    ASSERT_TRUE(b.ok());
    EXPECT_EQ(b->inputs, std::vector<int32_t>(reference[7].inputs.begin() + row * 16,
                                              reference[7].inputs.begin() + (row + 1) * 16));
    EXPECT_EQ(b->targets, std::vector<int32_t>(reference[7].targets.begin() + row * 16,
                                               reference[7].targets.begin() + (row + 1) * 16));
  }

  // Seek back to the start replays the first batch.
  ASSERT_TRUE(resumed->Seek(PackerCursor{}).ok());
  auto again = resumed->Next();
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(SameBatch(*again, reference[0]));
}

TEST_F(PackerTest, ResumeFromJsonCursorWithMask) {
  CheckResume(this, MakeFile(kMixedLengths), true);
}
TEST_F(PackerTest, ResumeFromJsonCursorWithoutMask) {
  CheckResume(this, MakeFile(kMixedLengths), false);
}

TEST_F(PackerTest, SeekRejectsInconsistentCursors) {
  const TokenFileReader& r = MakeFile(kMixedLengths);
  auto p = Packer::Create(&r, Opts(16, 3, true, 11));
  ASSERT_TRUE(p.ok());
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(p->Next().ok());
  const PackerCursor good = p->cursor();
  ASSERT_TRUE(p->Seek(good).ok());

  PackerCursor c = good;
  c.rows_emitted += 1;
  EXPECT_FALSE(p->Seek(c).ok());
  c = good;
  c.doc_in_epoch = p->num_docs();
  EXPECT_FALSE(p->Seek(c).ok());
  c = good;
  c.token_in_doc = r.doc_length(p->EpochOrder(c.epoch)[c.doc_in_epoch]);
  absl::Status st = p->Seek(c);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("token_in_doc"), absl::string_view::npos) << st;
  c = good;
  c.rows_emitted = ~uint64_t{0};  // no overflow into a false match
  EXPECT_FALSE(p->Seek(c).ok());
  // A cursor from a packer with another seq_len does not fit.
  auto other = Packer::Create(&r, Opts(15, 3, true, 11));
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE(other->Seek(good).ok());
  // Failed seeks leave the cursor alone.
  EXPECT_EQ(p->cursor(), good);
}

TEST(PackerCursorJsonTest, RoundTripsAndRejectsBadInput) {
  const PackerCursor c{3, 17, 5, ~uint64_t{0} - 1};
  auto back = PackerCursorFromJson(nlohmann::json::parse(PackerCursorToJson(c).dump()));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, c);
  EXPECT_FALSE(PackerCursorFromJson(nlohmann::json::parse("[1,2,3,4]")).ok());
  EXPECT_FALSE(PackerCursorFromJson(nlohmann::json::parse(
                   R"({"epoch":1,"doc_in_epoch":2,"token_in_doc":3})"))
                   .ok());
  EXPECT_FALSE(PackerCursorFromJson(nlohmann::json::parse(
                   R"({"epoch":-1,"doc_in_epoch":2,"token_in_doc":3,"rows_emitted":4})"))
                   .ok());
  EXPECT_FALSE(PackerCursorFromJson(nlohmann::json::parse(
                   R"({"epoch":"1","doc_in_epoch":2,"token_in_doc":3,"rows_emitted":4})"))
                   .ok());
}

TEST(PackedBatchTest, ValidateCatchesBrokenBatches) {
  PackedBatch b;
  b.batch_size = 2;
  b.seq_len = 4;
  b.inputs = {1, 2, 3, 4, 5, 6, 7, 8};
  b.targets = {2, 3, -1, 5, 6, 7, 8, 9};
  b.positions = {0, 1, 0, 1, 0, 1, 2, 3};
  b.cu_seqlens = {0, 2, 4, 8};
  b.max_seqlen = 4;
  b.num_target_tokens = 7;
  ASSERT_TRUE(ValidatePackedBatch(b).ok()) << ValidatePackedBatch(b);
  EXPECT_EQ(SegmentsOfRow(b, 0), (std::vector<std::pair<int32_t, int32_t>>{{0, 2}, {2, 2}}));
  EXPECT_EQ(SegmentsOfRow(b, 1), (std::vector<std::pair<int32_t, int32_t>>{{0, 4}}));
  EXPECT_EQ(SegmentLengths(b), (std::vector<int32_t>{2, 2, 4}));
  PackedBatch c = b;
  c.cu_seqlens = {0, 2, 6, 8};  // a segment across the row boundary
  EXPECT_FALSE(ValidatePackedBatch(c).ok());
  c = b;
  c.positions[3] = 2;
  EXPECT_FALSE(ValidatePackedBatch(c).ok());
  c = b;
  c.num_target_tokens = 8;
  EXPECT_FALSE(ValidatePackedBatch(c).ok());
  c = b;
  c.inputs.pop_back();
  EXPECT_FALSE(ValidatePackedBatch(c).ok());
}

}  // namespace
}  // namespace longctx
