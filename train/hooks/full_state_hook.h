// Why: under ZeRO-1 and FSDP no rank holds the full parameters between
// steps, but the periodic probe (rank 0) reads them: it runs between
// GatherFullStateHook and ReleaseFullStateHook, so every rank gathers them
// (FSDP: a spike of one full model per rank) on a probe step and frees them
// after. A checkpoint save gathers nothing: every rank writes its own shards
// (train/checkpoint/sharded_save.h). The trainer registers these two only
// for a sharded strategy (ParallelStrategy::sharded()).
#ifndef LONGCTX_TRAIN_HOOKS_FULL_STATE_HOOK_H_
#define LONGCTX_TRAIN_HOOKS_FULL_STATE_HOOK_H_

#include <string>

#include "absl/status/status.h"
#include "train/hooks/hook.h"
#include "train/parallel/parallel_strategy.h"

namespace longctx {

// Registered right before the probe hook and right after the checkpoint hook.
class GatherFullStateHook : public Hook {
 public:
  explicit GatherFullStateHook(ParallelStrategy* s) : s_(s) {}
  std::string name() const override { return "gather_full_state"; }
  bool rank0_only() const override { return false; }
  absl::Status OnStepEnd(HookContext& ctx, const StepEvent& e) override;
  absl::Status OnRunEnd(HookContext& ctx, const RunEndEvent& e) override;

 private:
  absl::Status Gather(HookContext& ctx, bool optimizer);
  ParallelStrategy* s_;
};

class ReleaseFullStateHook : public Hook {
 public:
  explicit ReleaseFullStateHook(ParallelStrategy* s) : s_(s) {}
  std::string name() const override { return "release_full_state"; }
  bool rank0_only() const override { return false; }
  absl::Status OnStepEnd(HookContext& ctx, const StepEvent&) override { return Release(ctx); }
  absl::Status OnRunEnd(HookContext& ctx, const RunEndEvent&) override { return Release(ctx); }

 private:
  absl::Status Release(HookContext& ctx);
  ParallelStrategy* s_;
};

}  // namespace longctx

#endif  // LONGCTX_TRAIN_HOOKS_FULL_STATE_HOOK_H_
