// Why: see trainer_parallel.h.
#include "train/parallel/trainer_parallel.h"

#include <sys/resource.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/log.h"
#include "train/parallel/collectives.h"
#include "train/parallel/grad_sum64.h"

namespace longctx {
namespace {

// DDP: reduce-scatter + all-gather of each gradient buffer (identical bits on
// every rank); with grad_sum_fp64 each micro-batch's gradient on its own,
// summed in fp64 (grad_sum64.h), also on one process.
class DdpGradientSync final : public GradientSync {
 public:
  DdpGradientSync(Communicator* comm, Transformer* model, bool fp64) : comm_(comm), be_(model->backend()) {
    if (fp64) sum64_ = std::make_unique<Fp64GradSum>(model->backend(), &model->layout());
  }
  void BeginStep() override {
    if (sum64_) sum64_->BeginStep();
  }
  void BeginMicroBatch(ParamStore& grads) override {
    if (sum64_) sum64_->BeginMicroBatch(grads);
  }
  void EndMicroBatch(ParamStore& grads) override {
    if (sum64_) sum64_->EndMicroBatch(grads);
  }
  bool LocalFinite(ParamStore& grads) override {
    return sum64_ ? sum64_->LocalFinite(grads) : GradientSync::LocalFinite(grads);
  }
  absl::Status Reduce(ParamStore& grads) override {
    return SumReplicatedGradients(*comm_, *be_, grads, sum64_.get(), &tmp_);
  }

 private:
  Communicator* comm_;
  Backend* be_;
  std::unique_ptr<Fp64GradSum> sum64_;
  DeviceBuffer tmp_;
};

class StrategySync final : public GradientSync {
 public:
  explicit StrategySync(ParallelStrategy* s) : s_(s) {}
  void BeginStep() override { s_->BeginStep(); }
  void BeginMicroBatch(ParamStore&) override { s_->BeginMicroBatch(); }
  void EndMicroBatch(ParamStore&) override { s_->EndMicroBatch(); }
  bool LocalFinite(ParamStore&) override { return s_->LocalGradientsFinite(); }
  absl::Status Reduce(ParamStore&) override { return s_->FinishBackward(); }

 private:
  ParallelStrategy* s_;
};

// ParamUpdate::Apply has no Status: a failed collective here would leave the
// peers waiting, so it ends the job (launch's failure policy).
class StrategyUpdate final : public ParamUpdate {
 public:
  explicit StrategyUpdate(ParallelStrategy* s) : s_(s) {}
  StepStats Apply(ParamStore&, ParamStore&, double lr) override {
    absl::StatusOr<StepStats> st = s_->OptimizerStep(lr);
    if (!st.ok()) AbortJob(absl::Status(st.status().code(), absl::StrCat(s_->name(), " update: ", st.status().message())));
    return *st;
  }

 private:
  ParallelStrategy* s_;
};

bool ProbeDue(const HookContext& ctx, int64_t step) {
  return ctx.config->probe_every() > 0 && step % ctx.config->probe_every() == 0;
}

}  // namespace

absl::Status InstallParallelStrategy(const TrainConfig& config, Transformer* model, Communicator* comm,
                                     std::unique_ptr<AdamW>* optimizer, std::unique_ptr<GradientSync>* sync,
                                     std::unique_ptr<ParamUpdate>* update,
                                     std::unique_ptr<ParallelStrategy>* strategy,
                                     std::optional<uint64_t> init_seed) {
  if (config.mode() == DDP) {
    if (init_seed) model->InitParams(*init_seed);
    if (comm->world_size() > 1 || config.grad_sum_fp64())
      *sync = std::make_unique<DdpGradientSync>(comm, model, config.grad_sum_fp64());
    return absl::OkStatus();
  }
  absl::StatusOr<std::unique_ptr<ParallelStrategy>> s = MakeParallelStrategy(config, model, comm);
  if (!s.ok()) return s.status();
  if (*optimizer != nullptr)
    if (absl::Status st = (*s)->LoadFullOptimizer(**optimizer); !st.ok()) return st;
  optimizer->reset();  // the full moments live on as shards only
  if (absl::Status st = (*s)->Setup(init_seed); !st.ok()) return st;
  *sync = std::make_unique<StrategySync>(s->get());
  *update = std::make_unique<StrategyUpdate>(s->get());
  *strategy = std::move(*s);
  return absl::OkStatus();
}

absl::Status GatherFullStateHook::Gather(HookContext& ctx, bool optimizer) {
  // The gathers for a probe or checkpoint are not the step's communication ("comm_s").
  const double step_comm = TakeCommSeconds();
  struct Restore {
    double s;
    ~Restore() {
      TakeCommSeconds();
      AddCommSeconds(s);
    }
  } restore{step_comm};
  if (absl::Status st = s_->GatherFullParameters(); !st.ok()) return st;
  if (!optimizer) return absl::OkStatus();
  absl::StatusOr<const AdamW*> full = s_->FullOptimizerOnRoot();
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
