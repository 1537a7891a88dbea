// Why: see bench_profile.h.
#include "train/bench/bench_profile.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace longctx {

void ProfilingBackend::Gemm(const GemmParams& p) {
  const int64_t m = p.trans_a ? p.a.shape[1] : p.a.shape[0];
  const int64_t k = p.trans_a ? p.a.shape[0] : p.a.shape[1];
  const int64_t n = p.trans_b ? p.b.shape[0] : p.b.shape[1];
  const std::string key = absl::StrCat("Gemm ", m, "x", n, "x", k, " ", p.trans_a ? "T" : "N", p.trans_b ? "T" : "N",
                                       p.beta != 0.0 ? " +=" : "");
  Timed(key, 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k),
        [&] { inner_->Gemm(p); });
}

void ProfilingBackend::AttentionForward(const AttentionParams& p) {
  Timed(p.window > 0 ? absl::StrCat("AttentionForward window ", p.window) : "AttentionForward full", 0,
        [&] { inner_->AttentionForward(p); });
}

void ProfilingBackend::AttentionBackward(const AttentionParams& p) {
  Timed(p.window > 0 ? absl::StrCat("AttentionBackward window ", p.window) : "AttentionBackward full", 0,
        [&] { inner_->AttentionBackward(p); });
}

double ProfilingBackend::LmHeadLoss(const LmHeadLossParams& p) {
  const double n = static_cast<double>(p.x.shape[0]), v = static_cast<double>(p.weight.shape[0]),
               d = static_cast<double>(p.weight.shape[1]);
  const int products = 1 + (p.dx.defined() ? 1 : 0) + (p.dweight.defined() ? 1 : 0);
  return Timed(absl::StrCat("LmHeadLoss (chunk ", p.ChunkRows(), ")"), 2.0 * n * v * d * products,
               [&] { return inner_->LmHeadLoss(p); });
}

nlohmann::json ProfilingBackend::ToJson(int steps) const {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [key, s] : stats_) {
    out.push_back({{"op", key},
                   {"calls_per_step", static_cast<double>(s.calls) / steps},
                   {"ms_per_step", 1e3 * s.seconds / steps},
                   {"gflops", s.flops > 0 && s.seconds > 0 ? s.flops / s.seconds / 1e9 : 0.0}});
  }
  return out;
}

std::string ProfilingBackend::Report(int steps, double step_seconds) const {
  std::vector<std::pair<std::string, Stat>> rows(stats_.begin(), stats_.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.seconds > b.second.seconds; });
  std::string out = absl::StrFormat("  profile (per step, %d steps; every op synchronized):\n", steps);
  absl::StrAppend(&out, absl::StrFormat("    %-44s %8s %10s %7s %9s\n", "op", "calls", "ms", "share", "GFLOP/s"));
  double timed = 0;
  for (const auto& [key, s] : rows) {
    timed += s.seconds;
    const double ms = 1e3 * s.seconds / steps;
    absl::StrAppend(&out, absl::StrFormat("    %-44s %8.1f %10.2f %6.1f%% %9s\n", key,
                                          static_cast<double>(s.calls) / steps, ms,
                                          100.0 * s.seconds / steps / step_seconds,
                                          s.flops > 0 ? absl::StrFormat("%.1f", s.flops / s.seconds / 1e9) : "-"));
  }
  absl::StrAppend(&out, absl::StrFormat("    %-44s %8s %10.2f %6.1f%%\n", "(outside backend ops)", "",
                                        1e3 * (step_seconds - timed / steps),
                                        100.0 * (step_seconds - timed / steps) / step_seconds));
  return out;
}

}  // namespace longctx
