// Why: see metrics_hook.h.
#include "train/hooks/metrics_hook.h"

#include <cstdio>

#include "train/parallel/collectives.h"

namespace longctx {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

}  // namespace

absl::Status MetricsHook::OnRunStart(HookContext& ctx) {
  window_start_ = Clock::now();
  excluded_at_window_start_ = ctx.excluded_seconds;
  window_tokens_ = 0;
  return absl::OkStatus();
}

absl::Status MetricsHook::OnStepEnd(HookContext& ctx, const StepEvent& e) {
  const TrainConfig& config = *ctx.config;
  const int64_t step = e.result.step, total_steps = config.steps();
  window_tokens_ += static_cast<int64_t>(e.micro.size()) * config.data().seq_len() * config.data().batch_size();
  ++window_steps_;
  if (step % config.log_every() != 0 && step != total_steps) return absl::OkStatus();
  const auto now = Clock::now();
  const double comm_s = TakeCommSeconds() / static_cast<double>(window_steps_);  // every rank: the count resets
  // Training time only: what hooks excluded since the window began (probes) is not counted.
  const double dt = Seconds(window_start_, now) - (ctx.excluded_seconds - excluded_at_window_start_);
  const double tps = dt > 0 ? window_tokens_ / dt : 0;
  ctx.summary->tokens_per_second = tps;
  if (ctx.rank == 0) {
    std::printf("step %6lld/%lld | loss %.4f | lr %.3e | gnorm %.3f | %.0f tok/s | %.1f s\n",
                static_cast<long long>(step), static_cast<long long>(total_steps), e.result.loss, e.result.lr,
                e.result.grad_norm, tps, Seconds(ctx.run_start, now));
    std::fflush(stdout);
    nlohmann::json ev = {{"kind", "train"},
                         {"step", step},
                         {"loss", e.result.loss},
                         {"lr", e.result.lr},
                         {"grad_norm", e.result.grad_norm},
                         {"clip_scale", e.result.clip_scale},
                         {"tokens_seen", ctx.tokens_seen},
                         {"tokens_per_s", tps},
                         {"comm_s", comm_s}};
    absl::Status st = ctx.metrics->Write(ev);
    if (!st.ok()) return st;
  }
  window_tokens_ = 0;
  window_steps_ = 0;
  window_start_ = Clock::now();
  excluded_at_window_start_ = ctx.excluded_seconds;
  return absl::OkStatus();
}

}  // namespace longctx
