// Why: see eval_hook.h.
#include "train/hooks/eval_hook.h"

#include <cstdio>

#include "train/setup/training_data.h"

namespace longctx {

absl::StatusOr<EvalResult> EvalHook::Evaluate(HookContext& ctx, int64_t step) {
  absl::StatusOr<std::unique_ptr<Packer>> packer = MakeEvalPacker(*ctx.config, tokens_);
  if (!packer.ok()) return packer.status();
  absl::StatusOr<EvalResult> ev = EvaluateLoss(*ctx.model, **packer, *ctx.device_batch, ctx.config->eval_batches());
  if (!ev.ok()) return ev.status();
  ++evals_run_;
  if (ctx.rank == 0) {
    std::printf("eval   step %lld | loss %.4f over %lld tokens\n", static_cast<long long>(step), ev->mean(),
                static_cast<long long>(ev->tokens));
    absl::Status st = ctx.metrics->Write({{"kind", "eval"}, {"step", step}, {"loss", ev->mean()}, {"tokens", ev->tokens}});
    if (!st.ok()) return st;
  }
  return ev;
}

absl::Status EvalHook::OnStepEnd(HookContext& ctx, const StepEvent& e) {
  if (!PeriodicBeforeLast(e.result.step, ctx.config->eval_every(), ctx.config->steps())) return absl::OkStatus();
  return Evaluate(ctx, e.result.step).status();
}

absl::Status EvalHook::OnFinal(HookContext& ctx, const RunEndEvent& e) {
  absl::StatusOr<EvalResult> ev = Evaluate(ctx, e.step);
  if (!ev.ok()) return ev.status();
  ctx.summary->eval_loss = ev->mean();
  ctx.summary->eval_tokens = ev->tokens;
  return absl::OkStatus();
}

}  // namespace longctx
