// Why: `longctx plan` promises training memory without allocating the model;
// this holds it to what the Transformer really allocates: the activation arena
// equals the plan's layer activations + final norm + backward scratch (up to the
// arena's 64-byte alignment of each tensor), and the parameter count equals
// the layout's; with bf16 products, the operand copies equal the plan's too.
#include <cstdio>
#include <cstdlib>
#include <ostream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/backend.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/gemm_bf16.h"
#include "base/log.h"
#include "model/config.h"
#include "model/plan.h"
#include "model/transformer.h"
#include "tests/support/hardware_skip.h"

namespace longctx {
namespace {

// `batch` rows of `seq` tokens, one segment each (host tensors viewing the
// vectors: not copyable).
struct RowsBatch {
  std::vector<int32_t> ids, targets, pos, cu;
  BatchTensors tensors;
  RowsBatch(const RowsBatch&) = delete;
  RowsBatch& operator=(const RowsBatch&) = delete;
  RowsBatch(int64_t batch, int64_t seq) {
    const int64_t n = batch * seq;
    ids.assign(n, 5);
    targets.assign(n, 7);
    for (int64_t t = 0; t < n; ++t) pos.push_back(static_cast<int32_t>(t % seq));
    for (int64_t r = 0; r <= batch; ++r) cu.push_back(static_cast<int32_t>(r * seq));
    tensors.inputs = Tensor(ids.data(), DType::kI32, {n});
    tensors.targets = Tensor(targets.data(), DType::kI32, {n});
    tensors.positions = Tensor(pos.data(), DType::kI32, {n});
    tensors.cu_seqlens = Tensor(cu.data(), DType::kI32, {batch + 1});
  }
};

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
  const RowsBatch rows(batch, seq);
  const BatchTensors& b = rows.tensors;
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

// bf16 products keep copies of their operands (kernels/cpu/gemm_bf16.h),
// per thread and across steps; the plan counts them (MemoryPlan::
// bf16_operand_copies). Here a training step and an eval pass run at bf16
// precision in a fresh process (the copies, once made, stay: another test's
// would count), and the bytes every copy buffer then holds
// (cpu::Bf16ScratchBytes) must equal the plan's, for each library the CPU
// can run and for the shapes that change which operands are copied.
struct Bf16CopiesCase {
  std::string name;
  Bf16GemmLibrary library;
  bool bf16_storage = false;  // activation_dtype bf16: o reaches dy^T o in bf16
  int recompute_every = 0;    // recomputed layers give dy^T o an F32 o again
  bool narrow = false;        // q_dim and ffn < hidden / 2: dx is rounded into no free buffer
  bool tied = false;
};

void PrintTo(const Bf16CopiesCase& k, std::ostream* os) { *os << k.name; }

// Runs the step and eval pass; exits 0 when the held bytes equal the plan's,
// printing both (EXPECT_EXIT matches the line).
void StepAndCompareBf16Copies(const Bf16CopiesCase& k) {
  ModelConfig c;
  c.set_vocab_size(300);
  c.set_hidden_size(64);
  c.set_num_layers(4);
  c.set_num_heads(k.narrow ? 1 : 4);
  c.set_num_kv_heads(k.narrow ? 1 : 2);
  if (k.narrow) c.set_head_dim(8);
  c.set_ffn_hidden_size(k.narrow ? 16 : 96);
  c.set_tie_embeddings(k.tied);
  c.set_layer_pattern(RNOPE_SWA);
  c.set_sliding_window(16);
  absl::StatusOr<ModelDims> dims = ResolveModelConfig(c);
  CHECK(dims.ok()) << dims.status();
  CpuBackendOptions options;
  options.bf16_gemm = k.library;
  std::unique_ptr<Backend> be = MakeCpuBackend({}, options);
  CHECK(be->SetMatmulPrecision(MatmulPrecision::kBF16).ok());
  Transformer model(*dims, be.get(), DType::kF32);
  model.InitParams(1);
  model.set_recompute_every(k.recompute_every);
  if (k.bf16_storage) model.set_activation_dtype(DType::kBF16);
  const int64_t batch = 3, seq = 128, n = batch * seq;
  const RowsBatch rows(batch, seq);
  const BatchTensors& b = rows.tensors;
  const int64_t before = cpu::Bf16ScratchBytes();
  model.grads().Zero();
  model.ForwardBackward(b, 1.0 / n, true);
  model.ForwardBackward(b, 1.0 / n, false);
  const int64_t held = cpu::Bf16ScratchBytes();
  // The plan asks the backend what its products copy.
  const Bf16OperandCopies ops = be->bf16_operand_copies();
  const MemoryPlan m =
      EstimateTrainingMemory(*dims, batch, seq, 0, k.recompute_every, k.bf16_storage, true, ops);
  std::fprintf(stderr, "before %lld held %lld planned %lld (layers %lld, LM head %lld)\n",
               static_cast<long long>(before), static_cast<long long>(held),
               static_cast<long long>(m.bf16_operand_copies), static_cast<long long>(m.bf16_copies_layers),
               static_cast<long long>(m.bf16_copies_lm_head));
  const bool ok = before == 0 && held == m.bf16_operand_copies && m.bf16_copies_layers > 0 &&
                  m.bf16_copies_lm_head > 0 &&
                  m.activations == m.layer_activations + m.final_norm + m.token_buffers + m.logits_chunk +
                                       m.backward_scratch + m.bf16_operand_copies;
  std::exit(ok ? 0 : 1);
}

class PlanBf16CopiesTest : public ::testing::TestWithParam<Bf16CopiesCase> {};

TEST_P(PlanBf16CopiesTest, PlanEqualsTheCopiesAStepKeeps) {
  const Bf16CopiesCase& k = GetParam();
  if (k.library == Bf16GemmLibrary::kOneDnn && !cpu::OneDnnBf16Available())
    LONGCTX_SKIP_WITHOUT(::longctx::test::kNoAvx512) << "oneDNN has no bf16 matmul on this CPU (AVX2 only): the onednn path cannot run here";
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // a fresh process: no copies yet
  EXPECT_EXIT(StepAndCompareBf16Copies(k), ::testing::ExitedWithCode(0), "held [0-9]+ planned");
}

INSTANTIATE_TEST_SUITE_P(
    Cases, PlanBf16CopiesTest,
    ::testing::Values(Bf16CopiesCase{"onednn", Bf16GemmLibrary::kOneDnn},
                      Bf16CopiesCase{"onednn_bf16_storage", Bf16GemmLibrary::kOneDnn, true},
                      Bf16CopiesCase{"onednn_bf16_storage_recompute", Bf16GemmLibrary::kOneDnn, true, 2},
                      Bf16CopiesCase{"onednn_narrow_tied", Bf16GemmLibrary::kOneDnn, false, 0, true, true},
                      Bf16CopiesCase{"rounded_sgemm", Bf16GemmLibrary::kRoundedSgemm},
                      Bf16CopiesCase{"rounded_sgemm_bf16_storage", Bf16GemmLibrary::kRoundedSgemm, true},
                      Bf16CopiesCase{"rounded_sgemm_narrow_tied", Bf16GemmLibrary::kRoundedSgemm, false, 0, true,
                                     true}),
    [](const ::testing::TestParamInfo<Bf16CopiesCase>& info) { return info.param.name; });

// The CPU library's copies, as its backend reports them (bf16_operand_copies).
Bf16OperandCopies CopiesOf(Bf16GemmLibrary library) {
  CpuBackendOptions o;
  o.bf16_gemm = library;
  return CpuBf16OperandCopies(o);
}

// The plan's line follows the precision and the library: none for fp32
// products or in-kernel rounding, and fp32 copies twice the bf16 ones' bytes
// (up to each buffer's 64-byte rounding).
TEST(PlanBf16Copies, FollowPrecisionAndLibrary) {
  ModelConfig c;
  c.set_vocab_size(32000);
  c.set_hidden_size(512);
  c.set_num_layers(2);
  c.set_num_heads(8);
  c.set_num_kv_heads(4);
  c.set_ffn_hidden_size(1408);
  absl::StatusOr<ModelDims> dims = ResolveModelConfig(c);
  ASSERT_TRUE(dims.ok());
  const Bf16OperandCopies onednn = CopiesOf(Bf16GemmLibrary::kOneDnn);
  const Bf16OperandCopies sgemm = CopiesOf(Bf16GemmLibrary::kRoundedSgemm);
  const MemoryPlan fp32 = EstimateTrainingMemory(*dims, 4, 512, 0, 0, false, false, onednn);
  const MemoryPlan gpu = EstimateTrainingMemory(*dims, 4, 512, 0, 0, false, true, Bf16OperandCopies{});
  const MemoryPlan half = EstimateTrainingMemory(*dims, 4, 512, 0, 0, false, true, onednn);
  const MemoryPlan full = EstimateTrainingMemory(*dims, 4, 512, 0, 0, false, true, sgemm);
  EXPECT_STREQ(half.bf16_operands.name(), "bf16 copies");
  EXPECT_STREQ(full.bf16_operands.name(), "fp32 copies");
  EXPECT_STREQ(gpu.bf16_operands.name(), "none");
  EXPECT_EQ(fp32.bf16_operand_copies, 0);
  EXPECT_EQ(gpu.bf16_operand_copies, 0);
  EXPECT_EQ(half.activations, gpu.activations + half.bf16_operand_copies);
  // oneDNN at ref-b's shape: W [32000, 512], x [2048, 512], dlogits [1024, 32000]
  // in bf16; A: o [2048, 512]; B: W_gate_up [2816, 512].
  auto buf = [](int64_t bytes) { return (bytes + 63) / 64 * 64; };
  EXPECT_EQ(half.bf16_copies_lm_head, buf(32000 * 512 * 2 + 1) + buf(2048 * 512 * 2 + 1) + 1024 * 32000 * 2);
  EXPECT_EQ(half.bf16_copies_layers, buf(2048 * 512 * 2 + 1) + buf(2816 * 512 * 2 + 1));
  // Rounded sgemm widens every operand: A up to dgate_up [2048, 2816].
  EXPECT_EQ(full.bf16_copies_layers, buf(2048 * 2816 * 4 + 1) + buf(2048 * 1408 * 4 + 1));
  EXPECT_GT(full.bf16_copies_lm_head, 2 * half.bf16_copies_lm_head - 256);
}

}  // namespace
}  // namespace longctx
