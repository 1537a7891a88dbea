// Why: SFT learns only from what the chat template marks as the assistant's,
// and bad JSONL lines must be reported, not silently dropped: these tests pin
// the templates' token/loss layout, the reader's per-line accounting, the .lsft
// format's round trip and its corruption checks, and the `longctx data sft`
// command end to end.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

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

// Python's str.isspace(), which Jinja's trim and str.strip() use: 29 code
// points in all (Python 3.11: [c for c in range(0x110000) if chr(c).isspace()]).
TEST(ChatTemplateTest, StripIsPythonStrStrip) {
  int n = 0;
  for (char32_t cp = 0; cp <= 0x10FFFF; ++cp) n += IsPythonWhitespace(cp);
  EXPECT_EQ(n, 29);
  for (char32_t cp : {0x09, 0x0D, 0x1C, 0x1F, 0x20, 0x85, 0xA0, 0x1680, 0x2000, 0x200A, 0x2028, 0x2029, 0x202F,
                      0x205F, 0x3000}) {
    EXPECT_TRUE(IsPythonWhitespace(cp)) << std::hex << static_cast<uint32_t>(cp);
  }
  for (char32_t cp : {0x08, 0x0E, 0x1B, 0x21, 0x180E, 0x200B, 0xFEFF}) {
    EXPECT_FALSE(IsPythonWhitespace(cp)) << std::hex << static_cast<uint32_t>(cp);
  }
  EXPECT_EQ(StripPythonWhitespace(" \t\n\r\v\f\x1c\xc2\x85\xc2\xa0\xe3\x80\x80 a b \xe2\x80\xa8\n"), "a b");
  EXPECT_EQ(StripPythonWhitespace("\xe2\x80\x8b" "a\xe2\x80\x8b"), "\xe2\x80\x8b" "a\xe2\x80\x8b");  // U+200B stays
  EXPECT_EQ(StripPythonWhitespace(" \n "), "");
  EXPECT_EQ(StripPythonWhitespace(""), "");
  ByteTokenizer tok;
  absl::StatusOr<ChatTemplate> t = ChatTemplate::ForTokenizer(&tok);
  ASSERT_TRUE(t.ok());
  EXPECT_FALSE(t->trims_content());
}

// The released Instruct models' chat templates strip each message's content
// (Llama-3: `message['content'] | trim`; Llama-2: `content.strip()` of the
// [<<SYS>> block +] user text and of the answer), so an example padded with
// spaces, tabs, newlines and Unicode whitespace must give the token ids of the
// stripped one. The expected Llama-3 text is what jinja2 3.1 renders from
// meta-llama/Meta-Llama-3-8B-Instruct's template for these messages.
TEST(ChatTemplateTest, Llama3AndLlama2TrimContentAsTheReleasedTemplatesDo) {
  absl::StatusOr<std::unique_ptr<Tokenizer>> l3 = MakeTokenizer("llama3");
  absl::StatusOr<std::unique_ptr<Tokenizer>> l2 = MakeTokenizer("llama2");
  ASSERT_TRUE(l3.ok() && l2.ok()) << "tokenizer files not installed (run scripts/setup.sh)";
  auto example = [](std::vector<std::pair<ChatRole, std::string>> m) {
    SftExample ex;
    for (auto& [role, content] : m) ex.messages.push_back({role, content});
    return ex;
  };
  using R = ChatRole;
  const SftExample padded = example({{R::kSystem, " \tSys\n"},
                                     {R::kUser, "\n Hi there\xe3\x80\x80\t"},
                                     {R::kAssistant, "\xc2\xa0Hello!\xe2\x80\x8b\n\n"},
                                     {R::kUser, "\xe2\x80\xa8 more \xc2\x85"},
                                     {R::kAssistant, "\t ok \x1c\r\n"}});
  absl::StatusOr<ChatTemplate> t3 = ChatTemplate::ForTokenizer(l3->get());
  ASSERT_TRUE(t3.ok()) << t3.status();
  absl::StatusOr<TemplatedExample> o3 = t3->Apply(padded);
  ASSERT_TRUE(o3.ok()) << o3.status();
  absl::StatusOr<TemplatedExample> s3 = t3->Apply(example({{R::kSystem, "Sys"},
                                                           {R::kUser, "Hi there"},
                                                           {R::kAssistant, "Hello!\xe2\x80\x8b"},
                                                           {R::kUser, "more"},
                                                           {R::kAssistant, "ok"}}));
  ASSERT_TRUE(s3.ok()) << s3.status();
  EXPECT_EQ(o3->tokens, s3->tokens);
  EXPECT_EQ(o3->loss, s3->loss);
  EXPECT_EQ((*l3)->Decode(o3->tokens),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nSys<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nHello!\xe2\x80\x8b<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nmore<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nok<|eot_id|>");

  // Llama-2: jinja2 renders "<s>[INST] <<SYS>>\n \tSys\n\n<</SYS>>\n\n\n Hi there [/INST] Hello!\u200b </s>"
  // "<s>[INST] more [/INST] ok </s>": the system text and the first user
  // text's start are inside the stripped string, so they keep their whitespace.
  absl::StatusOr<ChatTemplate> t2 = ChatTemplate::ForTokenizer(l2->get());
  ASSERT_TRUE(t2.ok()) << t2.status();
  absl::StatusOr<TemplatedExample> o2 = t2->Apply(padded);
  ASSERT_TRUE(o2.ok()) << o2.status();
  absl::StatusOr<TemplatedExample> s2 = t2->Apply(example({{R::kSystem, " \tSys\n"},
                                                           {R::kUser, "\n Hi there"},
                                                           {R::kAssistant, "Hello!\xe2\x80\x8b"},
                                                           {R::kUser, "more"},
                                                           {R::kAssistant, "ok"}}));
  ASSERT_TRUE(s2.ok()) << s2.status();
  EXPECT_EQ(o2->tokens, s2->tokens);
  EXPECT_EQ(o2->loss, s2->loss);
  EXPECT_NE(TextWithLoss(**l2, *o2, false).find("[INST] <<SYS>>\n \tSys\n\n<</SYS>>\n\n\n Hi there [/INST]"),
            std::string::npos)
      << TextWithLoss(**l2, *o2, false);
  // An empty system message still writes the <<SYS>> block (`system_message != false`).
  absl::StatusOr<TemplatedExample> e2 =
      t2->Apply(example({{R::kSystem, ""}, {R::kUser, "Hi"}, {R::kAssistant, "ok"}}));
  ASSERT_TRUE(e2.ok()) << e2.status();
  EXPECT_NE(TextWithLoss(**l2, *e2, false).find("[INST] <<SYS>>\n\n<</SYS>>\n\nHi [/INST]"), std::string::npos)
      << TextWithLoss(**l2, *e2, false);

  // An assistant turn that is only whitespace trims to nothing: an error for both.
  const SftExample blank = example({{R::kUser, "q"}, {R::kAssistant, " \n\t"}});
  EXPECT_FALSE(t3->Apply(blank).ok());
  EXPECT_FALSE(t2->Apply(blank).ok());
}

// The byte template is this project's own: content is kept as given.
TEST(ChatTemplateTest, ByteTemplateKeepsWhitespace) {
  ByteTokenizer tok;
  absl::StatusOr<ChatTemplate> t = ChatTemplate::ForTokenizer(&tok);
  ASSERT_TRUE(t.ok());
  SftExample ex;
  ex.messages = {{ChatRole::kUser, " q\n"}, {ChatRole::kAssistant, "\t a \n"}};
  absl::StatusOr<TemplatedExample> out = t->Apply(ex);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(TextWithLoss(tok, *out, true), "\t a \n");
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

// Lines that used to abort the reader (an uncaught nlohmann exception: a
// number out of double range) or were accepted silently (a NUL byte after a
// valid object, an empty response): each is a counted problem with its reason.
TEST(SftJsonlTest, OutOfRangeNumbersNulBytesAndEmptyResponsesAreBadLines) {
  struct Case {
    std::string line;
    const char* kind;
    const char* reason;
  };
  const std::vector<Case> cases = {
      {R"({"prompt":"p","response":"r","n":1e400})", "malformed_json", "number out of range"},
      {"{\"prompt\":\"p\",\"response\":\"r\",\"n\":" + std::string(100000, '7') + "}", "malformed_json",
       "number out of range"},
      {std::string("{\"prompt\":\"p\",\"response\":\"r\"}") + '\0' + "trailing", "malformed_json", "NUL byte"},
      {R"({"prompt":"p","response":""})", "bad_example", "\"response\" is empty"},
      {R"({"messages":[{"role":"user","content":"u"},{"role":"assistant","content":""}]})", "bad_example",
       "messages[1]: assistant content is empty"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<SftExample> ex = ParseSftJsonLine(c.line);
    ASSERT_FALSE(ex.ok()) << c.line.substr(0, 80);
    EXPECT_NE(ex.status().message().find(c.reason), std::string::npos) << ex.status();
    EXPECT_LT(ex.status().message().size(), 400u) << "a 100,000-digit number is not echoed whole";
  }
  TempDir tmp;
  std::string text = "{\"prompt\": \"p1\", \"response\": \"r1\"}\n";
  for (const Case& c : cases) text += c.line + "\n";
  testing::WriteFile(tmp / "a.jsonl", text);
  ByteTokenizer tok;
  absl::StatusOr<ChatTemplate> t = ChatTemplate::ForTokenizer(&tok);
  ASSERT_TRUE(t.ok());
  SftDataset data(tok.vocab_size(), tok.name());
  absl::StatusOr<SftReadStats> s = ReadSftJsonl({tmp / "a.jsonl"}, *t, &data);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->examples, 1);
  EXPECT_EQ(s->malformed_json, 3);
  EXPECT_EQ(s->bad_example, 2);
  ASSERT_EQ(s->problems.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_EQ(s->problems[i].rfind(absl::StrCat(tmp / "a.jsonl", ":", i + 2, ": ", cases[i].kind, ": "), 0), 0u)
        << s->problems[i];
  }
}

// A good line and a line with invalid UTF-8: `data sft` used to log the bad
// line and then abort writing report.json (nlohmann type_error.316 on the raw
// byte echoed in the problem), leaving neither sft.lsft nor report.json. Every
// one of the bad lines above, through the command: exit 0, both files written,
// report.json valid JSON naming each line.
TEST(SftCommandTest, BadLinesNeverAbortAndTheReportIsAlwaysWritten) {
  TempDir tmp;
  testing::WriteFile(tmp / "in.jsonl",
                     "{\"prompt\": \"p\", \"response\": \"r\"}\n"
                     "{\"prompt\": \"p\", \"response\": \"r\xff\"}\n"
                     "{\"prompt\":\"p\",\"response\":\"r\",\"n\":1e400}\n" +
                         std::string("{\"prompt\":\"p\",\"response\":\"r\"}") + '\0' + "x\n" +
                         "{\"prompt\":\"p\",\"response\":\"\"}\n");
  const std::string bin = testing::LongctxBinary();
  testing::CommandResult r = testing::RunCommand(
      absl::StrCat(bin, " data sft --input ", tmp / "in.jsonl", " --out ", tmp / "out", " --tokenizer byte"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* want : {"in.jsonl:2: malformed_json", "in.jsonl:3: malformed_json: malformed JSON: number out of range",
                           "in.jsonl:4: malformed_json: malformed JSON: NUL byte", "in.jsonl:5: bad_example"}) {
    EXPECT_NE(r.output.find(want), std::string::npos) << want << "\n" << r.output;
  }
  ASSERT_TRUE(std::filesystem::exists(tmp / "out/sft.lsft")) << r.output;
  const std::string report = testing::ReadFile(tmp / "out/report.json");
  nlohmann::json j = nlohmann::json::parse(report, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(j.is_discarded()) << report;
  EXPECT_EQ(j["examples"], 1);
  EXPECT_EQ(j["malformed_json"], 3);
  EXPECT_EQ(j["bad_example"], 1);
  ASSERT_EQ(j["problems"].size(), 4u) << report;
  EXPECT_NE(j["problems"][0].get<std::string>().find("\\xff"), std::string::npos) << report;  // the raw byte, escaped

  // A good line and an invalid UTF-8 one alone (the first thing to fail was
  // writing report.json: type_error.316, an empty report.json).
  testing::WriteFile(tmp / "utf8.jsonl", "{\"prompt\":\"p\",\"response\":\"r\"}\n{\"prompt\":\"p\",\"response\":\"r\xff\"}\n");
  r = testing::RunCommand(
      absl::StrCat(bin, " data sft --input ", tmp / "utf8.jsonl", " --out ", tmp / "out2", " --tokenizer byte"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  j = nlohmann::json::parse(testing::ReadFile(tmp / "out2/report.json"), nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(j.is_discarded()) << testing::ReadFile(tmp / "out2/report.json");
  EXPECT_EQ(j["malformed_json"], 1);
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

// The layout in data/sft_token_file.h, byte for byte, with an odd number of
// tokens so that the padding after the token array (4 zero bytes) shows.
TEST(SftTokenFileTest, LayoutIsTheDocumentedOne) {
  TempDir tmp;
  SftDataset d(260, "byte");
  ASSERT_TRUE(d.Add({256, 7, 257}, {0, 1, 1}, "x.jsonl:1").ok());
  const std::string path = tmp / "d.lsft";
  ASSERT_TRUE(d.Write(path).ok());
  const std::string b = testing::ReadFile(path);
  auto u64 = [&](size_t at) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = v << 8 | static_cast<unsigned char>(b[at + i]);
    return v;
  };
  auto i32 = [&](size_t at) { return static_cast<int32_t>(u64(at) & 0xffffffffu); };
  EXPECT_EQ(b.substr(0, 8), "LCSFT001");
  EXPECT_EQ(u64(24), 3u);   // n_tokens
  EXPECT_EQ(u64(32), 1u);   // n_examples
  EXPECT_EQ(u64(40), 4u);   // "byte"
  EXPECT_EQ(u64(48), 10u);  // "x.jsonl:1\n"
  // 56 + pad8(4) + pad8(10) + pad8(12) + pad8(3) + 8 * 2 + 8
  ASSERT_EQ(b.size(), 56u + 8 + 16 + 16 + 8 + 16 + 8);
  EXPECT_EQ(b.substr(56, 8), std::string("byte\0\0\0\0", 8));
  EXPECT_EQ(b.substr(64, 16), std::string("x.jsonl:1\n\0\0\0\0\0\0", 16));
  const size_t tokens = 80;
  EXPECT_EQ(i32(tokens), 256);
  EXPECT_EQ(i32(tokens + 4), 7);
  EXPECT_EQ(i32(tokens + 8), 257);
  EXPECT_EQ(b.substr(tokens + 12, 4), std::string(4, '\0'));  // the tokens' padding to 8 bytes
  const size_t loss = tokens + 16;
  EXPECT_EQ(b.substr(loss, 8), std::string("\0\1\1\0\0\0\0\0", 8));
  EXPECT_EQ(u64(loss + 8), 0u);
  EXPECT_EQ(u64(loss + 16), 3u);
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
