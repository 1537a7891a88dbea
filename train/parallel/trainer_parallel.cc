// Why: see trainer_parallel.h.
#include "train/parallel/trainer_parallel.h"

#include <sys/resource.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/log.h"
#include "train/parallel/collectives.h"

namespace longctx {
namespace {

// DDP across ranks: reduce-scatter + all-gather of each gradient buffer.
class IdenticalSumGradientSync final : public GradientSync {
 public:
  IdenticalSumGradientSync(Communicator* comm, Backend* be) : comm_(comm), be_(be) {}
  absl::Status Reduce(ParamStore& grads) override {
    for (int b = 0; b < grads.layout().num_buffers(); ++b) {
      const Tensor g = grads.buffer(b);
      const int64_t n = ShardOf(g.numel(), comm_->rank(), comm_->world_size()).size();
      if (tmp_.bytes() < static_cast<size_t>(n) * sizeof(float))
        tmp_ = DeviceBuffer(be_, static_cast<size_t>(n) * sizeof(float));
      const Tensor mine(tmp_.data(), DType::kF32, {n}, be_->device());
      absl::Status st = ReduceScatterSum(*comm_, *be_, g, mine);
      if (st.ok()) st = AllGather(*comm_, *be_, mine, g);
      if (!st.ok()) return absl::Status(st.code(), absl::StrCat("DDP gradient sync, buffer ", b, ": ", st.message()));
    }
    return absl::OkStatus();
  }

 private:
  Communicator* comm_;
  Backend* be_;
  DeviceBuffer tmp_;
};

class StrategySync final : public GradientSync {
 public:
  explicit StrategySync(ParallelStrategy* s) : s_(s) {}
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
    if (comm->world_size() > 1) *sync = std::make_unique<IdenticalSumGradientSync>(comm, model->backend());
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
