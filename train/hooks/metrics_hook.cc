// Why: see metrics_hook.h.
#include "train/hooks/metrics_hook.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>


namespace longctx {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// "42 s", "3 min 05 s", "1 h 02 min".
std::string FormatEta(double s) {
  const long long t = std::llround(std::max(0.0, s));
  char buf[48];
  if (t < 60) std::snprintf(buf, sizeof(buf), "%lld s", t);
  else if (t < 3600) std::snprintf(buf, sizeof(buf), "%lld min %02lld s", t / 60, t % 60);
  else std::snprintf(buf, sizeof(buf), "%lld h %02lld min", t / 3600, (t % 3600) / 60);
  return buf;
}

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
  // The step's own shape (under SFT the row length changes from step to step).
  int64_t step_tokens = 0, step_rows = 0, loss_tokens = 0;
  for (const PackedBatch& b : e.micro) {
    step_rows += b.batch_size;
    step_tokens += int64_t{b.batch_size} * b.seq_len;
    loss_tokens += b.num_target_tokens;
  }
  const int32_t seq_len = e.micro.empty() ? config.data().seq_len() : e.micro[0].seq_len;
  window_tokens_ += step_tokens;
  window_seq_lens_.push_back(seq_len);
  ++window_steps_;
  window_comm_seconds_ += e.result.comm_seconds;
  if (step % config.log_every() != 0 && step != total_steps) return absl::OkStatus();
  const auto now = Clock::now();
  const double comm_s = window_comm_seconds_ / static_cast<double>(window_steps_);
  // Training time only: what hooks excluded since the window began (probes) is not counted.
  const double dt = Seconds(window_start_, now) - (ctx.excluded_seconds - excluded_at_window_start_);
  const double tps = dt > 0 ? window_tokens_ / dt : 0;
  if (dt > 0) ctx.summary->tokens_per_second = tps;
  if (ctx.rank == 0) {
    // ETA: the remaining steps at this run's mean training seconds per step
    // (probes and other excluded time are not in the rate, so they are not in the ETA).
    const double train_s = Seconds(ctx.run_start, now) - ctx.excluded_seconds;
    const double per_step = e.steps_this_run > 0 ? train_s / e.steps_this_run : 0;
    const double eta = per_step * static_cast<double>(total_steps - step);
    const std::string shape = config.data().sft().path().empty()
                                  ? std::string()
                                  : " | " + std::to_string(step_rows) + " x " + std::to_string(seq_len) + " (" +
                                        std::to_string(loss_tokens) + " loss tokens)";
    std::printf("step %6lld/%lld | loss %.4f | lr %.3e | gnorm %.3f | %.0f tok/s | %.1f s | ETA %s%s\n",
                static_cast<long long>(step), static_cast<long long>(total_steps), e.result.loss, e.result.lr,
                e.result.grad_norm, tps, Seconds(ctx.run_start, now), FormatEta(eta).c_str(), shape.c_str());
    std::fflush(stdout);
    nlohmann::json ev = {{"kind", "train"},
                         {"step", step},
                         {"loss", e.result.loss},
                         {"lr", e.result.lr},
                         {"grad_norm", e.result.grad_norm},
                         {"clip_scale", e.result.clip_scale},
                         {"tokens_seen", ctx.tokens_seen},
                         {"tokens_per_s", tps},
                         {"comm_s", comm_s},
                         {"seq_len", seq_len},
                         {"rows", step_rows},
                         {"tokens", step_tokens},
                         {"loss_tokens", loss_tokens}};
    if (window_seq_lens_.size() > 1) ev["window_seq_lens"] = window_seq_lens_;
    if (config.context_parallel() > 1) {
      // Rank 0's K/V exchange of the last step (train/parallel/context_exchange.h).
      ev["context_bytes_full"] = e.result.context_bytes_full;
      ev["context_bytes_window"] = e.result.context_bytes_window;
    }
    absl::Status st = ctx.metrics->Write(ev);
    if (!st.ok()) return st;
  }
  window_tokens_ = 0;
  window_steps_ = 0;
  window_comm_seconds_ = 0;
  window_seq_lens_.clear();
  window_start_ = Clock::now();
  excluded_at_window_start_ = ctx.excluded_seconds;
  return absl::OkStatus();
}

}  // namespace longctx
