// Why: `longctx plan` promises training memory without allocating the model;
// this holds it to what the Transformer really allocates: the activation arena
// equals the plan's layer activations + final norm + backward scratch (up to the
// arena's 64-byte alignment of each tensor), and the parameter count equals
// the layout's.
#include "gtest/gtest.h"
#include "kernels/backend.h"
#include "model/config.h"
#include "model/plan.h"
#include "model/transformer.h"

namespace longctx {
namespace {

class PlanConsistencyTest : public ::testing::TestWithParam<bool> {};

TEST_P(PlanConsistencyTest, PlanEqualsWhatTheModelAllocates) {
  ModelConfig c;
  c.set_vocab_size(300);
  c.set_hidden_size(64);
  c.set_num_layers(4);
  c.set_num_heads(4);
  c.set_num_kv_heads(2);
  c.set_ffn_hidden_size(96);
  c.set_layer_pattern(RNOPE_SWA);
  c.set_sliding_window(16);
  c.set_qk_norm(GetParam());
  absl::StatusOr<ModelDims> dims = ResolveModelConfig(c);
  ASSERT_TRUE(dims.ok());
  std::unique_ptr<Backend> be = MakeCpuBackend();
  Transformer model(*dims, be.get(), DType::kF32);
  model.InitParams(1);
  const int64_t batch = 3, seq = 128, n = batch * seq;
  std::vector<int32_t> ids(n, 5), targets(n, 7), pos(n);
  std::vector<int32_t> cu;
  for (int64_t r = 0; r <= batch; ++r) cu.push_back(static_cast<int32_t>(r * seq));
  for (int64_t t = 0; t < n; ++t) pos[t] = static_cast<int32_t>(t % seq);
  BatchTensors b;
  b.inputs = Tensor(ids.data(), DType::kI32, {n});
  b.targets = Tensor(targets.data(), DType::kI32, {n});
  b.positions = Tensor(pos.data(), DType::kI32, {n});
  b.cu_seqlens = Tensor(cu.data(), DType::kI32, {batch + 1});
  model.grads().Zero();
  model.ForwardBackward(b, 1.0 / n, true);

  const MemoryPlan m = EstimateTrainingMemory(*dims, batch, seq);
  const int64_t planned = m.layer_activations + m.final_norm + m.backward_scratch;
  const int64_t actual = static_cast<int64_t>(model.activation_bytes());
  // Each of the arena's ~15 tensors per layer is rounded up to 64 bytes.
  EXPECT_GE(actual, planned);
  EXPECT_LE(actual - planned, 64 * (16 * dims->layers + 16));
  EXPECT_EQ(CountParams(*dims).total, model.layout().total());
  EXPECT_EQ(m.weights, model.layout().total() * 4);
}

INSTANTIATE_TEST_SUITE_P(QkNorm, PlanConsistencyTest, ::testing::Bool());

}  // namespace
}  // namespace longctx
