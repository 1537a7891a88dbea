// Why: the NIAH sample must be exactly the paper's text, deterministic from a
// seed, the requested length, with needles at sentence boundaries near their
// nominal depths, which lie in their bins (data/retrieval_task.h).
#include "data/retrieval_task.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "data/byte_tokenizer.h"
#include "gtest/gtest.h"
#include "tests/support/memory_documents.h"

namespace longctx {
namespace {

using ::longctx::testing::MakeProseDocuments;
using ::longctx::testing::MemoryDocuments;

std::vector<uint32_t> AllDocs(const DocumentSource& s) {
  std::vector<uint32_t> d;
  for (int64_t i = 0; i < s.n_docs(); ++i) d.push_back(static_cast<uint32_t>(i));
  return d;
}

std::string Text(const ByteTokenizer& tok, const std::vector<int32_t>& ids, size_t begin, size_t end) {
  return tok.Decode(absl::MakeConstSpan(ids.data() + begin, end - begin));
}

TEST(RetrievalTaskTest, PaperStringsAreVerbatim) {
  const NeedleFormat f = PaperNeedleFormat();
  EXPECT_EQ(f.prefix,
            "There is an important info hidden inside a lot of irrelevant text. Find it and memorize them. I will "
            "quiz you about the important information there.");
  EXPECT_EQ(absl::StrCat(f.needle_before, "123456", f.needle_after), "One of the magic numbers is 123456.");
  EXPECT_EQ(f.question, "What are the magic numbers mentioned in the provided text? The numbers are");
  EXPECT_EQ(f.digits, 6);
  EXPECT_EQ(NeedleAnswerText({"123456", "654321"}), " 123456, 654321.");
  EXPECT_TRUE(NeedleFormatByName("compact", "x").ok());
  absl::StatusOr<NeedleFormat> bad = NeedleFormatByName("pg", "probe_format");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("probe_format"), std::string::npos);
}

TEST(RetrievalTaskTest, SplitsSentencesAtTerminatorsAndDropsPartialEnds) {
  const std::string text = "ial end. Hello   world.\n\nIt is 3.5 m long! Really?\" he said. Then (it ended.) tail";
  EXPECT_EQ(SplitSentences(text, /*drop_first=*/true),
            (std::vector<std::string>{"Hello world.", "It is 3.5 m long!", "Really?\"", "he said.",
                                      "Then (it ended.)"}));
  EXPECT_EQ(SplitSentences("A b. 42. C d.", false), (std::vector<std::string>{"A b.", "C d."}));
  EXPECT_TRUE(SplitSentences("no terminator at all", false).empty());
}

TEST(RetrievalTaskTest, SampleHasTheRequestedLengthAndPaperLayout) {
  ByteTokenizer tok;
  MemoryDocuments docs = MakeProseDocuments(tok, 40, 7);
  HaystackSource hs(&docs, AllDocs(docs), &tok);
  const NeedleFormat f = PaperNeedleFormat();
  for (int64_t len : {400, 512, 1024, 2048, 4096}) {
    for (uint64_t seed = 0; seed < 8; ++seed) {
      absl::StatusOr<NeedleSample> s = BuildNeedleSample(f, 4, len, hs, seed);
      ASSERT_TRUE(s.ok()) << s.status();
      EXPECT_EQ(static_cast<int64_t>(s->prompt.size()), len) << "len " << len << " seed " << seed;
      EXPECT_EQ(s->shortfall, 0);
      const std::string text = tok.Decode(s->prompt);
      ASSERT_EQ(text.rfind(absl::StrCat(f.prefix, " "), 0), 0u) << text.substr(0, 200);
      const std::string tail = absl::StrCat("\n", f.question);
      ASSERT_GE(text.size(), tail.size());
      EXPECT_EQ(text.substr(text.size() - tail.size()), tail);
      EXPECT_EQ(tok.Decode(s->answer), NeedleAnswerText(s->numbers));
      ASSERT_EQ(s->numbers.size(), 4u);
      EXPECT_EQ(std::set<std::string>(s->numbers.begin(), s->numbers.end()).size(), 4u);
      for (const std::string& n : s->numbers) {
        EXPECT_EQ(n.size(), 6u);
        EXPECT_NE(n[0], '0');
      }
    }
  }
}

TEST(RetrievalTaskTest, NeedlesSitAtTheNearestSentenceBoundaryOfTheirDepth) {
  ByteTokenizer tok;
  MemoryDocuments docs = MakeProseDocuments(tok, 40, 8);
  HaystackSource hs(&docs, AllDocs(docs), &tok);
  const NeedleFormat f = PaperNeedleFormat();
  const size_t prefix_len = f.prefix.size();
  for (int needles : {1, 2, 4, 5}) {
    const double w = 0.99 / needles;
    for (uint64_t seed = 0; seed < 20; ++seed) {
      absl::StatusOr<NeedleSample> s = BuildNeedleSample(f, needles, 1536, hs, seed);
      ASSERT_TRUE(s.ok()) << s.status();
      ASSERT_EQ(s->depths.size(), static_cast<size_t>(needles));
      ASSERT_EQ(s->needle_offsets.size(), static_cast<size_t>(needles));
      int64_t needle_tokens_before = 0;
      for (int j = 0; j < needles; ++j) {
        EXPECT_GE(s->depths[j], j * w);
        EXPECT_LT(s->depths[j], (j + 1) * w);
        const std::string needle = absl::StrCat(" One of the magic numbers is ", s->numbers[j], ".");
        const int64_t off = s->needle_offsets[j];
        EXPECT_EQ(Text(tok, s->prompt, off, off + needle.size()), needle);
        // Its haystack offset is a sentence boundary, the nearest to d·H.
        const int64_t hay_off = off - static_cast<int64_t>(prefix_len) - needle_tokens_before;
        const std::vector<int64_t>& b = s->boundaries;
        ASSERT_NE(std::find(b.begin(), b.end(), hay_off), b.end()) << hay_off;
        const double target = s->depths[j] * static_cast<double>(s->haystack_tokens);
        for (int64_t x : b) EXPECT_LE(std::fabs(hay_off - target), std::fabs(x - target) + 1e-9);
        // The text right before the needle ends a sentence (or the prefix).
        const std::string before = Text(tok, s->prompt, 0, off);
        const char last = before.back();
        EXPECT_TRUE(last == '.' || last == '!' || last == '?' || last == '"' || last == ')') << before.substr(before.size() - 40);
        needle_tokens_before += static_cast<int64_t>(needle.size());
      }
      EXPECT_EQ(s->boundaries.front(), 0);
      EXPECT_EQ(s->boundaries.back(), s->haystack_tokens);
    }
  }
}

TEST(RetrievalTaskTest, DeterministicFromTheSeed) {
  ByteTokenizer tok;
  MemoryDocuments docs = MakeProseDocuments(tok, 30, 9);
  HaystackSource hs(&docs, AllDocs(docs), &tok);
  absl::StatusOr<NeedleSample> a = BuildNeedleSample(PaperNeedleFormat(), 4, 1024, hs, 77);
  absl::StatusOr<NeedleSample> b = BuildNeedleSample(PaperNeedleFormat(), 4, 1024, hs, 77);
  absl::StatusOr<NeedleSample> c = BuildNeedleSample(PaperNeedleFormat(), 4, 1024, hs, 78);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(a->prompt, b->prompt);
  EXPECT_EQ(a->numbers, b->numbers);
  EXPECT_EQ(a->depths, b->depths);
  EXPECT_NE(a->prompt, c->prompt);
  EXPECT_NE(a->numbers, c->numbers);
}

TEST(RetrievalTaskTest, TooShortForTheFormatIsAClearError) {
  ByteTokenizer tok;
  MemoryDocuments docs = MakeProseDocuments(tok, 5, 1);
  HaystackSource hs(&docs, AllDocs(docs), &tok);
  const int64_t fixed = NeedleFixedTokens(PaperNeedleFormat(), 4, tok);
  // prefix 148 + 4 needles of 36 + "\n" + question 74 bytes.
  EXPECT_EQ(fixed, 148 + 4 * 36 + 1 + 74);
  absl::StatusOr<NeedleSample> s = BuildNeedleSample(PaperNeedleFormat(), 4, fixed - 1, hs, 1);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.status().message().find("too short"), std::string::npos) << s.status();
  // Exactly the fixed parts: an empty haystack, needles back to back.
  s = BuildNeedleSample(PaperNeedleFormat(), 4, fixed, hs, 1);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(static_cast<int64_t>(s->prompt.size()), fixed);
  EXPECT_EQ(s->haystack_tokens, 0);
  // Compact: no prefix, short question.
  s = BuildNeedleSample(CompactNeedleFormat(), 1, 128, hs, 2);
  ASSERT_TRUE(s.ok()) << s.status();
  const std::string text = tok.Decode(s->prompt);
  EXPECT_EQ(text.substr(text.size() - 22), "\nThe magic numbers are");
  EXPECT_EQ(text[0], ' ');
}

TEST(RetrievalTaskTest, SplitDocumentsFollowsThePackerSplit) {
  ByteTokenizer tok;
  MemoryDocuments docs = MakeProseDocuments(tok, 200, 3);
  std::vector<uint32_t> ev = SplitDocuments(docs, 0.1, true), tr = SplitDocuments(docs, 0.1, false);
  EXPECT_EQ(ev.size() + tr.size(), 200u);
  EXPECT_GT(ev.size(), 5u);
  EXPECT_LT(ev.size(), 40u);
  std::set<uint32_t> all(ev.begin(), ev.end());
  for (uint32_t d : tr) EXPECT_EQ(all.count(d), 0u);
}

}  // namespace
}  // namespace longctx
