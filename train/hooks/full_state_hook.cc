// Why: see full_state_hook.h.
#include "train/hooks/full_state_hook.h"

#include <sys/resource.h>

#include "base/log.h"

namespace longctx {
namespace {

bool ProbeDue(const HookContext& ctx, int64_t step) {
  return ctx.config->probe_every() > 0 && step % ctx.config->probe_every() == 0;
}

}  // namespace

absl::Status GatherFullStateHook::Gather(HookContext& ctx, bool optimizer) {
  // The gathers for a probe or checkpoint are not the step's communication
  // ("comm_s", which the step took from the strategy already): dropped.
  absl::Status st = s_->GatherFullParameters();
  s_->TakeCommSeconds();
  if (!st.ok()) return st;
  if (!optimizer) return absl::OkStatus();
  absl::StatusOr<const AdamW*> full = s_->FullOptimizerOnRoot();
  s_->TakeCommSeconds();
  if (!full.ok()) return full.status();
  ctx.optimizer = const_cast<AdamW*>(*full);
  return absl::OkStatus();
}

absl::Status GatherFullStateHook::OnStepEnd(HookContext& ctx, const StepEvent& e) {
  // A checkpoint save writes every rank's shards (train/checkpoint/sharded_save.h):
  // only the probe needs the full parameters.
  if (!ProbeDue(ctx, e.result.step)) return absl::OkStatus();
  return Gather(ctx, /*optimizer=*/false);
}

absl::Status GatherFullStateHook::OnRunEnd(HookContext& ctx, const RunEndEvent& e) {
  if (!e.final && e.steps_this_run == 0) return absl::OkStatus();  // the checkpoint hook saves nothing
  // The training peak, before the final checkpoint (which writes each rank's
  // shards and gathers nothing): what the sharding saved.
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  LOG(INFO) << s_->name() << " rank " << ctx.rank << ": peak RSS " << ru.ru_maxrss / 1024 << " MiB before the final "
            << "checkpoint; parameter/gradient/optimizer state "
            << s_->state_bytes() / (1 << 20) << " MiB";
  return absl::OkStatus();
}

absl::Status ReleaseFullStateHook::Release(HookContext& ctx) {
  s_->ReleaseFullParameters();
  s_->ReleaseFullOptimizer();
  ctx.optimizer = nullptr;
  return absl::OkStatus();
}

}  // namespace longctx
