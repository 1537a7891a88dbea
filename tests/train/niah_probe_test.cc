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
#include "train/probe/binomial_interval.h"
#include "train/probe/niah_probe_report.h"
#include "train/probe/teacher_forced_recall.h"

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

  // Digits of needle j (its run of digit tokens) get log-prob −0.25 and are
  // the argmax when it is known, −2 and a wrong argmax ('0' for '1'-'9',
  // '1' for '0') otherwise; other tokens −100 (not digits: never averaged).
  absl::StatusOr<TeacherForcedTokens> TeacherForced(const std::vector<int32_t>& prompt,
                                                    const std::vector<int32_t>& answer) override {
    ++tf_calls;
    TeacherForcedTokens out;
    int run = -1;
    bool in_digits = false;
    for (int32_t id : answer) {
      const bool digit = id >= '0' && id <= '9';
      if (digit && !in_digits) ++run;
      in_digits = digit;
      const bool known = digit && knows_(static_cast<int64_t>(prompt.size()), run);
      out.logprob.push_back(!digit ? -100.0 : known ? -0.25 : -2.0);
      out.argmax.push_back(!digit || known ? id : (id == '0' ? '1' : '0'));
    }
    return out;
  }

  int greedy_calls = 0, tf_calls = 0;

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

// The main job's failure mode: 3 of 8 at the shortest length reads as
// effective length 0 — the intervals must show that the 0 is not settled.
TEST_F(NiahProbeTest, IntervalsBoundTheEffectiveLengthAndMarkUncertainLengths) {
  ProbeResult r;
  r.settings.threshold = 0.5;
  r.settings.trials = 8;
  for (int i = 0; i < 5; ++i) {
    ProbeLengthResult l;
    l.length = 128 * (i + 1);
    l.tested = true;
    l.trials = 8;
    l.passed = std::vector<int>{3, 8, 8, 5, 0}[i];
    l.pass_rate = l.passed / 8.0;
    absl::StatusOr<BinomialInterval> ci = WilsonInterval(l.passed, l.trials);
    ASSERT_TRUE(ci.ok());
    l.pass_low = ci->low;
    l.pass_high = ci->high;
    r.lengths.push_back(l);
  }
  ComputeEffectiveLength(&r);
  EXPECT_EQ(r.effective_length, 0);
  EXPECT_EQ(r.first_failing_length, 128);
  EXPECT_EQ(r.effective_length_low, 0);     // 3/8: low 0.137 < 0.5
  EXPECT_EQ(r.effective_length_high, 512);  // highs 0.694 1 1 0.85 0.32: 640 fails
  // 3/8 [0.137, 0.694] and 5/8 [0.306, 0.863] straddle 0.5; 8/8 [0.676, 1] and 0/8 [0, 0.324] do not.
  EXPECT_EQ(r.uncertain_lengths, (std::vector<int64_t>{128, 512}));
  const std::string line = ProbeSummaryLine(r);
  EXPECT_NE(line.find("eff len 0 (95% 0..512, uncertain 128 512) | pass 0.38? 1.00 1.00 0.62? 0.00 |"),
            std::string::npos)
      << line;
  nlohmann::json j = ProbeResultToJson(r), ev = ProbeMetricsEvent(r, 7);
  for (const nlohmann::json* o : {&j, &ev}) {
    EXPECT_EQ((*o)["interval"], "wilson95");
    EXPECT_EQ((*o)["effective_length_low"], 0);
    EXPECT_EQ((*o)["effective_length_high"], 512);
    EXPECT_EQ((*o)["uncertain_lengths"], nlohmann::json({128, 512}));
    EXPECT_NEAR((*o)["lengths"][0]["pass_low"].get<double>(), 0.137, 5e-4);
    EXPECT_NEAR((*o)["lengths"][0]["pass_high"].get<double>(), 0.694, 5e-4);
  }
  // Not decoded: no interval fields at all.
  r.settings.decode = false;
  ComputeEffectiveLength(&r);
  EXPECT_FALSE(ProbeMetricsEvent(r, 7).contains("effective_length_low"));
  EXPECT_TRUE(r.uncertain_lengths.empty());
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
  // 6/6: low 0.754 >= 0.5; 0/6: high 0.391 < 0.5, so the bounds agree and nothing is uncertain.
  EXPECT_EQ(r->effective_length_low, 640);
  EXPECT_EQ(r->effective_length_high, 640);
  EXPECT_TRUE(r->uncertain_lengths.empty());
  EXPECT_EQ(model.greedy_calls, 6 * 6);
  for (const ProbeLengthResult& l : r->lengths) {
    if (!l.tested) continue;
    const bool ok = l.length <= 700;
    EXPECT_EQ(l.pass_rate, ok ? 1.0 : 0.0) << l.length;
    EXPECT_NEAR(l.pass_low, ok ? 6.0 / (6 + kZ95 * kZ95) : 0.0, 1e-12) << l.length;  // Wilson at 6/6 and 0/6
    EXPECT_NEAR(l.pass_high, ok ? 1.0 : kZ95 * kZ95 / (6 + kZ95 * kZ95), 1e-12) << l.length;
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

TEST_F(NiahProbeTest, TeacherForcedRecallScoresTheLengthByDepthGrid) {
  // Knows every needle up to 640 tokens, beyond only the first (shallowest).
  ScriptedModel model(&tok_, [](int64_t len, int j) { return len <= 640 || j == 0; });
  ProbeSettings s = Settings();
  s.min_len = 320;  // 1 paper needle fits (256 fixed tokens), 4 do not (367)
  s.len_step = 64;
  s.max_len = 768;
  s.decode = false;
  s.teacher_forced = true;
  s.tf_needles = {1, 4};
  s.tf_trials = 2;
  absl::StatusOr<ProbeResult> r = RunProbe(s, haystack_, model);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(model.tf_calls, 0);  // RunProbe leaves the recall to AddTeacherForcedRecall
  ASSERT_TRUE(AddTeacherForcedRecall(haystack_, model, &*r).ok());
  EXPECT_EQ(model.greedy_calls, 0);
  EXPECT_EQ(model.tf_calls, (8 + 7) * 10 * 2);  // 1 needle at 8 lengths, 4 at 7; 10 depth cells x 2 repeats
  ASSERT_EQ(r->recall.size(), 2u);
  const RecallCurve &one = r->recall[0], &four = r->recall[1];
  EXPECT_EQ(one.needles, 1);
  EXPECT_EQ(four.needles, 4);
  ASSERT_EQ(one.lengths.size(), 8u);
  ASSERT_EQ(four.lengths.size(), 8u);
  EXPECT_FALSE(four.lengths[0].tested);
  for (size_t i = 0; i < one.lengths.size(); ++i) {
    const RecallLengthResult &a = one.lengths[i], &b = four.lengths[i];
    ASSERT_TRUE(a.tested);
    EXPECT_EQ(a.trials, 20);
    EXPECT_DOUBLE_EQ(a.logprob, -0.25) << a.length;
    EXPECT_EQ(a.argmax_exact, 1.0);
    // One needle: each depth cell is its own bin, tf_trials needles in each.
    for (int bin = 0; bin < 10; ++bin) EXPECT_EQ(a.bin_needles[bin], 2) << a.length << " bin " << bin;
    if (!b.tested) continue;
    int needles = 0;
    for (int bin = 0; bin < 10; ++bin) needles += b.bin_needles[bin];
    EXPECT_EQ(needles, 4 * 20);
    if (b.length <= 640) {
      EXPECT_DOUBLE_EQ(b.logprob, -0.25) << b.length;
      EXPECT_EQ(b.argmax_exact, 1.0);
    } else {
      // 6 digits at −0.25 and 18 at −2 per trial; no trial exact.
      EXPECT_DOUBLE_EQ(b.logprob, (6 * -0.25 + 18 * -2.0) / 24) << b.length;
      EXPECT_EQ(b.argmax_exact, 0.0);
      // The first needle lies in [0, 0.2475): bins 0 and 1 hold only it; bins 3.. only the others.
      for (int bin : {0, 1}) EXPECT_DOUBLE_EQ(b.bin_logprob[bin] / b.bin_needles[bin], -0.25) << bin;
      for (int bin = 3; bin < 10; ++bin) EXPECT_DOUBLE_EQ(b.bin_logprob[bin] / b.bin_needles[bin], -2.0) << bin;
    }
  }
  nlohmann::json j = ProbeResultToJson(*r), ev = ProbeMetricsEvent(*r, 9);
  ASSERT_EQ(j["teacher_forced"].size(), 2u);
  EXPECT_EQ(j["teacher_forced"][1]["needles"], 4);
  EXPECT_EQ(j["teacher_forced"][1]["lengths"][0]["tested"], false);
  EXPECT_EQ(j["teacher_forced"][1]["lengths"][7]["depth_logprob"][9], -2.0);
  EXPECT_EQ(j["teacher_forced"][0]["lengths"][0]["depth_logprob"].size(), 10u);
  EXPECT_EQ(ev["teacher_forced"][1]["lengths"].size(), 7u);  // tested lengths only
  EXPECT_EQ(ev["teacher_forced"][1]["lengths"][0]["length"], 384);
  EXPECT_EQ(ev["teacher_forced"][0]["lengths"][7]["argmax_exact"], 1.0);
  EXPECT_FALSE(ev["teacher_forced"][0]["lengths"][0].contains("depth_logprob"));
  const std::string line = ProbeSummaryLine(*r);
  EXPECT_NE(line.find("tf logprob k=1 -0.25 -0.25"), std::string::npos) << line;
  EXPECT_NE(line.find(", k=4 -- -0.25"), std::string::npos) << line;
  EXPECT_NE(line.find(" -1.56 -1.56 ("), std::string::npos) << line;
}

TEST_F(NiahProbeTest, RecallCellsMoveOnlyTheNeedles) {
  ProbeSettings s = Settings();
  absl::StatusOr<NeedleSample> shallow = MakeRecallTrial(s, haystack_, 768, 4, 0, 1);
  absl::StatusOr<NeedleSample> deep = MakeRecallTrial(s, haystack_, 768, 4, 9, 1);
  absl::StatusOr<NeedleSample> other = MakeRecallTrial(s, haystack_, 768, 4, 0, 2);
  ASSERT_TRUE(shallow.ok() && deep.ok() && other.ok()) << shallow.status();
  EXPECT_EQ(shallow->numbers, deep->numbers);
  EXPECT_NE(shallow->numbers, other->numbers);
  EXPECT_EQ(shallow->depths, RecallCellDepths(4, 0, 10));
  EXPECT_EQ(deep->depths, RecallCellDepths(4, 9, 10));
  EXPECT_EQ(shallow->prompt.size(), 768u);
  EXPECT_EQ(deep->prompt.size(), 768u);
  for (int j = 0; j < 4; ++j) EXPECT_LT(shallow->needle_offsets[j], deep->needle_offsets[j]) << j;
  EXPECT_NEAR(RecallCellDepths(1, 0, 10)[0], 0.0495, 1e-12);
  EXPECT_NEAR(RecallCellDepths(4, 9, 10)[3], (3 + 0.95) * 0.2475, 1e-12);
  // Depths given to the builder must fit the needles.
  const std::vector<double> bad = {0.5, 0.2};
  absl::StatusOr<NeedleSample> b = BuildNeedleSample(s.format, 2, 768, haystack_, 1, &bad);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("needle depths"), std::string::npos) << b.status();
}

TEST_F(NiahProbeTest, DigitRunsAndNeedleCountsParse) {
  const std::vector<int32_t> answer = tok_.Encode(" 123456, 654321.");
  EXPECT_EQ(DigitRuns(answer, tok_), (std::vector<std::pair<int, int>>{{1, 7}, {9, 15}}));
  absl::StatusOr<std::vector<int>> k = ParseNeedleCounts("1, 4", "probe_tf_needles");
  ASSERT_TRUE(k.ok());
  EXPECT_EQ(*k, (std::vector<int>{1, 4}));
  for (const char* bad : {"", "1,,4", "0", "x", "65"}) {
    absl::StatusOr<std::vector<int>> e = ParseNeedleCounts(bad, "probe_tf_needles");
    ASSERT_FALSE(e.ok()) << bad;
    EXPECT_NE(e.status().message().find("probe_tf_needles"), std::string::npos) << e.status();
  }
  ProbeSettings s = Settings();
  s.teacher_forced = true;
  s.tf_trials = 0;
  EXPECT_NE(ValidateProbeSettings(s, "probe_").message().find("probe_tf_trials"), std::string::npos);
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
