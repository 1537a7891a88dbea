// Why: the byte tokenizer must be the exact identity on bytes (any UTF-8,
// including multibyte characters, and even non-UTF-8 bytes) or every byte-level
// experiment silently trains on altered text; its special ids are part of the
// token file contract.
#include "data/byte_tokenizer.h"

#include <string>

#include "data/make_tokenizer.h"
#include "gtest/gtest.h"

namespace longctx {
namespace {

TEST(ByteTokenizerTest, EncodesBytesAsIds) {
  ByteTokenizer tok;
  const std::vector<int32_t> ids = tok.Encode("Hi!");
  EXPECT_EQ(ids, (std::vector<int32_t>{'H', 'i', '!'}));
  EXPECT_TRUE(tok.Encode("").empty());
}

TEST(ByteTokenizerTest, RoundTripsMultibyteUtf8) {
  ByteTokenizer tok;
  // 2-, 3- and 4-byte UTF-8 sequences.
  const std::string text = "h\xC3\xA9llo w\xC3\xB6rld \xE2\x80\x94 \xE6\x97\xA5\xE6\x9C\xAC "
                           "\xF0\x9F\x99\x82 end\n";
  const std::vector<int32_t> ids = tok.Encode(text);
  ASSERT_EQ(ids.size(), text.size());  // one id per byte, not per character
  for (int32_t id : ids) {
    EXPECT_GE(id, 0);
    EXPECT_LT(id, 256);
  }
  EXPECT_EQ(ids[1], 0xC3);  // bytes >= 0x80 map to ids >= 128 (no sign extension)
  EXPECT_EQ(ids[2], 0xA9);
  EXPECT_EQ(tok.Decode(ids), text);
}

TEST(ByteTokenizerTest, RoundTripsEveryByteValue) {
  ByteTokenizer tok;
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  const std::vector<int32_t> ids = tok.Encode(all);
  for (int b = 0; b < 256; ++b) EXPECT_EQ(ids[b], b);
  EXPECT_EQ(tok.Decode(ids), all);
}

TEST(ByteTokenizerTest, SpecialIds) {
  ByteTokenizer tok;
  EXPECT_EQ(tok.vocab_size(), 260);
  EXPECT_EQ(tok.bos_id(), 256);
  EXPECT_EQ(tok.eos_id(), 257);
  EXPECT_EQ(tok.pad_id(), 258);
  EXPECT_EQ(ByteTokenizer::kUnk, 259);
  EXPECT_EQ(tok.name(), "byte");
}

TEST(ByteTokenizerTest, DecodeDropsSpecialsByDefault) {
  ByteTokenizer tok;
  const std::vector<int32_t> ids = {256, 'a', 257, 'b', 258, 259, 'c', 999, -3};
  EXPECT_EQ(tok.Decode(ids), "abc");
}

TEST(ByteTokenizerTest, DecodeCanRenderSpecials) {
  ByteTokenizer tok(/*render_specials=*/true);
  const std::vector<int32_t> ids = {256, 'a', 257, 'b', 258, 259, 'c', 999};
  EXPECT_EQ(tok.Decode(ids), "<bos>a<eos>b<pad><unk>c<id:999>");
}

TEST(MakeTokenizerTest, KnowsByte) {
  auto tok = MakeTokenizer("byte");
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->name(), "byte");
  EXPECT_EQ((*tok)->vocab_size(), 260);
  EXPECT_EQ((*tok)->Decode((*tok)->Encode("x\xC3\xA9y")), "x\xC3\xA9y");
}

TEST(MakeTokenizerTest, UnknownNameListsKnownOnes) {
  auto tok = MakeTokenizer("gpt2");
  ASSERT_FALSE(tok.ok());
  EXPECT_EQ(tok.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string msg(tok.status().message());
  EXPECT_NE(msg.find("gpt2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("byte"), std::string::npos) << msg;
}

}  // namespace
}  // namespace longctx
