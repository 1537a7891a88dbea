// Why: the whole model's backward pass is checked against central finite
// differences in F64, for every attention kind (RoPE full, RoPE sliding window,
// NoPE full), with packed documents (cu_seqlens), GQA, QK-norm, tied and untied
// embeddings, RoPER (all or part of the value dims rotated), and a loss mask.
// Every parameter tensor is probed. Weights, tokens and probed elements are
// drawn fresh each run (test_seed.h; LONGCTX_TEST_SEED=<n> replays one).
#include <cmath>
#include <random>
#include <vector>

#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "kernels/backend.h"
#include "kernels/cpu/cpu_backend.h"
#include "model/config.h"
#include "model/transformer.h"
#include "tests/support/test_seed.h"

namespace longctx {
namespace {

struct Case {
  const char* name;
  LayerPattern pattern;
  int group;
  bool qk_norm;
  bool tied;
  int kv_heads;
  bool roper = false;
  int roper_dim = 0;  // 0 = head_dim
};

ModelConfig TinyConfig(const Case& c) {
  ModelConfig m;
  m.set_vocab_size(23);
  m.set_hidden_size(16);
  m.set_num_layers(4);
  m.set_num_heads(4);
  m.set_num_kv_heads(c.kv_heads);
  m.set_ffn_hidden_size(24);
  m.set_layer_pattern(c.pattern);
  m.set_pattern_group(c.group);
  m.set_sliding_window(3);
  m.set_qk_norm(c.qk_norm);
  m.set_tie_embeddings(c.tied);
  m.set_rope_theta(100.0);  // small theta so rotations matter at short positions
  m.set_roper(c.roper);
  m.set_roper_dim(c.roper_dim);
  return m;
}

// Two rows of 11 tokens, documents of length 4, 1, 6 | 2, 9 (row boundaries
// are segment boundaries), positions restarting per document.
struct HostBatch {
  std::vector<int32_t> inputs, targets, positions, cu;
};

HostBatch MakeBatch(int vocab, std::mt19937& rng) {
  HostBatch b;
  const std::vector<int> docs = {4, 1, 6, 2, 9};
  std::uniform_int_distribution<int> tok(0, vocab - 1);
  b.cu.push_back(0);
  for (int len : docs) {
    for (int p = 0; p < len; ++p) {
      b.inputs.push_back(tok(rng));
      b.targets.push_back(tok(rng));
      b.positions.push_back(p);
    }
    b.cu.push_back(b.cu.back() + len);
  }
  b.targets[3] = -1;  // masked tokens
  b.targets[12] = -1;
  return b;
}

class TransformerGradTest : public ::testing::TestWithParam<Case> {};

TEST_P(TransformerGradTest, MatchesFiniteDifferences) {
  const Case c = GetParam();
  absl::StatusOr<ModelDims> dims = ResolveModelConfig(TinyConfig(c));
  ASSERT_TRUE(dims.ok()) << dims.status();
  std::unique_ptr<Backend> be = MakeCpuBackend();
  Transformer model(*dims, be.get(), DType::kF64);
  model.InitParams(test::FreshSeed(7));
  const ParamLayout& layout = model.layout();

  // Perturb every parameter (norm weights away from 1, matrices larger) so no
  // gradient is trivially symmetric.
  std::mt19937 rng(test::FreshSeed(123));
  std::normal_distribution<double> noise(0.0, 0.3);
  for (int b = 0; b < layout.num_buffers(); ++b) {
    double* p = model.params().buffer(b).as<double>();
    for (int64_t i = 0; i < layout.buffer_size(b); ++i) p[i] += noise(rng);
  }
  HostBatch hb = MakeBatch(dims->vocab, rng);
  const int64_t n = static_cast<int64_t>(hb.inputs.size());
  BatchTensors batch;
  batch.inputs = Tensor(hb.inputs.data(), DType::kI32, {n});
  batch.targets = Tensor(hb.targets.data(), DType::kI32, {n});
  batch.positions = Tensor(hb.positions.data(), DType::kI32, {n});
  batch.cu_seqlens = Tensor(hb.cu.data(), DType::kI32, {static_cast<int64_t>(hb.cu.size())});

  model.grads().Zero();
  const double loss = model.ForwardBackward(batch, 1.0, /*backward=*/true);
  ASSERT_TRUE(std::isfinite(loss));
  auto loss_at = [&]() { return model.ForwardBackward(batch, 0.0, /*backward=*/false); };
  EXPECT_DOUBLE_EQ(loss_at(), loss);  // forward is deterministic and unaffected by backward

  // Probe 6 random elements of every named tensor.
  const double eps = 1e-4;  // with the fourth-order stencil: truncation ~eps^4, rounding noise of the summed loss ~1e-14 / eps
  int probes = 0;
  double worst = 0;
  for (const ParamSlice& s : layout.slices()) {
    double* p = model.params().buffer(s.buffer).as<double>() + s.offset;
    const double* g = model.grads().buffer(s.buffer).as<double>() + s.offset;
    std::uniform_int_distribution<int64_t> pick(0, s.numel() - 1);
    for (int k = 0; k < 6; ++k) {
      const int64_t i = pick(rng);
      const double saved = p[i];
      // Fourth-order central difference: truncation O(eps^4), so the check
      // measures the gradient, not the loss's third derivative (the two-point
      // stencil's eps^2/6 * f3 reached 1.3e-9 absolute on some elements).
      auto at = [&](double x) { p[i] = x; return loss_at(); };
      const double up1 = at(saved + eps), down1 = at(saved - eps);
      const double up2 = at(saved + 2 * eps), down2 = at(saved - 2 * eps);
      p[i] = saved;
      const double fd = (8 * (up1 - down1) - (up2 - down2)) / (12 * eps);
      const double err = std::fabs(fd - g[i]) / std::max(1e-3, std::fabs(fd) + std::fabs(g[i]));
      worst = std::max(worst, err);
      // Worst err over 200 fresh draws x 9 cases (LONGCTX_TEST_SEED=1..200): 3.4e-7.
      EXPECT_LT(err, 1e-6) << c.name << " " << s.name << "[" << i << "] analytic " << g[i] << " fd " << fd;
      ++probes;
    }
  }
  // A wrong gradient anywhere shows up as err ~ 1; make sure probes really ran.
  EXPECT_EQ(probes, 6 * static_cast<int>(layout.slices().size()));
  RecordProperty("worst_relative_error", absl::StrFormat("%.3g", worst));
}

INSTANTIATE_TEST_SUITE_P(
    Kinds, TransformerGradTest,
    ::testing::Values(Case{"rope_full", ALL_ROPE_FULL, 4, false, false, 2},
                      Case{"rnope_swa_1_3", RNOPE_SWA, 4, false, false, 2},
                      Case{"rnope_swa_1_1_mha", RNOPE_SWA, 2, false, true, 4},
                      Case{"nope_full_mqa", ALL_NOPE_FULL, 4, false, false, 1},
                      Case{"rnope_full_qknorm", RNOPE_FULL, 2, true, false, 2},
                      Case{"rnope_swa_qknorm_tied", RNOPE_SWA, 4, true, true, 2},
                      Case{"roper_rope_full", ALL_ROPE_FULL, 4, false, false, 2, true, 0},
                      Case{"roper_dim2_rnope_swa_qknorm", RNOPE_SWA, 4, true, false, 2, true, 2},
                      Case{"roper_dim2_rnope_full_mha_tied", RNOPE_FULL, 2, false, true, 4, true, 2}),
    [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

// The same model in F32 and F64 gives the same loss and gradients to F32
// precision: the F32 path (what training runs) computes the F64-verified math.
TEST(TransformerPrecisionTest, F32MatchesF64) {
  Case c{"rnope_swa", RNOPE_SWA, 4, true, false, 2};
  absl::StatusOr<ModelDims> dims = ResolveModelConfig(TinyConfig(c));
  ASSERT_TRUE(dims.ok());
  std::unique_ptr<Backend> be = MakeCpuBackend();
  Transformer m64(*dims, be.get(), DType::kF64), m32(*dims, be.get(), DType::kF32);
  m64.InitParams(test::FreshSeed(3));
  const ParamLayout& layout = m64.layout();
  for (int b = 0; b < layout.num_buffers(); ++b) {
    const double* src = m64.params().buffer(b).as<double>();
    float* dst = m32.params().buffer(b).as<float>();
    for (int64_t i = 0; i < layout.buffer_size(b); ++i) dst[i] = static_cast<float>(src[i]);
    // Round the F64 copy to F32 values too, so both start from identical weights.
    double* s = m64.params().buffer(b).as<double>();
    for (int64_t i = 0; i < layout.buffer_size(b); ++i) s[i] = static_cast<double>(dst[i]);
  }
  std::mt19937 rng(test::FreshSeed(5));
  HostBatch hb = MakeBatch(dims->vocab, rng);
  const int64_t n = static_cast<int64_t>(hb.inputs.size());
  BatchTensors batch;
  batch.inputs = Tensor(hb.inputs.data(), DType::kI32, {n});
  batch.targets = Tensor(hb.targets.data(), DType::kI32, {n});
  batch.positions = Tensor(hb.positions.data(), DType::kI32, {n});
  batch.cu_seqlens = Tensor(hb.cu.data(), DType::kI32, {static_cast<int64_t>(hb.cu.size())});
  m64.grads().Zero();
  m32.grads().Zero();
  const double l64 = m64.ForwardBackward(batch, 1.0, true);
  const double l32 = m32.ForwardBackward(batch, 1.0, true);
  EXPECT_NEAR(l32, l64, 1e-5 * std::fabs(l64));
  double num = 0, den = 0;
  for (int b = 0; b < layout.num_buffers(); ++b) {
    const double* g64 = m64.grads().buffer(b).as<double>();
    const float* g32 = m32.grads().buffer(b).as<float>();
    for (int64_t i = 0; i < layout.buffer_size(b); ++i) {
      num += (g32[i] - g64[i]) * (g32[i] - g64[i]);
      den += g64[i] * g64[i];
    }
  }
  EXPECT_GT(den, 0);
  EXPECT_LT(std::sqrt(num / den), 1e-5);
}

}  // namespace
}  // namespace longctx
