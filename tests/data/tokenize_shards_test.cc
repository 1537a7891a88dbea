// Why: tokenizing real shards runs for hours, in parallel, and gets
// interrupted; the manifest is what later stages trust. These tests check that
// the manifest's counts and checksums match the token files, that every
// document carries its EOS, that a re-run skips finished shards but redoes a
// corrupted or stale one, that the output does not depend on the thread count,
// and that TokenDataset presents the per-shard files as one collection (and
// refuses files that disagree with the manifest). The CLI is run once end to end.
#include "data/tokenize_shards.h"

#include <sys/stat.h>
#include <zstd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/byte_tokenizer.h"
#include "data/token_dataset.h"
#include "data/token_file.h"
#include "gtest/gtest.h"
#include "tests/support/test_util.h"

namespace longctx {
namespace {
namespace fs = std::filesystem;
using ::longctx::testing::ReadFile;
using ::longctx::testing::RunCommand;
using ::longctx::testing::TempDir;

std::string Frame(const std::string& data) {
  std::string out(ZSTD_compressBound(data.size()), '\0');
  const size_t n = ZSTD_compress(out.data(), out.size(), data.data(), data.size(), 3);
  out.resize(n);
  return out;
}

void Write(const std::string& path, const std::string& bytes) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string Doc(const std::string& text, const std::string& set) {
  return nlohmann::json{{"text", text}, {"meta", {{"redpajama_set_name", set}}}}.dump() + "\n";
}

// n_shards shards under root/train/chunk{1,2}; shard s has s + 2 documents of
// varied length, one RedPajamaGithub document, and shard 1 a malformed line.
// Returns the texts that should survive excluding Github, in shard order.
std::vector<std::vector<std::string>> MakeShards(const std::string& root, int n_shards) {
  std::vector<std::vector<std::string>> kept(n_shards);
  for (int s = 0; s < n_shards; ++s) {
    std::string lines;
    for (int d = 0; d < s + 2; ++d) {
      std::string text = "shard " + std::to_string(s) + " doc " + std::to_string(d) + ": ";
      for (int k = 0; k < 17 * (d + 1) + s; ++k) text += "word" + std::to_string(k % 7) + (k % 11 == 10 ? "\n" : " ");
      text += "\xC3\xA9t\xC3\xA9";  // UTF-8 survives
      lines += Doc(text, d % 2 ? "RedPajamaBook" : "RedPajamaC4");
      kept[s].push_back(text);
      if (d == 0) lines += Doc("def f(): pass", "RedPajamaGithub");
    }
    if (s == 1) lines += "{broken json\n";
    const std::string path = root + "/train/chunk" + std::to_string(1 + s % 2) + "/example_train_" +
                             std::to_string(s / 2) + ".jsonl.zst";
    Write(path, Frame(lines));
  }
  return kept;
}

TokenizeShardsOptions Options(const std::string& in, const std::string& out, int threads) {
  TokenizeShardsOptions o;
  o.inputs = {in};
  o.out_dir = out;
  o.tokenizer = "byte";
  o.threads = threads;
  o.progress = false;
  o.reader.exclude_sets = {"RedPajamaGithub"};
  return o;
}

nlohmann::json LoadJson(const std::string& path) { return nlohmann::json::parse(ReadFile(path)); }

ino_t Inode(const std::string& path) {
  struct stat sb;
  return ::stat(path.c_str(), &sb) == 0 ? sb.st_ino : 0;
}

TEST(TokenizeShardsTest, ManifestCountsAndChecksumsMatchTheTokenFiles) {
  TempDir tmp;
  const auto kept = MakeShards(tmp / "raw", 3);
  ::testing::internal::CaptureStderr();
  absl::StatusOr<TokenizeShardsResult> r = TokenizeShards(Options(tmp / "raw/train", tmp / "tok", 1));
  const std::string log = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NE(log.find("chunk2/example_train_0.jsonl.zst:5: malformed_json"), std::string::npos) << log;

  const nlohmann::json m = LoadJson(tmp / "tok/manifest.json");
  EXPECT_EQ(m["tokenizer"], "byte");
  EXPECT_EQ(m["vocab_size"], ByteTokenizer::kVocabSize);
  EXPECT_EQ(m["eos_id"], ByteTokenizer::kEos);
  ASSERT_EQ(m["shards"].size(), 3u);
  // Natural order: chunk1/example_train_0 (shard 0), chunk1/example_train_1 (2), chunk2/example_train_0 (1).
  const std::vector<int> order = {0, 2, 1};
  const std::vector<std::string> outputs = {"chunk1/example_train_0.ltok", "chunk1/example_train_1.ltok",
                                            "chunk2/example_train_0.ltok"};
  int64_t total_docs = 0, total_tokens = 0;
  for (int i = 0; i < 3; ++i) {
    const nlohmann::json& e = m["shards"][i];
    const int s = order[i];
    EXPECT_EQ(e["output"], outputs[i]);
    EXPECT_EQ(e["source"], tmp / "raw/train/" + outputs[i].substr(0, outputs[i].size() - 5) + ".jsonl.zst");
    absl::StatusOr<TokenFileReader> tf = TokenFileReader::Open(tmp / "tok/" + outputs[i]);
    ASSERT_TRUE(tf.ok()) << tf.status();
    EXPECT_EQ(tf->tokenizer_name(), "byte");
    ASSERT_EQ(tf->n_docs(), static_cast<int64_t>(kept[s].size()));
    int64_t tokens = 0;
    for (size_t d = 0; d < kept[s].size(); ++d) {
      std::vector<int32_t> want = ByteTokenizer().Encode(kept[s][d]);
      want.push_back(ByteTokenizer::kEos);  // EOS after every document, no BOS
      EXPECT_EQ(tf->DocCopy(static_cast<int64_t>(d)), want) << outputs[i] << " doc " << d;
      tokens += static_cast<int64_t>(want.size());
    }
    EXPECT_EQ(e["docs"], tf->n_docs());
    EXPECT_EQ(e["tokens"], tokens);
    EXPECT_EQ(e["tokens"], tf->n_tokens());
    // The checksum is the token file's own XXH64 of everything before it.
    const std::string bytes = ReadFile(tmp / "tok/" + outputs[i]);
    char hex[17];
    std::snprintf(hex, sizeof(hex), "%016llx",
                  static_cast<unsigned long long>(XxHash64(bytes.data(), bytes.size() - 8)));
    EXPECT_EQ(e["checksum"], hex);
    EXPECT_EQ(e["stats"]["filtered"], 1);
    EXPECT_EQ(e["stats"]["filtered_per_set"]["RedPajamaGithub"], 1);
    EXPECT_EQ(e["stats"]["errors"]["malformed_json"], s == 1 ? 1 : 0);
    total_docs += tf->n_docs();
    total_tokens += tokens;
  }
  EXPECT_EQ(m["totals"]["docs"], total_docs);
  EXPECT_EQ(m["totals"]["tokens"], total_tokens);
  EXPECT_EQ(m["totals"]["stats"]["errors"]["malformed_json"], 1);
  EXPECT_EQ(m["totals"]["stats"]["filtered"], 3);
  EXPECT_EQ(r->docs, total_docs);
  EXPECT_EQ(r->resumed, 0);
  EXPECT_EQ(r->totals.docs_per_set.at("RedPajamaC4") + r->totals.docs_per_set.at("RedPajamaBook"), total_docs);
}

TEST(TokenizeShardsTest, ResumeSkipsFinishedShardsAndRedoesCorruptOrStaleOnes) {
  TempDir tmp;
  MakeShards(tmp / "raw", 4);
  const TokenizeShardsOptions o = Options(tmp / "raw/train", tmp / "tok", 2);
  ::testing::internal::CaptureStderr();
  ASSERT_TRUE(TokenizeShards(o).ok());
  const std::string a = tmp / "tok/chunk1/example_train_0.ltok";
  const std::string b = tmp / "tok/chunk1/example_train_1.ltok";
  const std::string c = tmp / "tok/chunk2/example_train_0.ltok";
  const std::string d = tmp / "tok/chunk2/example_train_1.ltok";
  const std::string a_bytes = ReadFile(a), b_bytes = ReadFile(b), d_bytes = ReadFile(d);
  const std::string manifest = ReadFile(tmp / "tok/manifest.json");

  // Everything done: a re-run rewrites nothing.
  const ino_t ia = Inode(a), ib = Inode(b), ic = Inode(c), id = Inode(d);
  absl::StatusOr<TokenizeShardsResult> r = TokenizeShards(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->resumed, 4);
  EXPECT_EQ(Inode(a), ia);
  EXPECT_EQ(Inode(d), id);
  EXPECT_EQ(ReadFile(tmp / "tok/manifest.json"), manifest);

  // Corrupt a's tokens (checksum fails), drop b's record (as if killed between
  // the two renames), leave a stale tmp file beside c.
  std::string corrupt = a_bytes;
  corrupt[corrupt.size() / 2] ^= 0x01;
  Write(a, corrupt);
  fs::remove(b + ".json");
  Write(c + ".tmp.99999", "half-written");
  r = TokenizeShards(o);
  const std::string log = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->resumed, 2);
  EXPECT_FALSE(r->shards[0].resumed);
  EXPECT_FALSE(r->shards[1].resumed);
  EXPECT_TRUE(r->shards[2].resumed);
  EXPECT_EQ(ReadFile(a), a_bytes);  // redone, identical to the first run
  EXPECT_EQ(ReadFile(b), b_bytes);
  EXPECT_TRUE(fs::exists(b + ".json"));
  EXPECT_EQ(Inode(c), ic);  // untouched
  EXPECT_NE(Inode(b), ib);
  EXPECT_EQ(ReadFile(tmp / "tok/manifest.json"), manifest);
  EXPECT_NE(log.find("redoing chunk1/example_train_0.ltok"), std::string::npos) << log;
  EXPECT_NE(log.find("checksum mismatch"), std::string::npos) << log;

  // Other reader settings: nothing can be reused.
  TokenizeShardsOptions keep_all = o;
  keep_all.reader.exclude_sets.clear();
  ::testing::internal::CaptureStderr();
  r = TokenizeShards(keep_all);
  ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->resumed, 0);
  EXPECT_EQ(r->totals.filtered, 0);
  EXPECT_NE(ReadFile(d), d_bytes);  // now holds the Github document too

  // A changed source shard is redone as well.
  Write(tmp / "raw/train/chunk2/example_train_1.jsonl.zst", Frame(Doc("replaced", "RedPajamaC4")));
  ::testing::internal::CaptureStderr();
  r = TokenizeShards(keep_all);
  ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->resumed, 3);
  absl::StatusOr<TokenFileReader> tf = TokenFileReader::Open(d);
  ASSERT_TRUE(tf.ok());
  EXPECT_EQ(tf->n_docs(), 1);
}

TEST(TokenizeShardsTest, ParallelOutputIsIdenticalToSerial) {
  TempDir tmp;
  MakeShards(tmp / "raw", 9);
  ::testing::internal::CaptureStderr();
  absl::StatusOr<TokenizeShardsResult> serial = TokenizeShards(Options(tmp / "raw/train", tmp / "t1", 1));
  absl::StatusOr<TokenizeShardsResult> parallel = TokenizeShards(Options(tmp / "raw/train", tmp / "t4", 4));
  ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(serial.ok()) << serial.status();
  ASSERT_TRUE(parallel.ok()) << parallel.status();
  int files = 0;
  for (const auto& e : fs::recursive_directory_iterator(tmp / "t1")) {
    if (!e.is_regular_file()) continue;
    // Token files, shard records (same sources, so the same mtimes) and the manifest.
    const std::string rel = fs::relative(e.path(), tmp / "t1").string();
    EXPECT_EQ(ReadFile(e.path().string()), ReadFile(tmp / "t4/" + rel)) << rel;
    ++files;
  }
  EXPECT_EQ(files, 9 * 2 + 1);  // .ltok + record per shard, manifest
  EXPECT_EQ(serial->tokens, parallel->tokens);
}

TEST(TokenDatasetTest, PresentsShardFilesAsOneCollectionInManifestOrder) {
  TempDir tmp;
  const auto kept = MakeShards(tmp / "raw", 5);
  ::testing::internal::CaptureStderr();
  ASSERT_TRUE(TokenizeShards(Options(tmp / "raw/train", tmp / "tok", 2)).ok());
  ::testing::internal::GetCapturedStderr();
  absl::StatusOr<TokenDataset> ds = TokenDataset::Open({tmp / "tok"});
  ASSERT_TRUE(ds.ok()) << ds.status();
  // Manifest order: chunk1/0 (shard 0), chunk1/1 (2), chunk1/2 (4), chunk2/0 (1), chunk2/1 (3).
  std::vector<std::string> want;
  for (int s : {0, 2, 4, 1, 3}) want.insert(want.end(), kept[s].begin(), kept[s].end());
  ASSERT_EQ(ds->n_docs(), static_cast<int64_t>(want.size()));
  EXPECT_EQ(ds->n_files(), 5);
  EXPECT_EQ(ds->tokenizer_name(), "byte");
  EXPECT_EQ(ds->vocab_size(), ByteTokenizer::kVocabSize);
  int64_t tokens = 0;
  std::vector<int32_t> buffer;
  for (int64_t i = 0; i < ds->n_docs(); ++i) {
    std::vector<int32_t> ids = ByteTokenizer().Encode(want[i]);
    ids.push_back(ByteTokenizer::kEos);
    EXPECT_EQ(ds->doc_length(i), static_cast<int64_t>(ids.size()));
    const absl::Span<const int32_t> got = ds->doc(i, &buffer);
    EXPECT_EQ(std::vector<int32_t>(got.begin(), got.end()), ids) << "doc " << i;
    std::vector<int32_t> part(3);
    ds->ReadTokens(i, 1, 3, part.data());
    EXPECT_EQ(part, std::vector<int32_t>(ids.begin() + 1, ids.begin() + 4));
    tokens += static_cast<int64_t>(ids.size());
  }
  EXPECT_EQ(ds->n_tokens(), tokens);
  EXPECT_EQ(ds->Locate(2), std::make_pair(1, int64_t{0}));  // shard 0 has 2 documents
  EXPECT_EQ(ds->first_doc(1), 2);

  // Merging gives the same documents in one file.
  ASSERT_TRUE(WriteMergedTokenFile(*ds, tmp / "all.ltok").ok());
  absl::StatusOr<TokenFileReader> all = TokenFileReader::Open(tmp / "all.ltok");
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->n_docs(), ds->n_docs());
  EXPECT_EQ(all->DocCopy(7), ds->DocCopy(7));

  // Without the manifest: natural path order (the same here).
  fs::copy(tmp / "tok", tmp / "nomanifest", fs::copy_options::recursive);
  fs::remove(tmp / "nomanifest/manifest.json");
  absl::StatusOr<TokenDataset> plain = TokenDataset::Open({tmp / "nomanifest"});
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->n_docs(), ds->n_docs());
  EXPECT_EQ(plain->DocCopy(ds->n_docs() - 1), ds->DocCopy(ds->n_docs() - 1));

  // A file that no longer matches the manifest is refused.
  fs::copy_file(tmp / "tok/chunk1/example_train_1.ltok", tmp / "tok/chunk1/example_train_0.ltok",
                fs::copy_options::overwrite_existing);
  absl::StatusOr<TokenDataset> stale = TokenDataset::Open({tmp / "tok"});
  EXPECT_TRUE(absl::IsDataLoss(stale.status())) << stale.status();
  EXPECT_NE(stale.status().message().find("does not match its manifest"), std::string::npos);

  // Mixed tokenizers are refused.
  TokenFileWriter w;
  ASSERT_TRUE(w.Open(tmp / "other.ltok", 1000, "other").ok());
  ASSERT_TRUE(w.AddDocument(std::vector<int32_t>{1, 2, 3}).ok());
  ASSERT_TRUE(w.Finish().ok());
  EXPECT_FALSE(TokenDataset::Open({tmp / "all.ltok", tmp / "other.ltok"}).ok());
}

TEST(TokenizeShardsTest, CommandLine) {
  TempDir tmp;
  MakeShards(tmp / "raw", 3);
  const std::string bin = ::longctx::testing::LongctxBinary();
  ::longctx::testing::CommandResult r =
      RunCommand(bin + " data tokenize --input " + tmp / "raw/train" + " --out " + tmp / "tok" +
                 " --tokenizer byte --threads 2 --exclude_sets=RedPajamaGithub");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("tokenize: 3/3 shards (0 resumed)"), std::string::npos) << r.output;
  const nlohmann::json m = LoadJson(tmp / "tok/manifest.json");
  EXPECT_EQ(m["totals"]["stats"]["filtered"], 3);
  EXPECT_EQ(m["reader"]["exclude_sets"], nlohmann::json::array({"RedPajamaGithub"}));
  // The = spelling of --threads (also a TrainConfig override) works too; everything resumes.
  r = RunCommand(bin + " data tokenize --input " + tmp / "raw/train" + " --out " + tmp / "tok" +
                 " --threads=3 --exclude_sets=RedPajamaGithub");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("\"resumed\":3"), std::string::npos) << r.output;
  r = RunCommand(bin + " data merge --input " + tmp / "tok" + " --out " + tmp / "all.ltok");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  absl::StatusOr<TokenFileReader> all = TokenFileReader::Open(tmp / "all.ltok");
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->n_docs(), m["totals"]["docs"].get<int64_t>());
  // A missing input fails with a message.
  r = RunCommand(bin + " data tokenize --input " + tmp / "nowhere" + " --out " + tmp / "x");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("does not exist"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace longctx
