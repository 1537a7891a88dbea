// Why: see parallel_strategy.h. The three strategies share the collectives of
// collectives.h and the optimizers of optim/; each keeps its own storage.
#include "train/parallel/parallel_strategy.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/log.h"
#include "train/parallel/bf16_gather.h"
#include "train/parallel/collectives.h"
#include "train/parallel/grad_sum64.h"
#include "train/setup/config_options.h"

namespace longctx {

double ParallelStrategy::TakeCommSeconds() { return longctx::TakeCommSeconds(); }

uint64_t HashParameters(Transformer& model) {
  uint64_t h = 1469598103934665603ull;
  std::vector<unsigned char> host;
  for (int b = 0; b < model.layout().num_buffers(); ++b) {
    if (!model.params().allocated(b)) continue;
    const Tensor t = model.params().buffer(b);
    host.resize(t.nbytes());
    model.backend()->CopyToHost(host.data(), t);
    for (unsigned char c : host) h = (h ^ c) * 1099511628211ull;
  }
  return h;
}

namespace {

ReduceDoublesFn ReduceOver(Communicator* comm) {
  return [comm](double* v, int n) {
    CommTimer timer;
    return comm->AllReduceSum(v, n);
  };
}

// Gathers full moments from shards into `full` on every rank (collective);
// the caller keeps it only on rank 0.
absl::Status GatherMoments(Communicator& comm, Backend& be, const ShardedAdamW& opt, AdamW* full) {
  for (int b = 0; b < opt.num_buffers(); ++b) {
    absl::Status st = AllGather(comm, be, opt.m_shard(b), full->m().buffer(b));
    if (st.ok()) st = AllGather(comm, be, opt.v_shard(b), full->v().buffer(b));
    if (!st.ok()) return absl::Status(st.code(), absl::StrCat("optimizer moments, buffer ", b, ": ", st.message()));
  }
  full->set_step(opt.step());
  return absl::OkStatus();
}

void TakeMoments(Backend& be, const AdamW& full, ShardedAdamW* opt) {
  AdamW& f = const_cast<AdamW&>(full);
  for (int b = 0; b < opt->num_buffers(); ++b) {
    if (opt->range(b).size() == 0) continue;
    be.Copy(opt->m_shard(b), RangeView(f.m().buffer(b), opt->range(b)));
    be.Copy(opt->v_shard(b), RangeView(f.v().buffer(b), opt->range(b)));
  }
  opt->set_step(full.step());
}

// ---------------------------------------------------------------- replicated gradients
// DDP and ZeRO-1 keep the full parameters and the full gradient on every rank
// through the step (FSDP gathers and reduces per buffer instead): the step's
// hooks on that gradient, with its optional fp64 sum (grad_sum_fp64), are the
// same for both and are implemented once here, between the strategy's base
// (ParallelStrategy for DDP, ShardedStrategyBase for ZeRO-1) and the strategy.
template <class Base>
class ReplicatedGradients : public Base {
 public:
  absl::Status Setup(std::optional<uint64_t> init_seed) override {
    if (init_seed) grads_model_->InitParams(*init_seed);
    return absl::OkStatus();
  }
  void BeginStep() override {
    grads_model_->grads().Zero();
    if (sum64_) sum64_->BeginStep();
  }
  void BeginMicroBatch() override {
    if (sum64_) sum64_->BeginMicroBatch(grads_model_->grads());
  }
  void EndMicroBatch() override {
    if (sum64_) sum64_->EndMicroBatch(grads_model_->grads());
  }
  bool LocalGradientsFinite() override {
    return sum64_ ? sum64_->LocalFinite(grads_model_->grads()) : std::isfinite(grads_model_->grads().SumSquares());
  }

 protected:
  // base_args go to Base's constructor.
  template <class... BaseArgs>
  ReplicatedGradients(const TrainConfig& c, Transformer* m, BaseArgs&&... base_args)
      : Base(std::forward<BaseArgs>(base_args)...), grads_model_(m) {
    if (c.grad_sum_fp64()) sum64_ = std::make_unique<Fp64GradSum>(m->backend(), &m->layout());
  }
  // The fp64 sum, or null (fp32 sums).
  Fp64GradSum* sum64() const { return sum64_.get(); }
  int64_t sum64_bytes() const { return sum64_ ? sum64_->bytes() : 0; }

 private:
  Transformer* grads_model_;
  std::unique_ptr<Fp64GradSum> sum64_;  // grad_sum_fp64
};

// ---------------------------------------------------------------- DDP
class DdpStrategy : public ReplicatedGradients<ParallelStrategy> {
 public:
  DdpStrategy(const TrainConfig& c, Transformer* m, Communicator* comm)
      : ReplicatedGradients(c, m), model_(m), comm_(comm),
        opt_(std::make_unique<AdamW>(&m->layout(), m->backend(), DType::kF32, AdamWSettingsFromConfig(c))) {}
  absl::Status FinishBackward() override {
    return SumReplicatedGradients(*comm_, *model_->backend(), model_->grads(), sum64(), &tmp_);
  }
  absl::StatusOr<StepStats> OptimizerStep(double lr) override {
    return opt_->Step(model_->params(), model_->grads(), lr);
  }
  absl::Status GatherFullParameters() override { return absl::OkStatus(); }
  void ReleaseFullParameters() override {}
  absl::StatusOr<const AdamW*> FullOptimizerOnRoot() override {
    return comm_->rank() == 0 ? opt_.get() : nullptr;
  }
  absl::Status LoadFullOptimizer(const AdamW& full) override {
    AdamW& f = const_cast<AdamW&>(full);
    for (int b = 0; b < model_->layout().num_buffers(); ++b) {
      model_->backend()->Copy(opt_->m().buffer(b), f.m().buffer(b));
      model_->backend()->Copy(opt_->v().buffer(b), f.v().buffer(b));
    }
    opt_->set_step(full.step());
    return absl::OkStatus();
  }
  AdamW* replicated_optimizer() override { return opt_.get(); }
  int64_t optimizer_step() const override { return opt_->step(); }
  void set_optimizer_step(int64_t s) override { opt_->set_step(s); }
  int64_t state_bytes() const override {
    return model_->params().allocated_bytes() + model_->grads().allocated_bytes() + opt_->m().allocated_bytes() +
           opt_->v().allocated_bytes() + sum64_bytes();
  }
  const char* name() const override { return "DDP"; }
  bool sharded() const override { return false; }

 private:
  Transformer* model_;
  Communicator* comm_;
  std::unique_ptr<AdamW> opt_;
  DeviceBuffer tmp_;  // fp32 path: one reduced shard, the largest buffer's
};

// ---------------------------------------------------------------- ZeRO-1 and FSDP
// Both keep AdamW's moments only for this rank's range of every buffer
// (ShardedAdamW), so what a checkpoint needs of them is the same: the moments
// gathered to rank 0 (FullOptimizerOnRoot), taken from a full AdamW
// (LoadFullOptimizer), the step, and this rank's shards for a sharded save
// or load (checkpoint_shards).
class ShardedStrategyBase : public ParallelStrategy {
 public:
  absl::StatusOr<const AdamW*> FullOptimizerOnRoot() override {
    full_ = std::make_unique<AdamW>(&model_->layout(), model_->backend(), DType::kF32, opt_.settings());
    absl::Status st = GatherMoments(*comm_, *model_->backend(), opt_, full_.get());
    if (!st.ok()) return st;
    if (comm_->rank() != 0) full_.reset();
    return full_.get();
  }
  void ReleaseFullOptimizer() override { full_.reset(); }
  absl::Status LoadFullOptimizer(const AdamW& full) override {
    TakeMoments(*model_->backend(), full, &opt_);
    return absl::OkStatus();
  }
  int64_t optimizer_step() const override { return opt_.step(); }
  void set_optimizer_step(int64_t s) override { opt_.set_step(s); }
  std::vector<CheckpointShard> checkpoint_shards() override {
    std::vector<CheckpointShard> out;
    for (int b = 0; b < opt_.num_buffers(); ++b) {
      const ElementRange r = opt_.range(b);
      if (r.size() == 0) continue;
      out.push_back({b, r.begin, r.end, ParamRange(b), opt_.m_shard(b), opt_.v_shard(b)});
    }
    return out;
  }

 protected:
  ShardedStrategyBase(const TrainConfig& c, Transformer* m, Communicator* comm)
      : model_(m), comm_(comm),
        opt_(&m->layout(), m->backend(), DType::kF32, AdamWSettingsFromConfig(c), comm->rank(),
             comm->world_size()) {}
  // This rank's range of buffer b's parameters (ZeRO-1: a view of the full
  // buffer; FSDP: its shard).
  virtual Tensor ParamRange(int b) const = 0;

  Transformer* model_;
  Communicator* comm_;
  ShardedAdamW opt_;
  std::unique_ptr<AdamW> full_;  // rank 0, between FullOptimizerOnRoot and ReleaseFullOptimizer
};

// ---------------------------------------------------------------- ZeRO-1
class Zero1Strategy : public ReplicatedGradients<ShardedStrategyBase> {
 public:
  Zero1Strategy(const TrainConfig& c, Transformer* m, Communicator* comm)
      : ReplicatedGradients(c, m, c, m, comm), config_(c) {
    for (int b = 0; b < opt_.num_buffers(); ++b)
      grad_shards_.emplace_back(m->backend(), static_cast<size_t>(opt_.range(b).size()) * sizeof(float));
  }
  absl::Status FinishBackward() override {
    Fp64GradSum* sum64 = this->sum64();
    for (int b = 0; b < opt_.num_buffers(); ++b) {
      absl::Status st = sum64 ? sum64->ReduceScatter(*comm_, model_->grads(), b, GradShard(b))
                              : ReduceScatterSum(*comm_, *model_->backend(), model_->grads().buffer(b), GradShard(b));
      if (!st.ok()) return absl::Status(st.code(), absl::StrCat("ZeRO-1 reduce-scatter, buffer ", b, ": ", st.message()));
    }
    return absl::OkStatus();
  }
  absl::StatusOr<StepStats> OptimizerStep(double lr) override {
    std::vector<Tensor> p, g;
    for (int b = 0; b < opt_.num_buffers(); ++b) {
      p.push_back(RangeView(model_->params().buffer(b), opt_.range(b)));
      g.push_back(GradShard(b));
    }
    absl::StatusOr<StepStats> st = opt_.Step(p, g, lr, ReduceOver(comm_));
    if (!st.ok()) return st.status();
    for (int b = 0; b < opt_.num_buffers(); ++b) {
      absl::Status s = AllGather(*comm_, *model_->backend(), p[b], model_->params().buffer(b));
      if (!s.ok()) return absl::Status(s.code(), absl::StrCat("ZeRO-1 parameter all-gather, buffer ", b, ": ", s.message()));
    }
    return st;
  }
  absl::Status GatherFullParameters() override { return absl::OkStatus(); }
  void ReleaseFullParameters() override {}
  int64_t state_bytes() const override {
    int64_t g = 0;
    for (const DeviceBuffer& d : grad_shards_) g += d.bytes();
    g += sum64_bytes();
    return model_->params().allocated_bytes() + model_->grads().allocated_bytes() + g + opt_.state_bytes();
  }
  const char* name() const override { return "ZERO1"; }
  bool sharded() const override { return true; }

 private:
  Tensor GradShard(int b) const {
    return Tensor(grad_shards_[b].data(), DType::kF32, {opt_.range(b).size()}, model_->backend()->device());
  }
  Tensor ParamRange(int b) const override { return RangeView(model_->params().buffer(b), opt_.range(b)); }
  TrainConfig config_;
  std::vector<DeviceBuffer> grad_shards_;
};

// ---------------------------------------------------------------- FSDP
class FsdpStrategy : public ShardedStrategyBase, public ParamResidency {
 public:
  FsdpStrategy(const TrainConfig& c, Transformer* m, Communicator* comm)
      : ShardedStrategyBase(c, m, comm), reshard_after_forward_(c.fsdp_reshard_after_forward()),
        fp64_(c.grad_sum_fp64()), single_term_(c.grad_accum() == 1), reducer_(m->backend()) {
    for (int b = 0; b < opt_.num_buffers(); ++b) {
      const size_t bytes = static_cast<size_t>(opt_.range(b).size()) * sizeof(float);
      param_shards_.emplace_back(m->backend(), bytes);
      grad_shards_.emplace_back(m->backend(), bytes);
      // grad_accum 1: one micro-batch per rank, one reduce-scatter per buffer
      // per step, whose fp64 sum is rounded straight into the fp32 shard; an
      // fp64 accumulator (8 / world bytes per parameter) only for more.
      if (fp64_ && !single_term_) acc64_shards_.emplace_back(m->backend(), 2 * bytes);
    }
    reduced_.assign(opt_.num_buffers(), false);
    if (c.precision() == BF16 && c.fsdp_gather_bf16())
      bf16_ = std::make_unique<Bf16Gather>(&m->layout(), comm->world_size());
  }
  ~FsdpStrategy() override {
    if (model_->residency() == this) model_->set_residency(nullptr);
  }

  absl::Status Setup(std::optional<uint64_t> init_seed) override {
    Backend& be = *model_->backend();
    if (bf16_ && be.device() != Device::kCpu)
      return absl::UnimplementedError(absl::StrCat("fsdp_gather_bf16: the bf16 gather packs in host memory; the ",
                                                   be.name(), " backend needs fsdp_gather_bf16: false"));
    for (int b = 0; b < opt_.num_buffers(); ++b) {
      // A released buffer has nothing to copy: a resume or init_from from a
      // checkpoint fills the shards afterwards (checkpoint_shards()).
      if (!init_seed && opt_.range(b).size() > 0 && model_->params().allocated(b))
        be.Copy(ParamShard(b), RangeView(model_->params().buffer(b), opt_.range(b)));
      model_->params().Release(b);
      model_->grads().Release(b);
    }
    if (init_seed) InitShards(*init_seed);
    model_->set_residency(this);
    BeginStep();
    return absl::OkStatus();
  }
  void BeginStep() override {
    for (int b = 0; b < opt_.num_buffers(); ++b)
      if (opt_.range(b).size() > 0) model_->backend()->Fill(acc64() ? Acc64Shard(b) : GradShard(b), 0.0);
    reduced_.assign(opt_.num_buffers(), false);
  }
  bool LocalGradientsFinite() override { return std::isfinite(model_->grads().SumSquares()); }
  absl::Status FinishBackward() override { return hook_status_; }
  absl::StatusOr<StepStats> OptimizerStep(double lr) override {
    if (!hook_status_.ok()) return hook_status_;
    std::vector<Tensor> p, g;
    for (int b = 0; b < opt_.num_buffers(); ++b) {
      // fp64 sum: rounded to fp32 once, here.
      if (acc64() && opt_.range(b).size() > 0) model_->backend()->Copy(GradShard(b), Acc64Shard(b));
      p.push_back(ParamShard(b));
      g.push_back(GradShard(b));
    }
    absl::StatusOr<StepStats> st = opt_.Step(p, g, lr, ReduceOver(comm_));
    BeginStep();  // the next step accumulates from zero (TrainStep zeroes only the model's, released, grads)
    return st;
  }
  absl::Status GatherFullParameters() override {
    for (int b = 0; b < opt_.num_buffers(); ++b) {
      absl::Status st = Gather(b, /*exact=*/true);  // checkpoints and probes read the master values
      if (!st.ok()) return st;
    }
    all_resident_ = true;
    return absl::OkStatus();
  }
  void ReleaseFullParameters() override {
    all_resident_ = false;
    for (int b = 0; b < opt_.num_buffers(); ++b) model_->params().Release(b);
  }
  int64_t state_bytes() const override {
    int64_t n = model_->params().allocated_bytes() + model_->grads().allocated_bytes() + opt_.state_bytes();
    for (int b = 0; b < opt_.num_buffers(); ++b) n += param_shards_[b].bytes() + grad_shards_[b].bytes();
    for (const DeviceBuffer& d : acc64_shards_) n += d.bytes();
    n += grad_tmp_.bytes() + reducer_.bytes() + (bf16_ ? bf16_->bytes() : 0);
    return n;
  }
  const char* name() const override { return "FSDP"; }
  bool sharded() const override { return true; }

  // ParamResidency.
  void Acquire(int b, Use use, bool backward) override {
    if (!hook_status_.ok()) return;
    if (!model_->params().allocated(b)) Note(Gather(b));
    if (use == Use::kBackward || (b == 0 && backward)) {
      if (!model_->grads().allocated(b)) {
        model_->grads().Allocate(b);
        model_->backend()->Fill(model_->grads().buffer(b), 0.0);
      }
    }
  }
  void Release(int b, Use use, bool backward) override {
    if (all_resident_) {
      if (use == Use::kBackward) Note(ReduceGradient(b));
      return;
    }
    if (use == Use::kForward) {
      // Buffer 0 stays for the backward; a layer stays when configured so.
      if (backward && (b == 0 || !reshard_after_forward_)) return;
      model_->params().Release(b);
      return;
    }
    Note(ReduceGradient(b));
    model_->params().Release(b);
  }

 private:
  void Note(absl::Status st) {
    if (hook_status_.ok() && !st.ok()) hook_status_ = st;
  }
  // exact = false on the bf16 path: matmul-only weights as bf16 (bf16_gather.h).
  absl::Status Gather(int b, bool exact = false) {
    model_->params().Allocate(b);
    absl::Status st = bf16_ && !exact
                          ? bf16_->Gather(*comm_, b, ParamShard(b), model_->params().buffer(b))
                          : AllGather(*comm_, *model_->backend(), ParamShard(b), model_->params().buffer(b));
    if (!st.ok()) return absl::Status(st.code(), absl::StrCat("FSDP gather of buffer ", b, ": ", st.message()));
    return absl::OkStatus();
  }
  // Sum this micro-batch's gradient of buffer b over ranks into the shard
  // accumulator and free the full gradient buffer.
  absl::Status ReduceGradient(int b) {
    if (!model_->grads().allocated(b)) return absl::OkStatus();
    Backend& be = *model_->backend();
    if (fp64_) {
      // This micro-batch's gradient (computed from zero), summed over ranks in
      // fp64 and added to the fp64 shard accumulator (grad_sum64.h) — or, with
      // grad_accum 1, rounded once into the fp32 shard.
      if (!acc64() && reduced_[b]) StartAccumulator();
      reduced_[b] = true;
      absl::Status st =
          reducer_.ReduceScatter(*comm_, model_->grads().buffer(b), acc64() ? Acc64Shard(b) : GradShard(b));
      if (!st.ok()) return absl::Status(st.code(), absl::StrCat("FSDP fp64 reduce-scatter of buffer ", b, ": ", st.message()));
      model_->grads().Release(b);
      return absl::OkStatus();
    }
    const int64_t n = opt_.range(b).size();
    if (grad_tmp_.bytes() < static_cast<size_t>(n) * sizeof(float))
      grad_tmp_ = DeviceBuffer(&be, static_cast<size_t>(n) * sizeof(float));
    const Tensor tmp(grad_tmp_.data(), DType::kF32, {n}, be.device());
    absl::Status st = ReduceScatterSum(*comm_, be, model_->grads().buffer(b), tmp);
    if (!st.ok()) return absl::Status(st.code(), absl::StrCat("FSDP reduce-scatter of buffer ", b, ": ", st.message()));
    if (n > 0) be.Axpy(GradShard(b), 1.0, tmp);
    model_->grads().Release(b);
    return absl::OkStatus();
  }
  // This rank's range of every buffer's initial values, one buffer's shard
  // on the host at a time (rounded to fp32 as Transformer::InitParams does).
  void InitShards(uint64_t seed) {
    std::vector<float> host;
    int current = -1;
    auto flush = [&] {
      if (current >= 0 && !host.empty()) model_->backend()->CopyFromHost(ParamShard(current), host.data());
    };
    GenerateInitialParams(model_->layout(), model_->dims(), seed,
                          [&](int b, int64_t offset, const double* v, int64_t n) {
                            if (b != current) {
                              flush();
                              current = b;
                              host.assign(static_cast<size_t>(opt_.range(b).size()), 0.0f);
                            }
                            const ElementRange r = opt_.range(b);
                            const int64_t lo = std::max(offset, r.begin), hi = std::min(offset + n, r.end);
                            for (int64_t i = lo; i < hi; ++i) host[i - r.begin] = static_cast<float>(v[i - offset]);
                          });
    flush();
  }
  Tensor ParamShard(int b) const {
    return Tensor(param_shards_[b].data(), DType::kF32, {opt_.range(b).size()}, model_->backend()->device());
  }
  Tensor GradShard(int b) const {
    return Tensor(grad_shards_[b].data(), DType::kF32, {opt_.range(b).size()}, model_->backend()->device());
  }
  bool acc64() const { return !acc64_shards_.empty(); }
  // A second micro-batch in a step although grad_accum is 1 (a caller that
  // runs more micro-batches than configured): from now on keep the fp64
  // accumulator, starting from what was reduced so far (its fp32 rounding).
  void StartAccumulator() {
    LOG(WARNING) << "FSDP: more than one micro-batch in a step with grad_accum 1; keeping an fp64 gradient "
                    "accumulator (8 / world bytes per parameter) from now on";
    single_term_ = false;
    for (int b = 0; b < opt_.num_buffers(); ++b) {
      acc64_shards_.emplace_back(model_->backend(), static_cast<size_t>(opt_.range(b).size()) * sizeof(double));
      if (opt_.range(b).size() > 0) model_->backend()->Copy(Acc64Shard(b), GradShard(b));
    }
  }
  Tensor Acc64Shard(int b) const {
    return Tensor(acc64_shards_[b].data(), DType::kF64, {opt_.range(b).size()}, model_->backend()->device());
  }

  Tensor ParamRange(int b) const override { return ParamShard(b); }
  bool reshard_after_forward_;
  std::vector<DeviceBuffer> param_shards_, grad_shards_;
  bool fp64_;         // grad_sum_fp64
  bool single_term_;  // grad_accum 1: one micro-batch per rank per step
  std::vector<bool> reduced_;  // per buffer, this step (grad_accum 1 guard)
  std::vector<DeviceBuffer> acc64_shards_;  // grad_sum_fp64 with grad_accum > 1: the step's gradient sum, fp64
  Fp64Reducer reducer_;
  std::unique_ptr<Bf16Gather> bf16_;  // precision BF16 with fsdp_gather_bf16
  DeviceBuffer grad_tmp_;  // one micro-batch's reduced shard, the largest buffer's size
  absl::Status hook_status_;
  bool all_resident_ = false;
};

}  // namespace

absl::StatusOr<std::unique_ptr<ParallelStrategy>> MakeParallelStrategy(const TrainConfig& config, Transformer* model,
                                                                       Communicator* comm) {
  switch (config.mode()) {
    case DDP:
      return std::unique_ptr<ParallelStrategy>(new DdpStrategy(config, model, comm));
    case ZERO1:
      return std::unique_ptr<ParallelStrategy>(new Zero1Strategy(config, model, comm));
    case FSDP:
      return std::unique_ptr<ParallelStrategy>(new FsdpStrategy(config, model, comm));
  }
  return absl::InvalidArgumentError(absl::StrCat("mode: unknown parallel mode ", static_cast<int>(config.mode()),
                                                 " (DDP, ZERO1 or FSDP)"));
}

}  // namespace longctx
