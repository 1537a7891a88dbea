// Why: every reader of a file written elsewhere (token files, safetensors,
// tokenizer JSON, shards) must refuse sizes and shapes that would make it
// allocate absurd memory or read without end — a header claiming 2^40
// elements, a count larger than the file, offsets past the end, /dev/zero —
// with an error naming the file and the field, before allocating. These are
// the hand-written cases; tests/fuzz/ searches for the rest.
#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "data/make_tokenizer.h"
#include "data/shard_reader.h"
#include "data/token_file.h"
#include "data/tokenizer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "train/checkpoint/safetensors.h"

namespace longctx {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

std::string Write(const std::string& name, const std::string& bytes) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

void PutU64(std::string* s, size_t at, uint64_t v) { std::memcpy(s->data() + at, &v, 8); }

// A valid 2-document token file written by the real writer.
std::string ValidTokenFile() {
  const std::string path = ::testing::TempDir() + "/valid.ltok";
  TokenFileWriter w;
  EXPECT_TRUE(w.Open(path, 260, "byte").ok());
  EXPECT_TRUE(w.AddDocument(std::vector<int32_t>{1, 2, 3}).ok());
  EXPECT_TRUE(w.AddDocument(std::vector<int32_t>{4}).ok());
  EXPECT_TRUE(w.Finish().ok());
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(ReaderLimits, TokenFileHeaderClaiming2To40TokensIsRefusedByName) {
  std::string bytes = ValidTokenFile();
  PutU64(&bytes, 24, uint64_t{1} << 40);  // n_tokens
  const std::string path = Write("huge_tokens.ltok", bytes);
  auto r = TokenFileReader::Open(path, {.verify_checksum = false});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), AllOf(HasSubstr(path), HasSubstr("n_tokens=1099511627776")));
}

TEST(ReaderLimits, TokenFileDocCountLargerThanTheFileIsRefused) {
  std::string bytes = ValidTokenFile();
  PutU64(&bytes, 32, ~uint64_t{0});  // n_docs = 2^64-1: (n_docs + 1) * 8 wraps in 64 bits
  const std::string path = Write("huge_docs.ltok", bytes);
  auto r = TokenFileReader::Open(path, {.verify_checksum = false});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), AllOf(HasSubstr(path), HasSubstr("n_docs=18446744073709551615")));
}

std::string Safetensors(const std::string& header, size_t data_bytes) {
  std::string out(8, '\0');
  PutU64(&out, 0, header.size());
  return out + header + std::string(data_bytes, '\0');
}

TEST(ReaderLimits, SafetensorsShapeOf2To40ElementsIsRefusedNamingTensorAndFile) {
  const std::string path = Write("huge_shape.safetensors",
      Safetensors(R"({"w":{"dtype":"F32","shape":[1099511627776],"data_offsets":[0,8]}})", 8));
  auto r = SafetensorsReader::Open(path);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), AllOf(HasSubstr(path), HasSubstr("tensor 'w'"), HasSubstr("needs 4398046511104")));
}

TEST(ReaderLimits, SafetensorsOffsetsPastTheEndOrOverflowingAreRefused) {
  const std::string past = Write("past_end.safetensors",
      Safetensors(R"({"w":{"dtype":"F32","shape":[1048576],"data_offsets":[0,4194304]}})", 8));
  auto r = SafetensorsReader::Open(past);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), AllOf(HasSubstr(past), HasSubstr("run past the end")));
  const std::string wrap = Write("wrap.safetensors",
      Safetensors(R"({"w":{"dtype":"F64","shape":[4611686018427387904,4],"data_offsets":[0,0]}})", 0));
  r = SafetensorsReader::Open(wrap);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), AllOf(HasSubstr("tensor 'w'"), HasSubstr("overflows")));
  const std::string neg = Write("negative.safetensors",
      Safetensors(R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4));
  r = SafetensorsReader::Open(neg);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("not a non-negative integer"));
  const std::string len = Write("header_len.safetensors", std::string("\xff\xff\xff\xff\xff\xff\xff\x7f{}", 10));
  r = SafetensorsReader::Open(len);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), AllOf(HasSubstr(len), HasSubstr("header length")));
}

TEST(ReaderLimits, TokenizerFromADeviceOrADirectoryIsAnErrorNotAHang) {
  for (const std::string& path : {std::string("/dev/zero"), ::testing::TempDir() + "/"}) {
    auto t = MakeTokenizer(path);
    ASSERT_FALSE(t.ok()) << path;
    EXPECT_THAT(std::string(t.status().message()), AllOf(HasSubstr(path), HasSubstr("not a regular file")));
  }
}

TEST(ReaderLimits, ShardLineLongerThanTheLimitIsSkippedUnread) {
  const std::string path = Write("long_line.jsonl", "{\"text\": \"" + std::string(5000, 'x') + "\"}\n{\"text\": \"ok\"}\n");
  ShardReaderOptions o;
  o.max_line_bytes = 1000;
  o.max_logged_per_file = 0;
  ShardReader reader({path}, o);
  ShardDocument doc;
  ASSERT_TRUE(reader.Next(&doc));
  EXPECT_EQ(doc.text, "ok");
  EXPECT_FALSE(reader.Next(&doc));
  EXPECT_EQ(reader.stats().line_too_long, 1);
}

}  // namespace
}  // namespace longctx
