// Why: the token file is what hours of training read; a wrong width, a bad
// index or an undetected truncation would silently corrupt every batch. These
// tests pin the checksum to the reference XXH64, round-trip both token widths,
// and check that each kind of corruption is reported with the path and the
// reason. The text corpus builder (which writes these files) is tested here too.
#include "data/token_file.h"

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <utility>

#include "data/byte_tokenizer.h"
#include "data/text_corpus.h"
#include "gtest/gtest.h"
#include "tests/support/test_seed.h"

namespace longctx {
namespace {
namespace fs = std::filesystem;

class TempDir {
 public:
  explicit TempDir(const std::string& name)
      : path_(fs::temp_directory_path() /
              ("longctx_token_file_test_" + std::to_string(::getpid()) + "_" + name)) {
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string File(const std::string& name) const { return (path_ / name).string(); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void WriteAll(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
  ASSERT_TRUE(out.good()) << path;
}

std::string Msg(const absl::Status& s) { return std::string(s.message()); }

// ---------------------------------------------------------------------------
// XXH64

TEST(XxHash64Test, MatchesReferenceVectors) {
  // Reference values from libxxhash 0.8.1 (XXH64).
  EXPECT_EQ(XxHash64("", 0), 0xEF46DB3751D8E999ULL);
  EXPECT_EQ(XxHash64("a", 1), 0xD24EC4F1A98C6E5BULL);
  EXPECT_EQ(XxHash64("abc", 3), 0x44BC2CF5AD770999ULL);
  EXPECT_EQ(XxHash64("abc", 3, 12345), 0x1700E64F6F23509ULL);
  const std::string s = "Nobody inspects the spammish repetition";
  EXPECT_EQ(XxHash64(s.data(), s.size()), 0xFBCEA83C8A378BF1ULL);
  std::string big;
  for (int r = 0; r < 3; ++r)
    for (int b = 0; b < 256; ++b) big.push_back(static_cast<char>(b));
  big += "xyz";
  EXPECT_EQ(XxHash64(big.data(), big.size()), 0xE921A1B45BD779F8ULL);
}

// Values of the hand-written XXH64 that token files were checksummed with
// before libxxhash replaced it: the .ltok format must not change. 1 MiB + 13
// bytes of a fixed LCG pattern cover the 32-byte stripes, every tail length
// class and the seeded lane initialisation.
TEST(XxHash64Test, MatchesThePreviousImplementation) {
  std::string big((size_t{1} << 20) + 13, '\0');
  uint32_t x = 12345;
  for (char& c : big) {
    x = x * 1103515245u + 12345u;
    c = static_cast<char>(x >> 24);
  }
  EXPECT_EQ(XxHash64(big.data(), big.size()), 0xA7320F42749B0549ULL);
  EXPECT_EQ(XxHash64(big.data(), big.size(), 1), 0xF37250BF61B7B586ULL);
  EXPECT_EQ(XxHash64(big.data(), big.size(), 0x9E3779B185EBCA87ULL), 0xF478AA3168D121D8ULL);
  const std::pair<size_t, uint64_t> prefixes[] = {{31, 0x79872421C22DDE2BULL}, {32, 0xEF599CD352E2A9E2ULL},
                                                  {33, 0x26D0E772D829D8B4ULL}, {63, 0x4BAF38CB8E52DD9EULL},
                                                  {64, 0x23A6C82154090DDEULL}, {100, 0xAFE8CDB2963089B8ULL}};
  for (const auto& [n, want] : prefixes) EXPECT_EQ(XxHash64(big.data(), n, 7), want) << n;
}

// The token files checked in as fuzz seeds were written with the previous
// implementation's checksums: they still open with verification on, and the
// one whose checksum field is zero is still rejected.
TEST(XxHash64Test, CheckedInTokenFilesStillVerify) {
  const std::string dir = std::string(LONGCTX_SOURCE_DIR) + "/tests/fuzz/corpus/token_file/";
  for (const char* name : {"u16_three_docs.ltok", "u32_vocab70000.ltok", "empty_doc.ltok", "no_docs.ltok"}) {
    absl::StatusOr<TokenFileReader> r = TokenFileReader::Open(dir + name);
    EXPECT_TRUE(r.ok()) << name << ": " << r.status();
  }
  absl::StatusOr<TokenFileReader> bad = TokenFileReader::Open(dir + "no_checksum.ltok");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(Msg(bad.status()).find("checksum mismatch"), std::string::npos) << bad.status();
}

TEST(XxHash64Test, StreamMovesItsState) {
  XxHash64Stream a(3);
  a.Update("ab", 2);
  XxHash64Stream b = std::move(a);
  b.Update("c", 1);
  EXPECT_EQ(b.Digest(), XxHash64("abc", 3, 3));
  XxHash64Stream c;
  c = std::move(b);
  EXPECT_EQ(c.Digest(), XxHash64("abc", 3, 3));
}

TEST(XxHash64Test, StreamingEqualsOneShot) {
  std::mt19937 rng(test::FreshSeed(7));
  std::string data(5000, '\0');
  for (char& c : data) c = static_cast<char>(rng());
  for (int trial = 0; trial < 20; ++trial) {
    XxHash64Stream s(trial);
    size_t pos = 0;
    while (pos < data.size()) {
      const size_t n = std::min<size_t>(rng() % 70, data.size() - pos);
      s.Update(data.data() + pos, n);
      pos += n;
    }
    EXPECT_EQ(s.Digest(), XxHash64(data.data(), data.size(), trial)) << trial;
  }
}

// ---------------------------------------------------------------------------
// Round trips

std::vector<std::vector<int32_t>> RandomDocs(int n, int64_t vocab, uint32_t seed) {
  std::mt19937 rng(test::FreshSeed(seed));
  std::vector<std::vector<int32_t>> docs(n);
  for (int i = 0; i < n; ++i) {
    const int len = (i % 5 == 3) ? 0 : static_cast<int>(rng() % 200);  // some empty documents
    for (int j = 0; j < len; ++j) docs[i].push_back(static_cast<int32_t>(rng() % vocab));
  }
  docs[1] = {static_cast<int32_t>(vocab - 1)};  // the largest id survives the width
  return docs;
}

void WriteDocs(const std::string& path, int64_t vocab, const std::string& name,
               const std::vector<std::vector<int32_t>>& docs) {
  TokenFileWriter w;
  ASSERT_TRUE(w.Open(path, vocab, name).ok());
  for (const auto& d : docs) ASSERT_TRUE(w.AddDocument(d).ok());
  const absl::Status st = w.Finish();
  ASSERT_TRUE(st.ok()) << st;
}

void CheckRoundTrip(int64_t vocab, uint32_t expected_width) {
  TempDir dir("roundtrip" + std::to_string(vocab));
  const std::string path = dir.File("x.ltok");
  const auto docs = RandomDocs(40, vocab, 11);
  WriteDocs(path, vocab, "tok-name", docs);
  int64_t total = 0;
  for (const auto& d : docs) total += static_cast<int64_t>(d.size());

  auto r = TokenFileReader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->token_width(), expected_width);
  EXPECT_EQ(r->vocab_size(), vocab);
  EXPECT_EQ(r->tokenizer_name(), "tok-name");
  EXPECT_EQ(r->n_docs(), 40);
  EXPECT_EQ(r->n_tokens(), total);
  std::vector<int32_t> buffer;
  int64_t offset = 0;
  for (int i = 0; i < 40; ++i) {
    ASSERT_EQ(r->doc_length(i), static_cast<int64_t>(docs[i].size())) << i;
    ASSERT_EQ(r->doc_offset(i), offset);
    const absl::Span<const int32_t> span = r->doc(i, &buffer);
    EXPECT_EQ(std::vector<int32_t>(span.begin(), span.end()), docs[i]) << i;
    EXPECT_EQ(r->DocCopy(i), docs[i]);
    for (size_t j = 0; j < docs[i].size(); ++j) EXPECT_EQ(r->token(offset + j), docs[i][j]);
    if (docs[i].size() >= 10) {
      int32_t part[5];
      r->ReadTokens(i, 3, 5, part);
      EXPECT_EQ(std::vector<int32_t>(part, part + 5),
                std::vector<int32_t>(docs[i].begin() + 3, docs[i].begin() + 8));
    }
    offset += static_cast<int64_t>(docs[i].size());
  }
  // File size matches the documented layout.
  const uint64_t header = (kTokenFileFixedHeaderBytes + 8 + 7) / 8 * 8;  // "tok-name" = 8 bytes
  const uint64_t expected = header + (total * expected_width + 7) / 8 * 8 + 8 * 41 + 8;
  EXPECT_EQ(fs::file_size(path), expected);
  // The reader survives a move.
  TokenFileReader moved = std::move(*r);
  EXPECT_EQ(moved.DocCopy(1), docs[1]);
}

TEST(TokenFileTest, RoundTripU16) { CheckRoundTrip(260, 2); }
TEST(TokenFileTest, RoundTripU16AtLimit) { CheckRoundTrip(65536, 2); }
TEST(TokenFileTest, RoundTripU32) { CheckRoundTrip(128256, 4); }

TEST(TokenFileTest, EmptyFileRoundTrips) {
  TempDir dir("empty");
  const std::string path = dir.File("e.ltok");
  WriteDocs(path, 260, "byte", {});
  auto r = TokenFileReader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->n_docs(), 0);
  EXPECT_EQ(r->n_tokens(), 0);
}

TEST(TokenFileTest, WriterRejectsOutOfVocabIds) {
  TempDir dir("writer_vocab");
  TokenFileWriter w;
  ASSERT_TRUE(w.Open(dir.File("v.ltok"), 260, "byte").ok());
  const std::vector<int32_t> high = {1, 2, 260};
  absl::Status st = w.AddDocument(high);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(Msg(st).find("260"), std::string::npos) << st;
  const std::vector<int32_t> negative = {-1};
  EXPECT_FALSE(w.AddDocument(negative).ok());
  // The bad documents were not added.
  const std::vector<int32_t> good = {5};
  ASSERT_TRUE(w.AddDocument(good).ok());
  EXPECT_EQ(w.n_docs(), 1);
  ASSERT_TRUE(w.Finish().ok());
  EXPECT_FALSE(w.AddDocument(good).ok());  // finished
  EXPECT_FALSE(w.Finish().ok());
}

TEST(TokenFileTest, WriterRejectsBadVocab) {
  TempDir dir("writer_badvocab");
  TokenFileWriter w;
  EXPECT_FALSE(w.Open(dir.File("v.ltok"), 0, "byte").ok());
}

TEST(TokenFileTest, UnfinishedWriterLeavesNothing) {
  TempDir dir("unfinished");
  {
    TokenFileWriter w;
    ASSERT_TRUE(w.Open(dir.File("u.ltok"), 260, "byte").ok());
    const std::vector<int32_t> doc = {1, 2, 3};
    ASSERT_TRUE(w.AddDocument(doc).ok());
  }
  EXPECT_TRUE(fs::is_empty(dir.path()));  // neither u.ltok nor its tmp file
}

TEST(TokenFileTest, WriterErrorNamesThePath) {
  TokenFileWriter w;
  const std::string path = "/nonexistent_dir_longctx/x.ltok";
  absl::Status st = w.Open(path, 260, "byte");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(Msg(st).find(path), std::string::npos) << st;
}

TEST(TokenFileTest, MissingFileIsNotFound) {
  auto r = TokenFileReader::Open("/nonexistent_dir_longctx/x.ltok");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
}

// ---------------------------------------------------------------------------
// Corruption

class CorruptionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::make_unique<TempDir>("corrupt");
    good_path_ = dir_->File("good.ltok");
    docs_ = {{1, 2, 3}, {4, 5}, {6, 7, 8, 9}, {10}};
    WriteDocs(good_path_, 260, "byte", docs_);
    bytes_ = ReadAll(good_path_);
    ASSERT_TRUE(TokenFileReader::Open(good_path_).ok());
    // 56-byte fixed header + "byte" → 64; 10 u16 tokens → 20 bytes padded to 24.
    tokens_at_ = 64;
    offsets_at_ = 64 + 24;
    ASSERT_EQ(bytes_.size(), offsets_at_ + 8 * 5 + 8);
  }
  // Writes bytes to a new file and returns the error of opening it.
  absl::Status OpenCorrupt(const std::string& bytes, bool fix_checksum = false,
                           TokenFileReadOptions options = {}) {
    std::string b = bytes;
    if (fix_checksum) {
      const uint64_t h = XxHash64(b.data(), b.size() - 8);
      std::memcpy(&b[b.size() - 8], &h, 8);
    }
    path_ = dir_->File("bad" + std::to_string(counter_++) + ".ltok");
    WriteAll(path_, b);
    auto r = TokenFileReader::Open(path_, options);
    return r.status();
  }
  void ExpectError(const absl::Status& st, const std::string& what) {
    ASSERT_FALSE(st.ok()) << "expected an error about " << what;
    EXPECT_NE(Msg(st).find(path_), std::string::npos) << st;
    EXPECT_NE(Msg(st).find(what), std::string::npos) << st;
  }
  void PutU64(std::string* b, size_t at, uint64_t v) { std::memcpy(&(*b)[at], &v, 8); }

  std::unique_ptr<TempDir> dir_;
  std::string good_path_, path_;
  std::vector<std::vector<int32_t>> docs_;
  std::string bytes_;
  size_t tokens_at_ = 0, offsets_at_ = 0;
  int counter_ = 0;
};

TEST_F(CorruptionTest, BadMagic) {
  std::string b = bytes_;
  b[3] = 'X';
  ExpectError(OpenCorrupt(b, /*fix_checksum=*/true), "magic");
}

TEST_F(CorruptionTest, BadVersion) {
  std::string b = bytes_;
  b[8] = 9;
  ExpectError(OpenCorrupt(b, true), "version");
}

TEST_F(CorruptionTest, BadWidth) {
  std::string b = bytes_;
  b[12] = 3;
  ExpectError(OpenCorrupt(b, true), "width");
}

TEST_F(CorruptionTest, Truncated) {
  ExpectError(OpenCorrupt(bytes_.substr(0, bytes_.size() - 5)), "truncated");
  ExpectError(OpenCorrupt(bytes_.substr(0, bytes_.size() - 8)), "truncated");  // checksum lost
  ExpectError(OpenCorrupt(bytes_.substr(0, 30)), "truncated");
  ExpectError(OpenCorrupt(""), "truncated");
}

TEST_F(CorruptionTest, TrailingBytes) {
  ExpectError(OpenCorrupt(bytes_ + "junk0000"), "size mismatch");
}

TEST_F(CorruptionTest, CorruptCountsDoNotOverflow) {
  std::string b = bytes_;
  PutU64(&b, 24, ~uint64_t{0} / 2);  // n_tokens absurdly large
  ExpectError(OpenCorrupt(b, true), "truncated");
}

TEST_F(CorruptionTest, BadChecksum) {
  std::string b = bytes_;
  b[tokens_at_ + 2] = 42;  // token 1: 2 → 42, still in vocab
  ExpectError(OpenCorrupt(b), "checksum");
  // Skipping the checksum lets the (structurally valid) file open.
  TokenFileReadOptions no_checksum;
  no_checksum.verify_checksum = false;
  EXPECT_TRUE(OpenCorrupt(b, false, no_checksum).ok());
  // A flipped checksum byte alone is caught too.
  std::string c = bytes_;
  c[c.size() - 1] ^= 1;
  ExpectError(OpenCorrupt(c), "checksum");
}

TEST_F(CorruptionTest, OffsetsOutOfRange) {
  std::string b = bytes_;
  PutU64(&b, offsets_at_ + 8 * 2, 1000);  // offsets[2] beyond n_tokens = 10
  ExpectError(OpenCorrupt(b), "offsets");
  ExpectError(OpenCorrupt(b, /*fix_checksum=*/true), "offsets");
}

TEST_F(CorruptionTest, OffsetsNotMonotonic) {
  std::string b = bytes_;
  PutU64(&b, offsets_at_ + 8 * 2, 1);  // offsets = 0, 3, 1, 9, 10
  ExpectError(OpenCorrupt(b, true), "offsets");
  std::string c = bytes_;
  PutU64(&c, offsets_at_, 2);  // offsets[0] != 0
  ExpectError(OpenCorrupt(c, true), "offsets[0]");
  std::string d = bytes_;
  PutU64(&d, offsets_at_ + 8 * 4, 9);  // last offset != n_tokens
  ExpectError(OpenCorrupt(d, true), "n_tokens");
}

TEST_F(CorruptionTest, TokenOutOfVocab) {
  std::string b = bytes_;
  const uint16_t bad = 300;  // vocab is 260
  std::memcpy(&b[tokens_at_ + 2 * 5], &bad, 2);  // token 5 = first of document 2
  const absl::Status st = OpenCorrupt(b, /*fix_checksum=*/true);
  ExpectError(st, "vocab_size");
  EXPECT_NE(Msg(st).find("document 2"), std::string::npos) << st;
  TokenFileReadOptions no_tokens;
  no_tokens.verify_tokens = false;
  EXPECT_TRUE(OpenCorrupt(b, true, no_tokens).ok());
}

TEST_F(CorruptionTest, GoodFileStillOpensAfterCopy) {
  EXPECT_TRUE(OpenCorrupt(bytes_).ok());  // the helper itself does not corrupt
}

// ---------------------------------------------------------------------------
// Text corpus

TEST(Utf8Test, FindsInvalidSequences) {
  EXPECT_EQ(FindInvalidUtf8("plain ascii text, long enough for the fast path"), -1);
  EXPECT_EQ(FindInvalidUtf8("\xC3\xA9\xE2\x80\x94\xF0\x9F\x99\x82"), -1);
  EXPECT_EQ(FindInvalidUtf8("ab\xFF"), 2);
  EXPECT_EQ(FindInvalidUtf8("a\xC0\x80"), 1);          // overlong NUL
  EXPECT_EQ(FindInvalidUtf8("a\xE0\x80\x80"), 1);      // overlong 3-byte
  EXPECT_EQ(FindInvalidUtf8("\xED\xA0\x80"), 0);       // surrogate
  EXPECT_EQ(FindInvalidUtf8("\xF4\x90\x80\x80"), 0);   // > U+10FFFF
  EXPECT_EQ(FindInvalidUtf8("abcdefghij\xE2\x80"), 10);  // truncated at the end
  EXPECT_EQ(FindInvalidUtf8("\xC3x"), 0);              // missing continuation
}

TEST(TextCorpusTest, SplitsOnTwoBlankLines) {
  TextCorpusOptions opt;
  opt.split_on_blank_lines = true;
  const std::string text = "\n\npara one\n\nstill one\n\n\npara two\n \n\t\npara three\nend";
  const auto docs = SplitTextIntoDocuments(text, opt);
  ASSERT_EQ(docs.size(), 3u);
  EXPECT_EQ(docs[0], "para one\n\nstill one\n");
  EXPECT_EQ(docs[1], "para two\n");
  EXPECT_EQ(docs[2], "para three\nend");
  opt.split_on_blank_lines = false;
  const auto whole = SplitTextIntoDocuments(text, opt);
  ASSERT_EQ(whole.size(), 1u);
  EXPECT_EQ(whole[0], text);
  EXPECT_TRUE(SplitTextIntoDocuments(" \n\t\n", opt).empty());
}

TEST(TextCorpusTest, MaxDocBytesCutsAtLinesAndCharacters) {
  TextCorpusOptions opt;
  opt.max_doc_bytes = 10;
  // No newlines; multibyte characters must not be cut.
  std::string text;
  for (int i = 0; i < 20; ++i) text += "a\xE2\x80\x94";  // 4 bytes each
  const auto pieces = SplitTextIntoDocuments(text, opt);
  std::string joined;
  for (auto p : pieces) {
    EXPECT_LE(p.size(), 10u);
    EXPECT_EQ(FindInvalidUtf8(p), -1) << p;
    joined += p;
  }
  EXPECT_EQ(joined, text);
  EXPECT_GT(pieces.size(), 8u);
  // With newlines: cuts after a line end in the second half of the window.
  const auto lines = SplitTextIntoDocuments("abcdef\nghijklmno\n", opt);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0], "abcdef\n");
  EXPECT_EQ(lines[1], "ghijklmno\n");
}

TEST(TextCorpusTest, BuildsFromDirectorySkippingBinary) {
  TempDir dir("corpus");
  fs::create_directories(dir.path() / "sub");
  fs::create_directories(dir.path() / ".git");
  WriteAll(dir.File("b.txt"), "second file \xC3\xA9\n");
  WriteAll(dir.File("a.txt"), "first file\n");
  WriteAll((dir.path() / "sub" / "c.txt").string(), "third\n\n\nfourth\n");
  WriteAll(dir.File("image.bin"), std::string("PK\0\x03\x04zz", 7));
  WriteAll(dir.File("latin1.txt"), "caf\xE9\n");
  WriteAll(dir.File("empty.txt"), "  \n");
  WriteAll(dir.File(".hidden.txt"), "hidden\n");
  WriteAll((dir.path() / ".git" / "HEAD").string(), "ref: x\n");
  const std::string out = dir.File("corpus.ltok");

  ByteTokenizer tok;
  TextCorpusOptions opt;
  opt.log_summary = false;
  TextCorpusStats stats;
  absl::Status st = BuildTokenFileFromText({dir.path().string()}, tok, out, opt, &stats);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(stats.files_seen, 6);  // hidden file and .git skipped silently
  EXPECT_EQ(stats.files_used, 3);
  EXPECT_EQ(stats.files_skipped, 3);
  ASSERT_EQ(stats.skipped.size(), 3u);
  // Sorted order: empty.txt, image.bin, latin1.txt.
  EXPECT_NE(stats.skipped[0].find("empty.txt: empty"), std::string::npos) << stats.skipped[0];
  EXPECT_NE(stats.skipped[1].find("image.bin: binary (NUL"), std::string::npos) << stats.skipped[1];
  EXPECT_NE(stats.skipped[2].find("latin1.txt: binary (invalid UTF-8 at offset 3"),
            std::string::npos)
      << stats.skipped[2];
  EXPECT_EQ(stats.docs, 3);

  auto r = TokenFileReader::Open(out);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->tokenizer_name(), "byte");
  EXPECT_EQ(r->vocab_size(), 260);
  ASSERT_EQ(r->n_docs(), 3);
  EXPECT_EQ(r->n_tokens(), stats.tokens);
  // Sorted: a.txt, b.txt, sub/c.txt; each followed by EOS, no BOS.
  const std::vector<std::string> expected = {"first file\n", "second file \xC3\xA9\n",
                                             "third\n\n\nfourth\n"};
  for (int i = 0; i < 3; ++i) {
    std::vector<int32_t> ids = r->DocCopy(i);
    ASSERT_FALSE(ids.empty());
    EXPECT_EQ(ids.back(), tok.eos_id());
    EXPECT_NE(ids.front(), tok.bos_id());
    ids.pop_back();
    EXPECT_EQ(tok.Decode(ids), expected[i]);
  }

  // Rebuilding in place with paragraph splitting: the old output inside the
  // input directory is not read, and c.txt becomes two documents.
  opt.split_on_blank_lines = true;
  TextCorpusStats stats2;
  st = BuildTokenFileFromText({dir.path().string()}, tok, out, opt, &stats2);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(stats2.files_seen, 6);
  EXPECT_EQ(stats2.docs, 4);
  auto r2 = TokenFileReader::Open(out);
  ASSERT_TRUE(r2.ok()) << r2.status();
  ASSERT_EQ(r2->n_docs(), 4);
  std::vector<int32_t> last = r2->DocCopy(3);
  last.pop_back();
  EXPECT_EQ(tok.Decode(last), "fourth\n");
}

TEST(TextCorpusTest, MissingInputIsAnError) {
  TempDir dir("corpus_missing");
  ByteTokenizer tok;
  TextCorpusOptions opt;
  opt.log_summary = false;
  const std::string missing = dir.File("nope");
  absl::Status st = BuildTokenFileFromText({missing}, tok, dir.File("o.ltok"), opt);
  EXPECT_EQ(st.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(Msg(st).find(missing), std::string::npos);
}

TEST(TextCorpusTest, NoDocumentsIsAnErrorAndWritesNothing) {
  TempDir dir("corpus_nodocs");
  WriteAll(dir.File("x.bin"), std::string("\0\0\0", 3));
  ByteTokenizer tok;
  TextCorpusOptions opt;
  opt.log_summary = false;
  const std::string out = dir.File("out.ltok");
  absl::Status st = BuildTokenFileFromText({dir.File("x.bin")}, tok, out, opt);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(Msg(st).find("x.bin"), std::string::npos) << st;
  EXPECT_FALSE(fs::exists(out));
  // Only x.bin remains (no tmp file).
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 1);
}

}  // namespace
}  // namespace longctx
