// Why: `longctx bench` is read by people and by scripts through its last JSON
// line; this checks that line exists, parses, and is internally consistent
// (achieved GFLOP/s = FLOPs per token × tokens/s; tokens/s = tokens per step /
// median step time), using the tiny test model so it runs in seconds. No
// timing thresholds: speed targets live in docs/BENCHMARKS.md, not in tests.
#include <cmath>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "tests/support/test_util.h"

namespace longctx {
namespace {

using ::longctx::testing::LongctxBinary;
using ::longctx::testing::RunCommand;
using ::longctx::testing::SourcePath;

// The last non-empty line of the output, parsed as JSON (null when absent).
nlohmann::json LastJsonLine(const std::string& output) {
  std::vector<std::string> lines = absl::StrSplit(output, '\n', absl::SkipWhitespace());
  if (lines.empty()) return nullptr;
  return nlohmann::json::parse(lines.back(), nullptr, /*allow_exceptions=*/false);
}

TEST(BenchTest, TinyModelJsonLineIsConsistent) {
  const auto r = RunCommand(absl::StrCat(LongctxBinary(), " bench --config ",
                                         SourcePath("configs/tiny-test.textproto"),
                                         " --steps=2 --warmup=1 --threads=1"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("sliding-window layers count only"), std::string::npos) << r.output;
  const nlohmann::json j = LastJsonLine(r.output);
  ASSERT_TRUE(j.is_object()) << r.output;
  EXPECT_EQ(j.value("config", ""), "tiny-test");
  EXPECT_EQ(j.value("steps", 0), 2);
  EXPECT_EQ(j.value("warmup", -1), 1);
  EXPECT_EQ(j.value("threads", 0), 1);
  for (const char* k : {"tokens_per_s", "gflops", "peak_gflops", "fraction_of_peak", "peak_rss_mb",
                        "step_seconds_median", "flops_per_token", "matmul_flops_per_token",
                        "attention_flops_per_token"}) {
    ASSERT_TRUE(j.contains(k) && j[k].is_number()) << k << " in " << j.dump();
    EXPECT_GT(j[k].get<double>(), 0) << k;
  }
  EXPECT_EQ(j.value("tokens_per_step", 0), 2 * 32);  // tiny-test: batch 2 x seq_len 32
  // tiny-test has 53,792 parameters, 45,184 of them in matmuls (4 layers ×
  // (q 1024 + k 512 + v 512 + o 1024 + gate/up/down 3 × 2048) + lm_head 8320).
  EXPECT_EQ(j.value("params", 0), 53792);
  EXPECT_EQ(j.value("matmul_params", 0), 45184);
  const double tps = j["tokens_per_s"].get<double>();
  const double fpt = j["flops_per_token"].get<double>();
  EXPECT_NEAR(j["gflops"].get<double>(), fpt * tps / 1e9, 0.01 * fpt * tps / 1e9);
  EXPECT_NEAR(tps, 64 / j["step_seconds_median"].get<double>(), 0.01 * tps);
  EXPECT_NEAR(fpt, j["matmul_flops_per_token"].get<double>() + j["attention_flops_per_token"].get<double>(),
              1e-6 * fpt);
  EXPECT_NEAR(j["fraction_of_peak"].get<double>(), j["gflops"].get<double>() / j["peak_gflops"].get<double>(),
              1e-9);
  // An fp32 step is a fraction of the fp32 peak; the bf16 peak is measured in
  // the same run where the CPU has bf16 dot products (0 otherwise).
  EXPECT_EQ(j.value("peak_gflops", 0.0), j.value("peak_gflops_fp32", -1.0));
  EXPECT_EQ(j.value("peak_kind", ""), "sgemm peak");
  ASSERT_TRUE(j.contains("peak_gflops_bf16") && j["peak_gflops_bf16"].is_number()) << j.dump();
  EXPECT_GE(j["peak_gflops_bf16"].get<double>(), 0.0);
  EXPECT_TRUE(std::isfinite(j.value("last_loss", NAN)));
}

TEST(BenchTest, RejectsBadStepCount) {
  const auto r = RunCommand(absl::StrCat(LongctxBinary(), " bench --config ",
                                         SourcePath("configs/tiny-test.textproto"), " --steps=0"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--steps"), std::string::npos) << r.output;
}

TEST(BenchTest, Bf16PrecisionIsReportedWithItsPath) {
  const auto r = RunCommand(absl::StrCat(LongctxBinary(), " bench --config ",
                                         SourcePath("configs/tiny-test.textproto"),
                                         " --steps=1 --warmup=0 --threads=1 --precision=bf16"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json j = LastJsonLine(r.output);
  ASSERT_TRUE(j.is_object()) << r.output;
  EXPECT_EQ(j.value("precision", ""), "bf16");
  // A bf16 step is a fraction of the bf16 peak where there is one, else of fp32.
  const double bf16_peak = j.value("peak_gflops_bf16", -1.0);
  EXPECT_EQ(j.value("peak_gflops", 0.0), bf16_peak > 0 ? bf16_peak : j.value("peak_gflops_fp32", -1.0)) << j.dump();
  EXPECT_NEAR(j.value("fraction_of_peak", 0.0), j.value("gflops", 0.0) / j.value("peak_gflops", 1.0), 1e-9);
  const std::string path = j.value("matmul_path", "");
  EXPECT_TRUE(path.rfind("rounded-sgemm", 0) == 0 || path.rfind("onednn", 0) == 0) << path;
  EXPECT_TRUE(std::isfinite(j.value("last_loss", NAN)));
}

TEST(BenchTest, RejectsUnknownBf16GemmPathAndPeer) {
  const std::string base = absl::StrCat(LongctxBinary(), " bench --config ", SourcePath("configs/tiny-test.textproto"),
                                        " --steps=1 --warmup=0");
  auto r = RunCommand(base + " --bf16_gemm=fast");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--bf16_gemm"), std::string::npos) << r.output;
  r = RunCommand(base + " --peer=jax");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--peer"), std::string::npos) << r.output;
}

// `bench attention` on tiny lengths: one JSON line per (kind, L), then a
// summary. The bytes the attention op holds are exactly linear in L (q, k, v,
// o, lse and gradients are all [L, ...]), so bytes per token are equal at
// every L; ms per token is only checked to be positive (no timing thresholds).
// --documents cuts each length into documents (FLOPs: the documents' own,
// so 192 + 64 tokens count what lengths 192 and 64 count alone) and
// --key_parts fixes the backward's key parts; --min_seconds adds repeats to
// short rows; bad values are errors; --row_peaks=false measures no peak
// between the rows.
TEST(BenchTest, AttentionDocumentsAndKeyParts) {
  auto rows_of = [](const std::string& output) {
    std::vector<nlohmann::json> rows;
    for (absl::string_view line : absl::StrSplit(output, '\n', absl::SkipWhitespace())) {
      if (line.empty() || line[0] != '{') continue;
      nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_object() && j.value("bench", "") == "attention") rows.push_back(j);
    }
    return rows;
  };
  const std::string base = absl::StrCat(LongctxBinary(), " bench attention --config ",
                                        SourcePath("configs/tiny-test.textproto"),
                                        " --kinds=full --repeats=1 --threads=1 --layer=false --row_peaks=false");
  const std::string quick = base + " --min_seconds=0";
  const auto docs = RunCommand(quick + " --lengths=256 --documents=3,1 --key_parts=2");
  ASSERT_EQ(docs.exit_code, 0) << docs.output;
  const auto alone = RunCommand(quick + " --lengths=64,192");
  ASSERT_EQ(alone.exit_code, 0) << alone.output;
  const std::vector<nlohmann::json> d = rows_of(docs.output), a = rows_of(alone.output);
  ASSERT_EQ(d.size(), 1u) << docs.output;
  ASSERT_EQ(a.size(), 2u) << alone.output;
  EXPECT_EQ(d[0]["documents"], nlohmann::json::array({192, 64})) << d[0].dump();
  EXPECT_EQ(d[0].value("key_parts", -1), 2);
  EXPECT_EQ(a[0].value("key_parts", -1), 0);
  EXPECT_EQ(a[0]["documents"], nlohmann::json::array({64}));
  EXPECT_NEAR(d[0].value("attn_flops", 0.0), a[0].value("attn_flops", 0.0) + a[1].value("attn_flops", 0.0),
              1e-9 * d[0].value("attn_flops", 0.0));
  EXPECT_GT(d[0].value("attn_ms_per_token", 0.0), 0);
  EXPECT_FALSE(d[0].contains("row_peak_after")) << d[0].dump();  // --row_peaks=false: no peak between rows
  // --min_seconds=0: exactly --repeats timed; a positive one times more of
  // a row as short as these (each run well under a millisecond), at most
  // 1,000.
  for (const nlohmann::json& j : {d[0], a[0], a[1]}) EXPECT_EQ(j.value("repeats", -1), 1) << j.dump();
  const auto longer = RunCommand(base + " --lengths=64 --min_seconds=0.05");
  ASSERT_EQ(longer.exit_code, 0) << longer.output;
  const std::vector<nlohmann::json> m = rows_of(longer.output);
  ASSERT_EQ(m.size(), 1u) << longer.output;
  EXPECT_GT(m[0].value("repeats", 0), 1) << m[0].dump();
  EXPECT_LE(m[0].value("repeats", 0), 1000) << m[0].dump();
  EXPECT_EQ(m[0].value("min_seconds", 0.0), 0.05) << m[0].dump();
  for (const char* bad : {" --lengths=256 --key_parts=9", " --lengths=256 --documents=3,0", " --lengths=256 --documents=x",
                          " --lengths=256 --min_seconds=-1", " --lengths=256 --min_seconds=x"}) {
    const auto r = RunCommand(base + bad);
    EXPECT_NE(r.exit_code, 0) << bad;
    const char* flag = absl::StrContains(bad, "key_parts")     ? "--key_parts"
                       : absl::StrContains(bad, "min_seconds") ? "--min_seconds"
                                                               : "--documents";
    EXPECT_TRUE(r.output.find(flag) != std::string::npos) << bad << ": " << r.output;
  }
}

TEST(BenchTest, AttentionModeReportsLinearBytesPerLength) {
  const auto r = RunCommand(absl::StrCat(LongctxBinary(), " bench attention --config ",
                                         SourcePath("configs/tiny-test.textproto"),
                                         " --lengths=64,128,256 --window=16 --kinds=swa,full --repeats=1 --min_seconds=0"
                                         " --threads=1"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::vector<nlohmann::json> rows;
  nlohmann::json summary;
  for (absl::string_view line : absl::StrSplit(r.output, '\n', absl::SkipWhitespace())) {
    if (line.empty() || line[0] != '{') continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    ASSERT_TRUE(j.is_object()) << line;
    if (j.value("bench", "") == "attention") rows.push_back(j);
    if (j.value("bench", "") == "attention-summary") summary = j;
  }
  ASSERT_EQ(rows.size(), 6u) << r.output;
  ASSERT_TRUE(summary.is_object()) << r.output;
  for (const nlohmann::json& j : rows) {
    EXPECT_GT(j.value("attn_ms_per_token", 0.0), 0) << j.dump();
    EXPECT_GT(j.value("layer_ms_per_token", 0.0), 0) << j.dump();
    EXPECT_DOUBLE_EQ(j.value("attn_bytes_per_token", 0.0), rows[0].value("attn_bytes_per_token", -1.0)) << j.dump();
    EXPECT_EQ(j.value("window", -1), j.value("kind", "") == "swa" ? 16 : 0);
    // fp32 run: a fraction of the fp32 GEMM peak measured in the same run.
    EXPECT_EQ(j.value("precision", ""), "fp32");
    EXPECT_GT(j.value("peak_gflops_fp32", 0.0), 0) << j.dump();
    EXPECT_EQ(j.value("peak_gflops", 0.0), j.value("peak_gflops_fp32", -1.0));
    EXPECT_NEAR(j.value("attn_fraction_of_peak", 0.0), j.value("attn_gflops", 0.0) / j.value("peak_gflops", 1.0),
                1e-9);
    // The fastest repeat: its time is at most the medians' sum, and its
    // fraction is against the same peak.
    EXPECT_GT(j.value("attn_best_ms", 0.0), 0) << j.dump();
    EXPECT_LE(j.value("attn_best_ms", 0.0), j.value("attn_fwd_ms", 0.0) + j.value("attn_bwd_ms", 0.0) + 1e-9)
        << j.dump();
    EXPECT_NEAR(j.value("attn_fraction_of_peak_best", 0.0),
                j.value("attn_gflops_best", 0.0) / j.value("peak_gflops", 1.0), 1e-9);
    EXPECT_NEAR(j.value("attn_gflops_best", 0.0) * j.value("attn_best_ms", 0.0) * 1e6, j.value("attn_flops", 0.0),
                1e-6 * j.value("attn_flops", 0.0));
  }
  // --row_peaks (default): the peak measured after every row; a row's
  // "before" is the previous row's "after" (the first row's: the run's first
  // peak); the best so far never falls and bounds both; the fraction against
  // it; slow = a peak beside the row more than 10 % below the best so far.
  double best_so_far = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    const nlohmann::json& j = rows[i];
    ASSERT_TRUE(j.contains("row_peak_after")) << j.dump();
    const double before = j.value("row_peak_before", 0.0), after = j.value("row_peak_after", 0.0);
    EXPECT_GT(after, 0) << j.dump();
    EXPECT_EQ(before, i == 0 ? j.value("peak_gflops", -1.0) : rows[i - 1].value("row_peak_after", -1.0)) << j.dump();
    const double run_peak = j.value("run_peak_so_far", 0.0);
    EXPECT_GE(run_peak, best_so_far) << j.dump();
    EXPECT_GE(run_peak, std::max(before, after)) << j.dump();
    best_so_far = run_peak;
    EXPECT_NEAR(j.value("attn_fraction_of_run_peak", 0.0), j.value("attn_gflops", 0.0) / run_peak, 1e-9);
    EXPECT_EQ(j.value("slow_phase", true), std::min(before, after) < 0.9 * run_peak) << j.dump();
  }
  // The summary's slow rows: against the best peak of the whole run.
  const double run_best = summary.value("run_peak_gflops", 0.0);
  EXPECT_GE(run_best, std::max(best_so_far, summary.value("peak_gflops_end", 0.0))) << summary.dump();
  std::vector<std::string> want_slow;
  for (const nlohmann::json& j : rows)
    if (std::min(j.value("row_peak_before", 0.0), j.value("row_peak_after", 0.0)) < 0.9 * run_best)
      want_slow.push_back(absl::StrCat(j.value("kind", ""), ":", j.value("seq_len", 0)));
  EXPECT_EQ(summary["slow_rows"].get<std::vector<std::string>>(), want_slow) << summary.dump();
  // The 1-layer model's activation arena is linear in L too.
  EXPECT_DOUBLE_EQ(rows[1].value("layer_activation_bytes", 0.0), 2 * rows[0].value("layer_activation_bytes", 0.0));
  EXPECT_DOUBLE_EQ(summary["swa"]["attn_bytes_per_token_spread"]["max_ratio_to_first"].get<double>(), 1.0);
  // The peak measured again after the lengths, and its drift against the
  // first (the one every row's fraction is against).
  EXPECT_EQ(summary.value("peak_gflops", 0.0), rows[0].value("peak_gflops", -1.0)) << summary.dump();
  EXPECT_GT(summary.value("peak_gflops_end", 0.0), 0) << summary.dump();
  EXPECT_NEAR(summary.value("peak_drift", 1e9),
              summary.value("peak_gflops_end", 0.0) / summary.value("peak_gflops", 1.0) - 1, 1e-12);
  EXPECT_EQ(summary.value("peak_drift_warning", false), std::fabs(summary.value("peak_drift", 0.0)) > 0.10);
  EXPECT_EQ(absl::StrContains(r.output, "the machine's speed changed during the run"),
            summary.value("peak_drift_warning", false))
      << r.output;
}

}  // namespace
}  // namespace longctx
