// Why: TensorBoard event files for every run, on by default (config
// `tensorboard`). The hook is registered after every other hook and follows
// metrics.jsonl: after each event it reads the lines this run appended since
// it last looked and turns them into records (train/report/tensorboard_metrics.h),
// so every hook's numbers reach TensorBoard without any hook knowing of it, and
// the event file can be checked against metrics.jsonl. An event repeating an
// earlier (kind, step) is written once. Rank 0 only: one file per run,
// created with its first event, so a start that fails before any (a full
// disk, a bad checkpoint) leaves no empty event file behind.
#ifndef LONGCTX_TRAIN_HOOKS_TENSORBOARD_HOOK_H_
#define LONGCTX_TRAIN_HOOKS_TENSORBOARD_HOOK_H_

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <utility>

#include "train/hooks/hook.h"
#include "train/report/event_file.h"

namespace longctx {

class TensorBoardHook final : public Hook {
 public:
  std::string name() const override { return "tensorboard"; }
  bool rank0_only() const override { return true; }
  absl::Status OnRunStart(HookContext& ctx) override;
  absl::Status OnStepEnd(HookContext& ctx, const StepEvent&) override { return Pump(ctx); }
  absl::Status OnRunEnd(HookContext& ctx, const RunEndEvent&) override { return Pump(ctx); }
  absl::Status OnFinal(HookContext& ctx, const RunEndEvent&) override;

 private:
  absl::Status Pump(HookContext& ctx);
  bool enabled_ = false;                    // tensorboard on, rank 0
  std::unique_ptr<EventFileWriter> writer_;  // created lazily: a start that fails first leaves no file
  int64_t offset_ = 0;  // bytes of metrics.jsonl already converted
  // (kind, step) already converted: the final posfreq/eval event repeats the
  // periodic one of the same step when steps is a multiple of the period.
  std::set<std::pair<std::string, int64_t>> seen_;
};

}  // namespace longctx

#endif  // LONGCTX_TRAIN_HOOKS_TENSORBOARD_HOOK_H_
