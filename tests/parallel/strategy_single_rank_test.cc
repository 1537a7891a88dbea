// Why: on one rank every strategy must reduce to today's training step: ZeRO-1
// and FSDP (gathers and reduce-scatters are copies, one shard = the whole
// buffer) give the DDP/AdamW parameters bit for bit with one micro-batch per
// step, and FSDP holds no full parameter or gradient buffer between steps.
// FSDP initialising its shards itself (Setup(seed): GenerateInitialParams,
// model/param_layout.h) must give Transformer::InitParams' values bit for bit.
#include <cstring>
#include <optional>
#include <random>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/backend.h"
#include "launch/communicator.h"
#include "model/config.h"
#include "model/transformer.h"
#include "train/parallel/parallel_strategy.h"

namespace longctx {
namespace {

TrainConfig Config(ParallelMode mode, bool reshard) {
  TrainConfig c;
  ModelConfig* m = c.mutable_model();
  m->set_vocab_size(31);
  m->set_hidden_size(16);
  m->set_num_layers(3);
  m->set_num_heads(4);
  m->set_num_kv_heads(2);
  m->set_ffn_hidden_size(24);
  m->set_layer_pattern(RNOPE_SWA);
  m->set_sliding_window(4);
  c.mutable_optim()->set_grad_clip(0.5);
  c.set_mode(mode);
  c.set_fsdp_reshard_after_forward(reshard);
  return c;
}

struct Batch {
  std::vector<int32_t> in, tg, pos, cu;
  BatchTensors t() {
    const int64_t n = static_cast<int64_t>(in.size());
    return {Tensor(in.data(), DType::kI32, {n}), Tensor(tg.data(), DType::kI32, {n}),
            Tensor(pos.data(), DType::kI32, {n}), Tensor(cu.data(), DType::kI32, {static_cast<int64_t>(cu.size())})};
  }
};

Batch MakeBatch(int seed) {
  Batch b;
  std::mt19937 rng(seed);
  b.cu = {0, 9, 20};
  for (int s = 0; s < 2; ++s)
    for (int t = b.cu[s]; t < b.cu[s + 1]; ++t) {
      b.in.push_back(rng() % 31);
      b.tg.push_back(rng() % 31);
      b.pos.push_back(t - b.cu[s]);
    }
  return b;
}

std::vector<std::vector<float>> Train(ParallelMode mode, bool reshard, std::vector<double>* losses,
                                      bool strategy_inits = false) {
  const TrainConfig c = Config(mode, reshard);
  absl::StatusOr<ModelDims> d = ResolveModelConfig(c.model());
  EXPECT_TRUE(d.ok());
  std::unique_ptr<Backend> be = MakeCpuBackend();
  Transformer model(*d, be.get(), DType::kF32);
  if (!strategy_inits) model.InitParams(9);
  std::unique_ptr<Communicator> comm = MakeLocalCommunicator();
  absl::StatusOr<std::unique_ptr<ParallelStrategy>> s = MakeParallelStrategy(c, &model, comm.get());
  EXPECT_TRUE(s.ok());
  EXPECT_TRUE((*s)->Setup(strategy_inits ? std::optional<uint64_t>(9) : std::nullopt).ok());
  for (int step = 1; step <= 4; ++step) {
    (*s)->BeginStep();
    Batch b = MakeBatch(step);
    losses->push_back(model.ForwardBackward(b.t(), 1.0 / 20, true));
    EXPECT_TRUE((*s)->FinishBackward().ok());
    absl::StatusOr<StepStats> st = (*s)->OptimizerStep(1e-2);
    EXPECT_TRUE(st.ok());
    if (mode == FSDP) {
      EXPECT_EQ(model.params().allocated_bytes(), 0) << "step " << step;
      EXPECT_EQ(model.grads().allocated_bytes(), 0) << "step " << step;
    }
  }
  EXPECT_TRUE((*s)->GatherFullParameters().ok());
  std::vector<std::vector<float>> out;
  for (int b = 0; b < model.layout().num_buffers(); ++b) {
    out.emplace_back(model.layout().buffer_size(b));
    model.params().CopyToHost(b, out.back().data());
  }
  (*s)->ReleaseFullParameters();
  return out;
}

TEST(StrategySingleRankTest, Zero1AndFsdpEqualDdpBitForBit) {
  std::vector<double> ddp_losses;
  const auto ddp = Train(DDP, true, &ddp_losses);
  for (auto [mode, reshard, inits] : {std::tuple{ZERO1, true, false}, std::tuple{FSDP, true, false},
                                      std::tuple{FSDP, false, false}, std::tuple{FSDP, true, true},
                                      std::tuple{ZERO1, true, true}, std::tuple{DDP, true, true}}) {
    std::vector<double> losses;
    const auto p = Train(mode, reshard, &losses, inits);
    EXPECT_EQ(losses, ddp_losses) << ParallelMode_Name(mode) << " reshard " << reshard << " strategy inits " << inits;
    for (size_t b = 0; b < p.size(); ++b)
      EXPECT_EQ(0, std::memcmp(p[b].data(), ddp[b].data(), p[b].size() * sizeof(float)))
          << ParallelMode_Name(mode) << " reshard " << reshard << " strategy inits " << inits << " buffer " << b;
  }
}

}  // namespace
}  // namespace longctx
