// Why: SFT learns only from what the chat template marks as the assistant's,
// and bad JSONL lines must be reported, not silently dropped: these tests pin
// the templates' token/loss layout, the reader's per-line accounting, the .lsft
// format's round trip and its corruption checks, and the `longctx data sft`
// command end to end.
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "data/byte_tokenizer.h"
#include "data/chat_template.h"
#include "data/make_tokenizer.h"
#include "data/sft_jsonl.h"
#include "data/sft_token_file.h"
#include "data/tokenizer.h"
#include "gtest/gtest.h"
#include "tests/support/test_util.h"

namespace longctx {
namespace {

using ::longctx::testing::TempDir;

// The text of the tokens whose loss flag equals `loss`, concatenated.
std::string TextWithLoss(const Tokenizer& tok, const TemplatedExample& t, bool loss) {
  std::vector<int32_t> ids;
  for (size_t i = 0; i < t.tokens.size(); ++i) {
    if ((t.loss[i] != 0) == loss) ids.push_back(t.tokens[i]);
  }
  return tok.Decode(ids);
}

TEST(ChatTemplateTest, ParsesBothFormsAndRejectsBadOnes) {
  absl::StatusOr<SftExample> a = ParseSftJsonLine(R"({"prompt": "hi", "response": "yo", "system": "be brief"})");
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ(a->messages.size(), 3u);
  EXPECT_EQ(a->messages[0].role, ChatRole::kSystem);
  EXPECT_EQ(a->messages[2].content, "yo");
  absl::StatusOr<SftExample> b = ParseSftJsonLine(
      R"({"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]})");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->messages.size(), 2u);
  for (const char* bad : {R"({"prompt": "x"})", R"({"messages": [{"role": "bot", "content": "x"}]})",
                          R"({"messages": [{"role": "user", "content": "x"}]})", R"([1, 2])", R"({"prompt": )",
                          "{\"prompt\": \"\xff\", \"response\": \"a\"}"}) {
    EXPECT_FALSE(ParseSftJsonLine(bad).ok()) << bad;
  }
}

TEST(ChatTemplateTest, ByteTemplateLossOnAssistantAndEosOnly) {
  ByteTokenizer tok;
  absl::StatusOr<ChatTemplate> t = ChatTemplate::ForTokenizer(&tok);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->kind(), ChatTemplateKind::kPlain);
  absl::StatusOr<SftExample> ex = ParseSftJsonLine(R"({"messages": [{"role": "system", "content": "S"},
      {"role": "user", "content": "U1"}, {"role": "assistant", "content": "A1"},
      {"role": "user", "content": "U2"}, {"role": "assistant", "content": "A2"}]})");
  ASSERT_TRUE(ex.ok());
  absl::StatusOr<TemplatedExample> out = t->Apply(*ex);
  ASSERT_TRUE(out.ok());
  ASSERT_EQ(out->tokens.size(), out->loss.size());
  EXPECT_EQ(out->tokens.front(), ByteTokenizer::kBos);
  EXPECT_EQ(TextWithLoss(tok, *out, true), "A1A2");
  EXPECT_EQ(TextWithLoss(tok, *out, false),
            "### System:\nS\n\n### User:\nU1\n\n### Assistant:\n### User:\nU2\n\n### Assistant:\n");
  int eos_with_loss = 0;
  for (size_t i = 0; i < out->tokens.size(); ++i) eos_with_loss += out->tokens[i] == ByteTokenizer::kEos && out->loss[i];
  EXPECT_EQ(eos_with_loss, 2);
  EXPECT_EQ(out->tokens.back(), ByteTokenizer::kEos);
}

TEST(ChatTemplateTest, Llama3AndLlama2Templates) {
  absl::StatusOr<std::unique_ptr<Tokenizer>> l3 = MakeTokenizer("llama3");
  absl::StatusOr<std::unique_ptr<Tokenizer>> l2 = MakeTokenizer("llama2");
  // A missing tokenizer is a broken setup, not a reason to skip (tokenizer_llama_test fails too).
  ASSERT_TRUE(l3.ok() && l2.ok()) << "tokenizer files not installed (run scripts/setup.sh): "
                                   << (l3.ok() ? l2.status() : l3.status());
  absl::StatusOr<SftExample> ex = ParseSftJsonLine(R"({"prompt": "Hi there", "response": "Hello!", "system": "Sys"})");
  ASSERT_TRUE(ex.ok());
  absl::StatusOr<ChatTemplate> t3 = ChatTemplate::ForTokenizer(l3->get());
  ASSERT_TRUE(t3.ok()) << t3.status();
  EXPECT_EQ(t3->kind(), ChatTemplateKind::kLlama3);
  absl::StatusOr<TemplatedExample> o3 = t3->Apply(*ex);
  ASSERT_TRUE(o3.ok());
  EXPECT_EQ((*l3)->Decode(o3->tokens),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nSys<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>");
  EXPECT_EQ(TextWithLoss(**l3, *o3, true), "Hello!<|eot_id|>");

  absl::StatusOr<ChatTemplate> t2 = ChatTemplate::ForTokenizer(l2->get());
  ASSERT_TRUE(t2.ok()) << t2.status();
  EXPECT_EQ(t2->kind(), ChatTemplateKind::kLlama2);
  absl::StatusOr<TemplatedExample> o2 = t2->Apply(*ex);
  ASSERT_TRUE(o2.ok());
  EXPECT_EQ(o2->tokens.front(), (*l2)->bos_id());
  EXPECT_EQ(o2->tokens.back(), (*l2)->eos_id());
  EXPECT_EQ(o2->loss.back(), 1);
  EXPECT_NE(TextWithLoss(**l2, *o2, false).find("[INST] <<SYS>>\nSys\n<</SYS>>\n\nHi there [/INST]"),
            std::string::npos);
  EXPECT_NE(TextWithLoss(**l2, *o2, true).find("Hello!"), std::string::npos);
  EXPECT_EQ(TextWithLoss(**l2, *o2, true).find("INST"), std::string::npos);
  // Llama-2 needs user/assistant alternation.
  absl::StatusOr<SftExample> two_users = ParseSftJsonLine(R"({"messages": [{"role": "user", "content": "a"},
      {"role": "user", "content": "b"}, {"role": "assistant", "content": "c"}]})");
  ASSERT_TRUE(two_users.ok());
  EXPECT_FALSE(t2->Apply(*two_users).ok());
}

TEST(SftJsonlTest, BadLinesAreCountedWithFileAndLineAndSkipped) {
  TempDir tmp;
  testing::WriteFile(tmp / "a.jsonl",
                     "{\"prompt\": \"p1\", \"response\": \"r1\"}\n"
                     "\n"
                     "{not json\n"
                     "{\"prompt\": \"p2\"}\n"
                     "{\"messages\": [{\"role\": \"user\", \"content\": \"u\"}, {\"role\": \"assistant\", "
                     "\"content\": \"r2\"}]}\n" +
                         std::string(300, 'x') + "\n");
  ByteTokenizer tok;
  absl::StatusOr<ChatTemplate> t = ChatTemplate::ForTokenizer(&tok);
  ASSERT_TRUE(t.ok());
  absl::StatusOr<std::vector<std::string>> files = SftInputFiles({tmp.path()});
  ASSERT_TRUE(files.ok()) << files.status();
  SftDataset data(tok.vocab_size(), tok.name());
  SftReadOptions opt;
  opt.max_line_bytes = 200;
  absl::StatusOr<SftReadStats> s = ReadSftJsonl(*files, *t, &data, opt);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->lines, 6);
  EXPECT_EQ(s->examples, 2);
  EXPECT_EQ(s->blank_lines, 1);
  EXPECT_EQ(s->malformed_json, 1);
  EXPECT_EQ(s->bad_example, 1);
  EXPECT_EQ(s->line_too_long, 1);
  EXPECT_EQ(s->lines, s->examples + s->blank_lines + s->skipped());
  ASSERT_EQ(s->problems.size(), 3u);
  EXPECT_EQ(s->problems[0].rfind(tmp / "a.jsonl:3: malformed_json", 0), 0u) << s->problems[0];
  EXPECT_EQ(s->problems[1].rfind(tmp / "a.jsonl:4: bad_example", 0), 0u) << s->problems[1];
  EXPECT_EQ(s->problems[2].rfind(tmp / "a.jsonl:6: line_too_long", 0), 0u) << s->problems[2];
  ASSERT_EQ(data.n_examples(), 2);
  EXPECT_EQ(data.source(0), tmp / "a.jsonl:1");
  EXPECT_EQ(data.source(1), tmp / "a.jsonl:5");
  EXPECT_FALSE(SftInputFiles({tmp / "missing"}).ok());
}

TEST(SftTokenFileTest, RoundTripsAndDetectsCorruption) {
  TempDir tmp;
  SftDataset d(260, "byte");
  ASSERT_TRUE(d.Add({256, 1, 2, 3, 257}, {0, 0, 1, 1, 1}, "x.jsonl:1").ok());
  ASSERT_TRUE(d.Add({256, 9}, {0, 1}, "x.jsonl:7").ok());
  EXPECT_FALSE(d.Add({260}, {0}, "x.jsonl:8").ok());
  EXPECT_FALSE(d.Add({1, 2}, {0}, "x.jsonl:9").ok());
  const std::string path = tmp / "d.lsft";
  ASSERT_TRUE(d.Write(path).ok());
  absl::StatusOr<SftDataset> r = SftDataset::Read(path);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->n_examples(), 2);
  EXPECT_EQ(r->tokenizer_name(), "byte");
  EXPECT_EQ(std::vector<int32_t>(r->tokens(0).begin(), r->tokens(0).end()), (std::vector<int32_t>{256, 1, 2, 3, 257}));
  EXPECT_EQ(std::vector<uint8_t>(r->loss(0).begin(), r->loss(0).end()), (std::vector<uint8_t>{0, 0, 1, 1, 1}));
  EXPECT_EQ(r->source(1), "x.jsonl:7");
  EXPECT_EQ(r->n_loss_tokens(), 4);
  // Flip one byte in the token array: the checksum catches it, naming the file.
  std::string bytes = testing::ReadFile(path);
  bytes[bytes.size() / 2] ^= 1;
  testing::WriteFile(tmp / "bad.lsft", bytes);
  absl::StatusOr<SftDataset> bad = SftDataset::Read(tmp / "bad.lsft");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find(tmp / "bad.lsft"), std::string::npos) << bad.status();
  testing::WriteFile(tmp / "short.lsft", bytes.substr(0, bytes.size() - 8));
  EXPECT_FALSE(SftDataset::Read(tmp / "short.lsft").ok());
}

TEST(SftCommandTest, BuildsAndDumpsWithLossMarks) {
  TempDir tmp;
  testing::WriteFile(tmp / "in.jsonl",
                     "{\"prompt\": \"What is 2+2?\", \"response\": \"Four.\"}\n"
                     "{\"prompt\": \"Name a color.\", \"response\": \"Blue.\"}\n"
                     "garbage\n");
  const std::string bin = testing::LongctxBinary();
  testing::CommandResult r =
      testing::RunCommand(absl::StrCat(bin, " data sft --input ", tmp / "in.jsonl", " --out ", tmp / "out",
                                       " --tokenizer byte"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("in.jsonl:3: malformed_json"), std::string::npos) << r.output;
  EXPECT_NE(testing::ReadFile(tmp / "out/report.json").find("\"malformed_json\": 1"), std::string::npos);
  r = testing::RunCommand(absl::StrCat(bin, " data sft --dump ", tmp / "out", " --seq_len 64 --batch_size 2"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("### User:\nWhat is 2+2?\n\n### Assistant:\n⟦Four.<eos>⟧"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("⟦Blue.<eos>⟧"), std::string::npos) << r.output;
  // A row too short for an example: an error naming it, not a truncation.
  r = testing::RunCommand(absl::StrCat(bin, " data sft --dump ", tmp / "out", " --seq_len 16 --batch_size 2"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("in.jsonl:1 has"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace longctx
