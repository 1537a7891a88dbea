// Why: on one rank every strategy must reduce to today's training step: ZeRO-1
// and FSDP (gathers and reduce-scatters are copies, one shard = the whole
// buffer) give the DDP/AdamW parameters bit for bit with one micro-batch per
// step, and FSDP holds no full parameter or gradient buffer between steps.
// With grad_sum_fp64 several micro-batches a step still agree bit for bit
// across modes, and the summed gradient is checked against a double-precision
// sum of separately computed micro-batch gradients.
// FSDP initialising its shards itself (Setup(seed): GenerateInitialParams,
// model/param_layout.h) must give Transformer::InitParams' values bit for bit.
#include <cstring>
#include <optional>
#include <random>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/backend.h"
#include "kernels/cpu/cpu_backend.h"
#include "launch/communicator.h"
#include "model/config.h"
#include "model/transformer.h"
#include "tests/support/small_model.h"
#include "tests/support/test_seed.h"
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
  std::mt19937 rng(test::FreshSeed(seed));
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
                                      bool strategy_inits = false, int micro = 1, bool fp64 = true) {
  TrainConfig c = Config(mode, reshard);
  c.set_grad_sum_fp64(fp64);
  c.set_grad_accum(micro);  // FSDP keeps an fp64 accumulator only for grad_accum > 1
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
    double loss = 0;
    for (int k = 0; k < micro; ++k) {
      Batch b = MakeBatch(step * 10 + k);
      (*s)->BeginMicroBatch();
      loss += model.ForwardBackward(b.t(), 1.0 / (20 * micro), true);
      (*s)->EndMicroBatch();
    }
    losses->push_back(loss);
    EXPECT_TRUE((*s)->FinishBackward().ok());
    absl::StatusOr<StepStats> st = (*s)->OptimizerStep(1e-2);
    EXPECT_TRUE(st.ok());
    if (mode == FSDP) {
      EXPECT_EQ(model.params().allocated_bytes(), 0) << "step " << step;
      EXPECT_EQ(model.grads().allocated_bytes(), 0) << "step " << step;
    }
  }
  return testing::FullParametersOnHost(**s, model);
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

// FSDP with grad_accum 1 keeps no fp64 accumulator; a second micro-batch in a
// step (more than configured) makes it start one instead of overwriting the
// first micro-batch's reduced gradient: on one rank the update equals DDP's.
TEST(StrategySingleRankTest, FsdpGradAccumOneStartsAnAccumulatorOnASecondMicroBatch) {
  std::vector<std::vector<float>> got;
  for (ParallelMode mode : {DDP, FSDP}) {
    TrainConfig c = Config(mode, true);
    c.set_grad_sum_fp64(true);  // one rank: the first micro-batch's sum is fp32 already, so no rounding is lost
    absl::StatusOr<ModelDims> d = ResolveModelConfig(c.model());
    ASSERT_TRUE(d.ok());
    std::unique_ptr<Backend> be = MakeCpuBackend();
    Transformer model(*d, be.get(), DType::kF32);
    std::unique_ptr<Communicator> comm = MakeLocalCommunicator();
    absl::StatusOr<std::unique_ptr<ParallelStrategy>> s = MakeParallelStrategy(c, &model, comm.get());
    ASSERT_TRUE(s.ok());
    ASSERT_TRUE((*s)->Setup(9).ok());
    const int64_t before = (*s)->state_bytes();
    (*s)->BeginStep();
    for (int k = 0; k < 2; ++k) {
      Batch b = MakeBatch(k);
      (*s)->BeginMicroBatch();
      model.ForwardBackward(b.t(), 1.0 / 40, true);
      (*s)->EndMicroBatch();
    }
    ASSERT_TRUE((*s)->FinishBackward().ok());
    ASSERT_TRUE((*s)->OptimizerStep(1e-2).ok());
    if (mode == FSDP) {
      EXPECT_GT((*s)->state_bytes(), before) << "the fp64 accumulator";
    }
    ASSERT_TRUE((*s)->GatherFullParameters().ok());
    std::vector<float> all;
    for (int b = 0; b < model.layout().num_buffers(); ++b) {
      std::vector<float> host(model.layout().buffer_size(b));
      model.params().CopyToHost(b, host.data());
      all.insert(all.end(), host.begin(), host.end());
    }
    (*s)->ReleaseFullParameters();
    got.push_back(all);
  }
  EXPECT_EQ(got[0], got[1]);
}

// grad_sum_fp64 with one micro-batch changes nothing: fp32 -> fp64 -> fp32 of
// one term is exact, so every mode equals the fp32 path bit for bit.
TEST(StrategySingleRankTest, OneMicroBatchFp64SumEqualsFp32Path) {
  std::vector<double> ref_losses;
  const auto ref = Train(DDP, true, &ref_losses, false, 1, /*fp64=*/false);
  for (ParallelMode mode : {DDP, ZERO1, FSDP}) {
    std::vector<double> losses;
    const auto p = Train(mode, true, &losses, false, 1, /*fp64=*/true);
    EXPECT_EQ(losses, ref_losses) << ParallelMode_Name(mode);
    for (size_t b = 0; b < p.size(); ++b)
      EXPECT_EQ(0, std::memcmp(p[b].data(), ref[b].data(), p[b].size() * sizeof(float)))
          << ParallelMode_Name(mode) << " buffer " << b;
  }
}

// Three micro-batches a step: the modes still agree bit for bit, FSDP summing
// per layer in its hook and DDP/ZeRO-1 in their fp64 accumulators.
TEST(StrategySingleRankTest, MicroBatchesFp64ModesAgreeBitForBit) {
  std::vector<double> ddp_losses;
  const auto ddp = Train(DDP, true, &ddp_losses, false, 3);
  for (auto [mode, reshard] : {std::tuple{ZERO1, true}, std::tuple{FSDP, true}, std::tuple{FSDP, false}}) {
    std::vector<double> losses;
    const auto p = Train(mode, reshard, &losses, false, 3);
    EXPECT_EQ(losses, ddp_losses) << ParallelMode_Name(mode) << " reshard " << reshard;
    for (size_t b = 0; b < p.size(); ++b)
      EXPECT_EQ(0, std::memcmp(p[b].data(), ddp[b].data(), p[b].size() * sizeof(float)))
          << ParallelMode_Name(mode) << " reshard " << reshard << " buffer " << b;
  }
}

// The reduced gradient is the fp32 rounding of the fp64 sum of the
// micro-batch gradients, each computed alone (an independent reference: a
// second model, every micro-batch from zeroed gradients, summed on the host
// in double) — checked for DDP; ZeRO-1 and FSDP equal DDP bit for bit (above).
TEST(StrategySingleRankTest, Fp64SumIsTheRoundedDoubleSumOfMicroBatchGradients) {
  constexpr int kMicro = 4;
  const TrainConfig c0 = Config(DDP, true);
  absl::StatusOr<ModelDims> d = ResolveModelConfig(c0.model());
  ASSERT_TRUE(d.ok());
  std::unique_ptr<Backend> be = MakeCpuBackend();
  // Reference.
  Transformer ref(*d, be.get(), DType::kF32);
  ref.InitParams(9);
  std::vector<std::vector<double>> sum(ref.layout().num_buffers());
  for (int b = 0; b < ref.layout().num_buffers(); ++b) sum[b].assign(ref.layout().buffer_size(b), 0.0);
  std::vector<float> host;
  for (int k = 0; k < kMicro; ++k) {
    ref.grads().Zero();
    Batch batch = MakeBatch(100 + k);
    ref.ForwardBackward(batch.t(), 1.0 / (20 * kMicro), true);
    for (int b = 0; b < ref.layout().num_buffers(); ++b) {
      host.resize(ref.layout().buffer_size(b));
      ref.grads().CopyToHost(b, host.data());
      for (size_t i = 0; i < host.size(); ++i) sum[b][i] += host[i];
    }
  }
  // Through DDP's strategy, with grad_sum_fp64 (must equal the reference) and
  // without (fp32 accumulation in place: must differ somewhere, else this
  // test could not tell the two sums apart).
  for (bool fp64 : {true, false}) {
    TrainConfig c = c0;
    c.set_grad_sum_fp64(fp64);
    Transformer model(*d, be.get(), DType::kF32);
    model.InitParams(9);
    std::unique_ptr<Communicator> comm = MakeLocalCommunicator();
    absl::StatusOr<std::unique_ptr<ParallelStrategy>> s = MakeParallelStrategy(c, &model, comm.get());
    ASSERT_TRUE(s.ok());
    ASSERT_TRUE((*s)->Setup(std::nullopt).ok());
    (*s)->BeginStep();
    for (int k = 0; k < kMicro; ++k) {
      Batch batch = MakeBatch(100 + k);
      (*s)->BeginMicroBatch();
      model.ForwardBackward(batch.t(), 1.0 / (20 * kMicro), true);
      (*s)->EndMicroBatch();
    }
    ASSERT_TRUE((*s)->LocalGradientsFinite());
    ASSERT_TRUE((*s)->FinishBackward().ok());
    int64_t differ = 0;
    for (int b = 0; b < model.layout().num_buffers(); ++b) {
      host.resize(model.layout().buffer_size(b));
      model.grads().CopyToHost(b, host.data());
      for (size_t i = 0; i < host.size(); ++i) {
        if (host[i] != static_cast<float>(sum[b][i])) ++differ;
        if (fp64) {
          ASSERT_EQ(host[i], static_cast<float>(sum[b][i])) << "buffer " << b << " element " << i;
        }
      }
    }
    if (!fp64) {
      EXPECT_GT(differ, 0) << "fp32 in-place accumulation matched the rounded fp64 sum everywhere";
    }
  }
}

}  // namespace
}  // namespace longctx
