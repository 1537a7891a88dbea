// Why: at SlimPajama scale every kind of bad input occurs, and the contract is
// that each bad line or frame is reported with file:line, counted in its
// category and skipped while every good document still comes out, in a
// deterministic file order, with memory bounded by the buffers and one line.
// These tests build small corpora with libzstd (frames written here, a
// truncated frame made by cutting the compressed bytes short) and check each
// report, each count, the "nothing silently dropped" invariant and the order.
#include "data/shard_reader.h"

#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gtest/gtest.h"
#include "tests/support/test_util.h"

namespace longctx {
namespace {
namespace fs = std::filesystem;
using ::longctx::testing::TempDir;

std::string Frame(const std::string& data, int level = 3) {
  std::string out(ZSTD_compressBound(data.size()), '\0');
  const size_t n = ZSTD_compress(out.data(), out.size(), data.data(), data.size(), level);
  EXPECT_FALSE(ZSTD_isError(n)) << ZSTD_getErrorName(n);
  out.resize(n);
  return out;
}

void Write(const std::string& path, const std::string& bytes) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

std::string Doc(const std::string& text, const std::string& set) {
  return nlohmann::json{{"text", text}, {"meta", {{"redpajama_set_name", set}}}}.dump() + "\n";
}

struct Yielded {
  std::string text, set, path;
  int64_t line;
};

std::vector<Yielded> ReadAll(ShardReader* r) {
  std::vector<Yielded> out;
  ShardDocument d;
  while (r->Next(&d)) out.push_back({std::string(d.text), std::string(d.set_name), std::string(d.path), d.line});
  return out;
}

// Every line is accounted for exactly once.
void ExpectAccounted(const ShardReadStats& s) {
  EXPECT_EQ(s.lines, s.docs + s.filtered + s.blank_lines + s.malformed_json + s.invalid_utf8 + s.missing_text +
                         s.line_too_long)
      << s.Summary();
}

TEST(NaturalLessTest, NumbersCompareByValue) {
  std::vector<std::string> v = {"r/chunk10/example_train_2.jsonl.zst", "r/chunk2/example_train_10.jsonl.zst",
                                "r/chunk2/example_train_9.jsonl.zst", "r/chunk1/example_train_0.jsonl.zst",
                                "r/chunk2/example_train_09.jsonl.zst"};
  std::sort(v.begin(), v.end(), NaturalLess);
  EXPECT_EQ(v, (std::vector<std::string>{"r/chunk1/example_train_0.jsonl.zst", "r/chunk2/example_train_09.jsonl.zst",
                                         "r/chunk2/example_train_9.jsonl.zst", "r/chunk2/example_train_10.jsonl.zst",
                                         "r/chunk10/example_train_2.jsonl.zst"}));
  EXPECT_FALSE(NaturalLess("a10", "a10"));
  EXPECT_TRUE(NaturalLess("a", "a0"));
}

// The corpus with one of every problem. Returns the shard root.
struct ProblemCorpus {
  std::string root, s0, s1, s2, s3, s4;
};

ProblemCorpus MakeProblemCorpus(const TempDir& tmp) {
  ProblemCorpus c;
  c.root = tmp / "slim/train";
  c.s0 = c.root + "/chunk1/example_train_0.jsonl.zst";
  c.s1 = c.root + "/chunk1/example_train_1.jsonl";
  c.s2 = c.root + "/chunk2/example_train_0.jsonl.zst";
  c.s3 = c.root + "/chunk2/example_train_1.jsonl.zst";
  c.s4 = c.root + "/chunk10/example_train_0.jsonl.zst";
  // Shard 0: every line-level problem; two frames, the boundary inside line 12.
  std::string lines;
  lines += Doc("doc A", "RedPajamaC4");                                           // 1
  lines += "{\"text\": \"unterminated\"\n";                                       // 2 malformed
  lines += Doc("code", "RedPajamaGithub");                                        // 3 filtered
  lines += "{\"text\": \"bad \xff byte\", \"meta\": {}}\n";                       // 4 invalid UTF-8
  lines += "{\"meta\": {\"redpajama_set_name\": \"RedPajamaC4\"}}\n";             // 5 no text
  lines += "{\"text\": 42}\n";                                                    // 6 text not a string
  lines += "   \n";                                                               // 7 blank
  lines += Doc("doc C", "RedPajamaBook");                                         // 8
  lines += Doc(std::string(500, 'x'), "RedPajamaC4");                             // 9 too long (max 200)
  lines += "[1, 2]\n";                                                            // 10 not an object
  lines += "{\"text\": \"x\\ud800y\"}\n";                                         // 11 lone surrogate
  const std::string line12 = Doc("doc D spans two frames", "RedPajamaArXiv");     // 12
  lines += line12;
  const size_t cut = lines.size() - line12.size() / 2;
  Write(c.s0, Frame(lines.substr(0, cut)) + Frame(lines.substr(cut)));
  // Shard 1: plain JSON lines, the last without '\n', a document without meta.
  Write(c.s1, Doc("doc E", "RedPajamaWikipedia") + "{\"text\": \"doc F\"}");
  // Shard 2: a complete frame (G, H), then a frame cut short (I, J): truncated.
  const std::string second = Doc(std::string(300, 'i') + " doc I", "RedPajamaC4") +
                             Doc(std::string(300, 'j') + " doc J", "RedPajamaC4");
  const std::string f2 = Frame(second);
  Write(c.s2, Frame(Doc("doc G", "RedPajamaC4") + Doc("doc H", "RedPajamaC4")) + f2.substr(0, f2.size() / 2));
  // Shard 3: a frame (K), then bytes that are not zstd: corrupt.
  Write(c.s3, Frame(Doc("doc K", "RedPajamaStackExchange")) + std::string("this is not a zstd frame at all"));
  // chunk10 sorts after chunk2.
  Write(c.s4, Frame(Doc("doc L", "RedPajamaC4")));
  Write(c.root + "/chunk1/README.txt", "not a shard\n");
  return c;
}

TEST(ShardReaderTest, EveryProblemIsReportedWithFileAndLineCountedAndSkipped) {
  TempDir tmp;
  const ProblemCorpus c = MakeProblemCorpus(tmp);
  std::vector<std::string> ignored;
  absl::StatusOr<std::vector<std::string>> files = ListShardFiles({c.root}, &ignored);
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_EQ(*files, (std::vector<std::string>{c.s0, c.s1, c.s2, c.s3, c.s4}));
  EXPECT_EQ(ignored, (std::vector<std::string>{c.root + "/chunk1/README.txt"}));

  ShardReaderOptions o;
  o.exclude_sets = {"RedPajamaGithub"};
  o.max_line_bytes = 200;
  ShardReader reader(*files, o);
  ::testing::internal::CaptureStderr();
  const std::vector<Yielded> docs = ReadAll(&reader);
  const std::string log = ::testing::internal::GetCapturedStderr();

  std::vector<std::string> texts;
  for (const Yielded& y : docs) texts.push_back(y.text);
  EXPECT_EQ(texts, (std::vector<std::string>{"doc A", "doc C", "doc D spans two frames", "doc E", "doc F", "doc G",
                                             "doc H", "doc K", "doc L"}));
  ASSERT_EQ(docs.size(), 9u);
  EXPECT_EQ(docs[0].set, "RedPajamaC4");
  EXPECT_EQ(docs[0].path, c.s0);
  EXPECT_EQ(docs[0].line, 1);
  EXPECT_EQ(docs[1].line, 8);
  EXPECT_EQ(docs[2].line, 12);
  EXPECT_EQ(docs[2].set, "RedPajamaArXiv");
  EXPECT_EQ(docs[4].set, "");  // no meta
  EXPECT_EQ(docs[4].line, 2);
  EXPECT_EQ(docs[4].path, c.s1);
  EXPECT_EQ(docs[6].line, 2);
  EXPECT_EQ(docs[8].path, c.s4);

  struct Want {
    ShardProblemKind kind;
    std::string path;
    int64_t line;
  };
  const std::vector<Want> want = {
      {ShardProblemKind::kMalformedJson, c.s0, 2},  {ShardProblemKind::kInvalidUtf8, c.s0, 4},
      {ShardProblemKind::kMissingText, c.s0, 5},    {ShardProblemKind::kMissingText, c.s0, 6},
      {ShardProblemKind::kLineTooLong, c.s0, 9},    {ShardProblemKind::kMalformedJson, c.s0, 10},
      {ShardProblemKind::kInvalidUtf8, c.s0, 11},   {ShardProblemKind::kTruncatedFrame, c.s2, 3},
      {ShardProblemKind::kCorruptFrame, c.s3, 2},
  };
  ASSERT_EQ(reader.problems().size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    const ShardProblem& p = reader.problems()[i];
    EXPECT_EQ(p.kind, want[i].kind) << i << ": " << p.detail;
    EXPECT_EQ(p.path, want[i].path) << i;
    EXPECT_EQ(p.line, want[i].line) << i << ": " << ShardProblemKindName(p.kind);
    // Each is logged as path:line: kind: detail.
    const std::string tag = want[i].path + ":" + std::to_string(want[i].line) + ": " + ShardProblemKindName(want[i].kind);
    EXPECT_NE(log.find(tag), std::string::npos) << "missing log line " << tag << "\nlog:\n" << log;
  }
  EXPECT_NE(reader.problems()[4].detail.find("max_line_bytes 200"), std::string::npos) << reader.problems()[4].detail;

  const ShardReadStats& s = reader.stats();
  EXPECT_EQ(s.files, 5);
  EXPECT_EQ(s.files_failed, 0);
  EXPECT_EQ(s.docs, 9);
  EXPECT_EQ(s.filtered, 1);
  EXPECT_EQ(s.filtered_per_set.at("RedPajamaGithub"), 1);
  EXPECT_EQ(s.blank_lines, 1);
  EXPECT_EQ(s.malformed_json, 2);
  EXPECT_EQ(s.invalid_utf8, 2);
  EXPECT_EQ(s.missing_text, 2);
  EXPECT_EQ(s.line_too_long, 1);
  EXPECT_EQ(s.truncated_frames, 1);
  EXPECT_EQ(s.corrupt_frames, 1);
  EXPECT_EQ(s.io_errors, 0);
  EXPECT_EQ(s.problems(), 9);
  // The garbage after shard 3's frame (zstd may have looked at its first bytes).
  EXPECT_GT(s.skipped_compressed_bytes, 20);
  EXPECT_LE(s.skipped_compressed_bytes, static_cast<int64_t>(std::string("this is not a zstd frame at all").size()));
  EXPECT_EQ(s.docs_per_set.at("RedPajamaC4"), 4);  // A, G, H, L
  EXPECT_EQ(s.docs_per_set.at(""), 1);
  EXPECT_EQ(s.lines, 12 + 2 + 2 + 1 + 1);  // the truncated partial line is not a complete line
  ExpectAccounted(s);
  int64_t text = 0;
  for (const Yielded& y : docs) text += static_cast<int64_t>(y.text.size());
  EXPECT_EQ(s.text_bytes, text);
  EXPECT_EQ(s.compressed_bytes, static_cast<int64_t>(fs::file_size(c.s0) + fs::file_size(c.s1) +
                                                     fs::file_size(c.s2) + fs::file_size(c.s3) + fs::file_size(c.s4)));

  // The stats survive a JSON round trip (the tokenize manifest stores them).
  absl::StatusOr<ShardReadStats> back = ShardReadStats::FromJson(s.ToJson());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->ToJson(), s.ToJson());
  nlohmann::json extra = s.ToJson();
  extra["surprise"] = 1;
  EXPECT_FALSE(ShardReadStats::FromJson(extra).ok());
}

TEST(ShardReaderTest, IncludeListKeepsOnlyNamedSets) {
  TempDir tmp;
  const std::string shard = tmp / "a.jsonl";
  Write(shard, Doc("b1", "RedPajamaBook") + Doc("c1", "RedPajamaC4") + "{\"text\": \"none\"}\n" +
                   Doc("b2", "RedPajamaBook") + Doc("a1", "RedPajamaArXiv"));
  ShardReaderOptions o;
  o.include_sets = {"RedPajamaBook", "RedPajamaArXiv"};
  o.exclude_sets = {"RedPajamaArXiv"};  // exclusion wins over inclusion
  ShardReader reader({shard}, o);
  std::vector<std::string> texts;
  for (const Yielded& y : ReadAll(&reader)) texts.push_back(y.text);
  EXPECT_EQ(texts, (std::vector<std::string>{"b1", "b2"}));
  EXPECT_EQ(reader.stats().filtered, 3);
  EXPECT_EQ(reader.stats().filtered_per_set.at(""), 1);
  EXPECT_EQ(reader.stats().filtered_per_set.at("RedPajamaC4"), 1);
  EXPECT_EQ(reader.stats().filtered_per_set.at("RedPajamaArXiv"), 1);
  EXPECT_TRUE(reader.problems().empty());
  ExpectAccounted(reader.stats());
}

TEST(ShardReaderTest, LinesLongerThanTheBuffersAndTheExactLimit) {
  TempDir tmp;
  // A 1 MB document spans many 128 KiB output chunks; escapes keep it intact.
  std::string big;
  for (int i = 0; big.size() < (1u << 20); ++i) big += "line " + std::to_string(i) + " \"quoted\"\n\t";
  const std::string big_line = Doc(big, "RedPajamaBook");
  const std::string at_limit = Doc(std::string(1000, 'y'), "RedPajamaC4");  // set max to exactly its length
  const std::string over = Doc(std::string(1001, 'y'), "RedPajamaC4");
  const std::string shard = tmp / "big.jsonl.zst";
  Write(shard, Frame(big_line + at_limit + over + big_line, 1));
  ShardReaderOptions o;
  o.max_line_bytes = static_cast<int64_t>(big_line.size() - 1);  // without '\n'
  ShardReader reader({shard}, o);
  ::testing::internal::CaptureStderr();
  std::vector<Yielded> docs = ReadAll(&reader);
  ::testing::internal::GetCapturedStderr();
  ASSERT_EQ(docs.size(), 4u);
  EXPECT_EQ(docs[0].text, big);
  EXPECT_EQ(docs[3].text, big);
  EXPECT_EQ(docs[3].line, 4);
  EXPECT_TRUE(reader.problems().empty());

  ShardReaderOptions tight;
  tight.max_line_bytes = static_cast<int64_t>(at_limit.size() - 1);
  ShardReader r2({shard}, tight);
  ::testing::internal::CaptureStderr();
  docs = ReadAll(&r2);
  ::testing::internal::GetCapturedStderr();
  ASSERT_EQ(docs.size(), 1u);
  EXPECT_EQ(docs[0].line, 2);
  EXPECT_EQ(r2.stats().line_too_long, 3);
  ASSERT_EQ(r2.problems().size(), 3u);
  EXPECT_EQ(r2.problems()[0].line, 1);
  EXPECT_EQ(r2.problems()[1].line, 3);
  EXPECT_EQ(r2.problems()[2].line, 4);
  ExpectAccounted(r2.stats());
}

TEST(ShardReaderTest, UnreadableFileIsAnIoErrorAndReadingGoesOn) {
  TempDir tmp;
  const std::string good = tmp / "good.jsonl";
  Write(good, Doc("ok", "RedPajamaC4"));
  const std::string missing = tmp / "gone.jsonl.zst";
  ShardReader reader({missing, good});
  ::testing::internal::CaptureStderr();
  const std::vector<Yielded> docs = ReadAll(&reader);
  const std::string log = ::testing::internal::GetCapturedStderr();
  ASSERT_EQ(docs.size(), 1u);
  EXPECT_EQ(docs[0].text, "ok");
  EXPECT_EQ(reader.stats().io_errors, 1);
  EXPECT_EQ(reader.stats().files_failed, 1);
  EXPECT_EQ(reader.stats().files, 1);
  ASSERT_EQ(reader.problems().size(), 1u);
  EXPECT_EQ(reader.problems()[0].path, missing);
  EXPECT_NE(log.find(missing + ": io_error: cannot open"), std::string::npos) << log;
  EXPECT_TRUE(absl::IsNotFound(ListShardFiles({tmp / "nowhere"}).status()));
}

TEST(ShardReaderTest, LoggingIsCappedPerFileButCountsStayExact) {
  TempDir tmp;
  std::string lines;
  for (int i = 0; i < 30; ++i) lines += "not json\n";
  const std::string shard = tmp / "bad.jsonl";
  Write(shard, lines);
  ShardReaderOptions o;
  o.max_logged_per_file = 5;
  o.max_recorded_problems = 7;
  ShardReader reader({shard}, o);
  ::testing::internal::CaptureStderr();
  EXPECT_TRUE(ReadAll(&reader).empty());
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(reader.stats().malformed_json, 30);
  EXPECT_EQ(reader.problems().size(), 7u);
  EXPECT_NE(log.find(shard + ":5: malformed_json"), std::string::npos);
  EXPECT_EQ(log.find(shard + ":6: malformed_json"), std::string::npos);
  EXPECT_NE(log.find("25 more problems were counted but not logged"), std::string::npos) << log;
}

// Peak RSS of streaming 64 MB of JSON lines stays near the buffers' size. Uses
// /proc/self/clear_refs to reset the high-water mark (skipped where Linux does
// not allow it). The shard is tiny on disk (repetitive text) but decodes to 64 MB.
int64_t PeakRssKb() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6));
  }
  return -1;
}

TEST(ShardReaderTest, StreamingDoesNotHoldTheShardInMemory) {
  TempDir tmp;
  const std::string shard = tmp / "big.jsonl.zst";
  {
    FILE* f = std::fopen(shard.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    ZSTD_CCtx* cctx = ZSTD_createCCtx();
    ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, 1);
    std::vector<char> out(ZSTD_CStreamOutSize());
    const std::string line = Doc(std::string(8000, 'z') + " the end", "RedPajamaC4");
    const int n_lines = static_cast<int>((int64_t{64} << 20) / line.size());
    for (int i = 0; i <= n_lines; ++i) {
      const bool last = i == n_lines;
      ZSTD_inBuffer in{line.data(), last ? 0 : line.size(), 0};
      size_t remaining;
      do {
        ZSTD_outBuffer o{out.data(), out.size(), 0};
        remaining = ZSTD_compressStream2(cctx, &o, &in, last ? ZSTD_e_end : ZSTD_e_continue);
        ASSERT_FALSE(ZSTD_isError(remaining));
        std::fwrite(out.data(), 1, o.pos, f);
      } while (last ? remaining != 0 : in.pos < in.size);
    }
    ZSTD_freeCCtx(cctx);
    std::fclose(f);
  }
  {
    std::ofstream clear("/proc/self/clear_refs");
    clear << "5";
    clear.flush();
    if (!clear.good()) GTEST_SKIP() << "cannot reset VmHWM here";
  }
  const int64_t before = PeakRssKb();
  ShardReader reader({shard});
  ShardDocument d;
  int64_t docs = 0;
  while (reader.Next(&d)) ++docs;
  const int64_t after = PeakRssKb();
  EXPECT_GT(reader.stats().uncompressed_bytes, int64_t{60} << 20);
  EXPECT_EQ(docs, reader.stats().lines);
  EXPECT_LT(after - before, 16 * 1024) << "peak RSS grew by " << (after - before) << " kB while streaming "
                                       << reader.stats().uncompressed_bytes << " bytes";
}

}  // namespace
}  // namespace longctx
