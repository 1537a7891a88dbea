// Why: the loss on the eval split, written once and used for both schedules:
// every eval_every steps (except the last) and on the final weights. Each eval
// starts the eval packer from the split's beginning, so every eval reads the
// same eval_batches batches. Runs on every rank (each computes the whole eval
// today; splitting the batches across ranks and reducing the sums fits here
// later); rank 0 prints and writes the "eval" event.
#ifndef LONGCTX_TRAIN_HOOKS_EVAL_HOOK_H_
#define LONGCTX_TRAIN_HOOKS_EVAL_HOOK_H_

#include "data/document_source.h"
#include "train/evaluate.h"
#include "train/hooks/hook.h"

namespace longctx {

class EvalHook final : public Hook {
 public:
  explicit EvalHook(const DocumentSource* tokens) : tokens_(tokens) {}
  std::string name() const override { return "eval"; }
  bool rank0_only() const override { return false; }
  absl::Status OnStepEnd(HookContext& ctx, const StepEvent& e) override;
  absl::Status OnFinal(HookContext& ctx, const RunEndEvent& e) override;

  // The one evaluation: eval loss of the current weights at `step`, reported.
  absl::StatusOr<EvalResult> Evaluate(HookContext& ctx, int64_t step);
  int evals_run() const { return evals_run_; }

 private:
  const DocumentSource* tokens_;
  int evals_run_ = 0;
};

}  // namespace longctx

#endif  // LONGCTX_TRAIN_HOOKS_EVAL_HOOK_H_
