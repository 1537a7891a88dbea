// Why: the probe's scoring, sweep, effective length and outputs, checked with
// scripted fake models whose right answers are known (train/probe/niah_probe.h).
#include "train/probe/niah_probe.h"

#include <cmath>
#include <regex>

#include "absl/strings/str_cat.h"
#include "data/byte_tokenizer.h"
#include "gtest/gtest.h"
#include "tests/support/memory_documents.h"
#include "tests/support/test_util.h"
#include "train/probe/niah_probe_report.h"

namespace longctx {
namespace {

using ::longctx::testing::MakeProseDocuments;
using ::longctx::testing::MemoryDocuments;

// Reads the needles out of the prompt like a perfect retriever, then answers
// only those `Knows` allows; the teacher-forced loss is low on what it knows.
class ScriptedModel : public ProbeModel {
 public:
  ScriptedModel(const Tokenizer* tok, std::function<bool(int64_t prompt_len, int needle_index)> knows)
      : tok_(tok), knows_(std::move(knows)) {}

  absl::StatusOr<std::vector<int32_t>> Greedy(const std::vector<int32_t>& prompt, int max_new_tokens,
                                              int32_t stop_id) override {
    ++greedy_calls;
    std::vector<std::string> answer;
    const std::vector<std::string> numbers = Needles(prompt);
    for (size_t j = 0; j < numbers.size(); ++j)
      answer.push_back(knows_(static_cast<int64_t>(prompt.size()), static_cast<int>(j)) ? numbers[j] : "000000");
    std::vector<int32_t> ids = tok_->Encode(NeedleAnswerText(answer));
    ids.push_back(stop_id);
    if (static_cast<int>(ids.size()) > max_new_tokens) ids.resize(max_new_tokens);
    return ids;
  }

  absl::StatusOr<std::vector<double>> AnswerTokenLosses(const std::vector<int32_t>& prompt,
                                                        const std::vector<int32_t>& answer) override {
    const bool all = knows_(static_cast<int64_t>(prompt.size()), 0);
    std::vector<double> out;
    for (int32_t id : answer) out.push_back(id >= '0' && id <= '9' ? (all ? 0.25 : 2.0) : 100.0);
    return out;
  }

  int greedy_calls = 0;

 private:
  std::vector<std::string> Needles(const std::vector<int32_t>& prompt) const {
    const std::string text = tok_->Decode(prompt);
    std::vector<std::string> out;
    static const std::regex re("One of the magic numbers is ([0-9]{6})\\.");
    for (std::sregex_iterator it(text.begin(), text.end(), re), end; it != end; ++it) out.push_back((*it)[1]);
    return out;
  }

  const Tokenizer* tok_;
  std::function<bool(int64_t, int)> knows_;
};

class NiahProbeTest : public ::testing::Test {
 protected:
  NiahProbeTest() : docs_(MakeProseDocuments(tok_, 60, 21)), haystack_(&docs_, AllDocs(), &tok_) {}
  std::vector<uint32_t> AllDocs() const {
    std::vector<uint32_t> d;
    for (int64_t i = 0; i < docs_.n_docs(); ++i) d.push_back(static_cast<uint32_t>(i));
    return d;
  }
  ProbeSettings Settings() const {
    ProbeSettings s;
    s.min_len = 384;
    s.max_len = 1024;
    s.len_step = 128;
    s.trials = 6;
    s.seed = 5;
    return s;
  }
  ByteTokenizer tok_;
  MemoryDocuments docs_;
  HaystackSource haystack_;
};

TEST_F(NiahProbeTest, TrialsAreDeterministicAndExactlyTheRequestedLength) {
  const ProbeSettings s = Settings();
  for (int64_t len : ProbeLengths(s)) {
    for (int i = 0; i < 3; ++i) {
      absl::StatusOr<NeedleSample> a = MakeProbeTrial(s, haystack_, len, i);
      absl::StatusOr<NeedleSample> b = MakeProbeTrial(s, haystack_, len, i);
      ASSERT_TRUE(a.ok() && b.ok()) << a.status();
      EXPECT_EQ(a->prompt, b->prompt);
      EXPECT_EQ(static_cast<int64_t>(a->prompt.size()), len);
      const std::string text = tok_.Decode(a->prompt);
      EXPECT_EQ(text.rfind(PaperNeedleFormat().prefix, 0), 0u);
      EXPECT_NE(text.find("\nWhat are the magic numbers mentioned in the provided text? The numbers are"),
                std::string::npos);
    }
  }
  EXPECT_EQ(ProbeLengths(s), (std::vector<int64_t>{384, 512, 640, 768, 896, 1024}));
  absl::StatusOr<NeedleSample> other = MakeProbeTrial(s, haystack_, 512, 1);
  ASSERT_TRUE(other.ok());
  EXPECT_NE(other->numbers, MakeProbeTrial(s, haystack_, 512, 0)->numbers);
}

TEST_F(NiahProbeTest, ScoresByNumbersPresentAndHalfOfTheNeedles) {
  ProbeTrial t;
  t.sample.numbers = {"111111", "222222", "333333", "444444"};
  ScoreProbeTrial(" 111111, 999999, 333333.", &t);
  EXPECT_EQ(t.found, (std::vector<bool>{true, false, true, false}));
  EXPECT_EQ(t.found_count, 2);
  EXPECT_TRUE(t.passed);
  ScoreProbeTrial(" 444444", &t);
  EXPECT_FALSE(t.passed);
  t.sample.numbers = {"111111", "222222", "333333"};  // k = 3: ceil(3/2) = 2 needed
  ScoreProbeTrial("111111", &t);
  EXPECT_FALSE(t.passed);
  ScoreProbeTrial("111111 333333", &t);
  EXPECT_TRUE(t.passed);
  t.sample.numbers = {"123456"};
  ScoreProbeTrial("The number is 123456", &t);
  EXPECT_TRUE(t.passed);
}

TEST_F(NiahProbeTest, AnswerLossAveragesTheDigitTokensOnly) {
  const std::vector<int32_t> answer = tok_.Encode(" 123456, 654321.");
  std::vector<double> losses;
  for (int32_t id : answer) losses.push_back(id >= '0' && id <= '9' ? 1.5 : 50.0);
  EXPECT_DOUBLE_EQ(AnswerDigitLoss(answer, losses, tok_), 1.5);
}

TEST_F(NiahProbeTest, EffectiveLengthIsTheLastPassingLengthBeforeTheFirstFailure) {
  ProbeResult r;
  r.settings.threshold = 0.5;
  auto set = [&](std::vector<double> rates) {
    r.lengths.clear();
    for (size_t i = 0; i < rates.size(); ++i) {
      ProbeLengthResult l;
      l.length = 128 * static_cast<int64_t>(i + 1);
      l.tested = rates[i] >= 0;
      l.pass_rate = rates[i];
      r.lengths.push_back(l);
    }
    ComputeEffectiveLength(&r);
  };
  set({1, 1, 0.4, 1});
  EXPECT_EQ(r.effective_length, 256);
  EXPECT_EQ(r.first_failing_length, 384);
  set({0.49, 1});
  EXPECT_EQ(r.effective_length, 0);
  EXPECT_EQ(r.first_failing_length, 128);
  set({-1, 0.5, 0.9});  // untested lengths are skipped; 0.5 is not under 0.5
  EXPECT_EQ(r.effective_length, 384);
  EXPECT_EQ(r.first_failing_length, -1);
}

TEST_F(NiahProbeTest, SweepFindsTheScriptedModelsLimit) {
  // Retrieves everything in prompts up to 700 tokens, nothing beyond.
  ScriptedModel model(&tok_, [](int64_t len, int) { return len <= 700; });
  ProbeSettings s = Settings();
  s.min_len = 256;  // < the paper format's 367 fixed tokens: untested
  std::vector<int64_t> seen;
  ProbeRunOptions o;
  o.keep_trials = true;
  o.on_length = [&](const ProbeLengthResult& l) { seen.push_back(l.length); };
  absl::StatusOr<ProbeResult> r = RunProbe(s, haystack_, model, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(seen, (std::vector<int64_t>{256, 384, 512, 640, 768, 896, 1024}));
  EXPECT_FALSE(r->lengths[0].tested);
  EXPECT_EQ(r->effective_length, 640);
  EXPECT_EQ(r->first_failing_length, 768);
  EXPECT_EQ(r->trials_run, 6 * 6);
  EXPECT_EQ(model.greedy_calls, 6 * 6);
  for (const ProbeLengthResult& l : r->lengths) {
    if (!l.tested) continue;
    const bool ok = l.length <= 700;
    EXPECT_EQ(l.pass_rate, ok ? 1.0 : 0.0) << l.length;
    EXPECT_EQ(l.needle_accuracy, ok ? 1.0 : 0.0);
    EXPECT_DOUBLE_EQ(l.answer_loss, ok ? 0.25 : 2.0);
    // Exact unless the haystack budget is tiny (384 − 367 fixed tokens = 17).
    EXPECT_LE(l.mean_prompt_tokens, static_cast<double>(l.length));
    EXPECT_GE(l.mean_prompt_tokens, static_cast<double>(l.length) - (l.length == 384 ? 3 : 0));
  }
  ASSERT_EQ(r->trials.size(), 36u);
  EXPECT_EQ(r->trials[0].generated, NeedleAnswerText(r->trials[0].sample.numbers));

  nlohmann::json j = ProbeResultToJson(*r);
  EXPECT_EQ(j["effective_length"], 640);
  EXPECT_EQ(j["first_failing_length"], 768);
  EXPECT_EQ(j["lengths"][0]["tested"], false);
  EXPECT_EQ(j["lengths"][1]["pass_rate"], 1.0);
  EXPECT_EQ(j["lengths"][1]["depth_accuracy"].size(), 10u);
  EXPECT_EQ(j["trials"].size(), 36u);
  nlohmann::json ev = ProbeMetricsEvent(*r, 1200);
  EXPECT_EQ(ev["kind"], "probe");
  EXPECT_EQ(ev["step"], 1200);
  EXPECT_EQ(ev["lengths"].size(), 6u);  // tested lengths only
  EXPECT_EQ(ev["lengths"][4]["answer_loss"], 2.0);
  EXPECT_NE(ProbeSummaryLine(*r).find("eff len 640"), std::string::npos) << ProbeSummaryLine(*r);
}

TEST_F(NiahProbeTest, DepthBinsShowWhichNeedlesWereFound) {
  // Finds the first two needles (nominal depths below 0.495) at every length.
  ScriptedModel model(&tok_, [](int64_t, int j) { return j < 2; });
  ProbeSettings s = Settings();
  s.trials = 20;
  s.max_len = 512;
  absl::StatusOr<ProbeResult> r = RunProbe(s, haystack_, model);
  ASSERT_TRUE(r.ok()) << r.status();
  for (const ProbeLengthResult& l : r->lengths) {
    EXPECT_EQ(l.pass_rate, 1.0);  // 2 of 4
    EXPECT_EQ(l.needle_accuracy, 0.5);
    int total = 0;
    for (int b = 0; b < 10; ++b) {
      total += l.bin_total[b];
      if (b < 4) {
        EXPECT_EQ(l.bin_found[b], l.bin_total[b]) << b;
      } else if (b > 4) {
        EXPECT_EQ(l.bin_found[b], 0) << b;
      }
    }
    EXPECT_EQ(total, 20 * 4);
    EXPECT_GT(l.bin_total[0], 0);
    EXPECT_GT(l.bin_total[9], 0);
  }
  EXPECT_EQ(r->effective_length, 512);
  EXPECT_EQ(r->first_failing_length, -1);

  ::longctx::testing::TempDir tmp;
  const std::string png = tmp / "probe.png", json = tmp / "probe.json";
  ASSERT_TRUE(WriteProbeHeatmap(*r, "test", png).ok());
  ASSERT_TRUE(WriteProbeJson(*r, json).ok());
  const std::string bytes = ::longctx::testing::ReadFile(png);
  ASSERT_GT(bytes.size(), 8u);
  EXPECT_EQ(bytes.substr(1, 3), "PNG");
  nlohmann::json j = nlohmann::json::parse(::longctx::testing::ReadFile(json));
  EXPECT_EQ(j["lengths"][0]["depth_accuracy"][0], 1.0);
  EXPECT_EQ(j["lengths"][0]["depth_accuracy"][9], 0.0);
  EXPECT_TRUE(j["first_failing_length"].is_null());
}

TEST_F(NiahProbeTest, AnswerLossOnlyRunsNoDecoding) {
  ScriptedModel model(&tok_, [](int64_t len, int) { return len <= 512; });
  ProbeSettings s = Settings();
  s.decode = false;
  absl::StatusOr<ProbeResult> r = RunProbe(s, haystack_, model);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(model.greedy_calls, 0);
  EXPECT_DOUBLE_EQ(r->lengths[1].answer_loss, 0.25);  // 512
  EXPECT_DOUBLE_EQ(r->lengths[2].answer_loss, 2.0);   // 640
  nlohmann::json j = ProbeResultToJson(*r);
  EXPECT_EQ(j["decoded"], false);
  EXPECT_TRUE(j["effective_length"].is_null());
  EXPECT_FALSE(j["lengths"][0].contains("pass_rate"));
  nlohmann::json ev = ProbeMetricsEvent(*r, 3);
  EXPECT_TRUE(ev["effective_length"].is_null());
  EXPECT_EQ(ev["lengths"][2]["answer_loss"], 2.0);
  ::longctx::testing::TempDir tmp;
  EXPECT_FALSE(WriteProbeHeatmap(*r, "t", tmp / "x.png").ok());
  EXPECT_NE(ProbeSummaryLine(*r).find("no decoding"), std::string::npos);
}

TEST_F(NiahProbeTest, BadSettingsNameTheField) {
  ScriptedModel model(&tok_, [](int64_t, int) { return true; });
  ProbeSettings s = Settings();
  s.max_len = 100;
  absl::StatusOr<ProbeResult> r = RunProbe(s, haystack_, model);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("max_len"), std::string::npos) << r.status();
  s = Settings();
  s.threshold = 2;
  EXPECT_NE(ValidateProbeSettings(s, "--").message().find("--threshold"), std::string::npos);
}

// A byte-level model's greedy output may be invalid UTF-8 (an untrained one
// usually is); the JSON report must still be writable (dump() throws on
// invalid UTF-8), with each invalid byte shown as U+FFFD.
TEST(NiahProbeReportTest, InvalidUtf8GenerationIsReplacedInTheJson) {
  ProbeResult r;
  ProbeTrial t;
  t.length = 128;
  t.sample.numbers = {"123456"};
  t.generated = std::string("12\x8f\xff 34 \xc3\xa9");
  t.found = {false};
  r.trials.push_back(t);
  const nlohmann::json j = ProbeResultToJson(r);
  std::string text;
  ASSERT_NO_THROW(text = j.dump());
  EXPECT_EQ(j["trials"][0]["generated"], "12\xEF\xBF\xBD\xEF\xBF\xBD 34 \xc3\xa9");  // valid é kept
}

}  // namespace
}  // namespace longctx
