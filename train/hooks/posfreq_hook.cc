// Why: see posfreq_hook.h.
#include "train/hooks/posfreq_hook.h"

#include <cstdio>

namespace longctx {

nlohmann::json PositionFrequencyEvent(const PositionFrequency& posfreq, const TrainConfig& config,
                                      const ModelDims& dims, int64_t step) {
  auto summary = [&](int64_t window) {
    const PositionFrequencySummary s = posfreq.Summarize(config.posfreq_k(), window);
    return nlohmann::json{{"window", window},
                          {"pairs_per_layer", s.total_pairs},
                          {"share_ge_half", s.share_ge_half},
                          {"share_ge_three_quarters", s.share_ge_three_quarters},
                          {"share_le_half", s.share_le_half},
                          {"largest_i_with_k", s.largest_i_with_k},
                          {"bins", BinnedCounts(posfreq.Counts(window))}};
  };
  nlohmann::json ev = {{"kind", "posfreq"}, {"step", step}, {"max_len", posfreq.max_len()}, {"k", config.posfreq_k()}};
  const int full = dims.layers - dims.num_layers_of(ROPE_SWA);
  const int sliding = dims.num_layers_of(ROPE_SWA);
  if (full > 0) ev["full"] = summary(0), ev["full"]["layers"] = full;
  if (sliding > 0) ev["sliding"] = summary(dims.window), ev["sliding"]["layers"] = sliding;
  return ev;
}

absl::Status PositionFrequencyHook::OnStepEnd(HookContext& ctx, const StepEvent& e) {
  const int every = ctx.config->posfreq_every();
  if (every <= 0 || e.result.step % every != 0) return absl::OkStatus();
  return ctx.metrics->Write(PositionFrequencyEvent(*ctx.posfreq, *ctx.config, *ctx.dims, e.result.step));
}

absl::Status PositionFrequencyHook::OnFinal(HookContext& ctx, const RunEndEvent& e) {
  nlohmann::json pf = PositionFrequencyEvent(*ctx.posfreq, *ctx.config, *ctx.dims, e.step);
  absl::Status st = ctx.metrics->Write(pf);
  if (!st.ok()) return st;
  for (const char* kind : {"full", "sliding"})
    if (pf.contains(kind))
      std::printf("posfreq %-7s | pairs/layer %.4g | i >= L/2: %.2f%% | i >= 3L/4: %.2f%% | largest i with >= %g: %lld\n",
                  kind, pf[kind]["pairs_per_layer"].get<double>(), 100 * pf[kind]["share_ge_half"].get<double>(),
                  100 * pf[kind]["share_ge_three_quarters"].get<double>(), ctx.config->posfreq_k(),
                  static_cast<long long>(pf[kind]["largest_i_with_k"].get<int64_t>()));
  return absl::OkStatus();
}

}  // namespace longctx
