// Why: FSDP's bf16 gather (train/parallel/bf16_gather.h) is only correct if
// what it sends as bf16 is exactly what the bf16 matmul would round anyway and
// everything else arrives unchanged. Checked here on one process against an
// independent classification of the layout's slices and kernels/math/bf16.h's
// rounding (the one the bf16 GEMM paths use); the wire size against fp32's.
// Several ranks: tests/parallel/CMakeLists.txt (parallel.fsdp_bf16_gather)
// trains 2-rank FSDP bf16 with and without it and requires equal losses.
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/math/bf16.h"
#include "launch/communicator.h"
#include "model/config.h"
#include "model/param_layout.h"
#include "tests/support/test_seed.h"
#include "train/parallel/bf16_gather.h"

namespace longctx {
namespace {

ModelDims Dims(bool tie, bool qk_norm) {
  ModelDims d;
  d.vocab = 37;
  d.hidden = 16;
  d.layers = 2;
  d.heads = 4;
  d.kv_heads = 2;
  d.head_dim = 4;
  d.rope_dim = 4;
  d.ffn = 24;
  d.tied = tie;
  d.qk_norm = qk_norm;
  d.kinds.assign(d.layers, ROPE_FULL);
  return d;
}

// Independent of MatmulOnlyRanges: by the slice's HF name.
bool NameIsMatmulWeight(const std::string& name) {
  for (const char* w : {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "lm_head"})
    if (name.find(w) != std::string::npos) return true;
  return false;
}

TEST(Bf16GatherTest, RoundsExactlyTheMatmulWeightsAndKeepsTheRest) {
  for (bool tie : {false, true}) {
    for (bool qk : {false, true}) {
      const ModelDims d = Dims(tie, qk);
      ParamLayout layout(d);
      std::unique_ptr<Communicator> comm = MakeLocalCommunicator();
      Bf16Gather gather(&layout, 1);
      std::mt19937 rng(test::FreshSeed(7));
      std::normal_distribution<float> normal(0.0f, 1.0f);
      for (int b = 0; b < layout.num_buffers(); ++b) {
        const int64_t n = layout.buffer_size(b);
        std::vector<float> shard(n), full(n, -1.0f);
        for (float& x : shard) x = normal(rng);
        // Values whose bf16 rounding is a tie, a NaN and an infinity.
        if (n > 3) {
          shard[0] = 1.0f + std::ldexp(1.0f, -8);
          shard[1] = std::numeric_limits<float>::quiet_NaN();
          shard[2] = -std::numeric_limits<float>::infinity();
        }
        ASSERT_TRUE(gather.Gather(*comm, b, Tensor(shard.data(), DType::kF32, {n}), Tensor(full.data(), DType::kF32, {n}))
                        .ok());
        std::vector<bool> matmul(n, false);
        for (const ParamSlice& s : layout.slices())
          if (s.buffer == b && NameIsMatmulWeight(s.name))
            for (int64_t i = s.offset; i < s.offset + s.numel(); ++i) matmul[i] = true;
        int64_t rounded = 0;
        for (int64_t i = 0; i < n; ++i) {
          const float want = matmul[i] ? math::RoundToBf16(shard[i]) : shard[i];
          if (std::isnan(want)) {
            EXPECT_TRUE(std::isnan(full[i])) << "buffer " << b << " element " << i;
          } else {
            ASSERT_EQ(full[i], want) << "tie " << tie << " qk " << qk << " buffer " << b << " element " << i
                                     << (matmul[i] ? " (matmul)" : " (exact)");
          }
          if (full[i] != shard[i] && !std::isnan(shard[i])) ++rounded;
        }
        if (b > 0) {
          EXPECT_GT(rounded, n / 2) << "a layer is mostly matmul weights";
        }
      }
    }
  }
}

TEST(Bf16GatherTest, SendsAboutHalfTheBytesOfAnFp32Gather) {
  const ModelDims d = Dims(false, true);
  ParamLayout layout(d);
  for (int world : {1, 2, 3, 4}) {
    Bf16Gather gather(&layout, world);
    for (int b = 1; b < layout.num_buffers(); ++b) {
      // Norm weights (2D + 2 head_dim of a layer) stay fp32: 2 units each.
      const int64_t n = layout.buffer_size(b), norms = 2 * d.hidden + 2 * d.head_dim;
      const int64_t max_shard = ShardOf(n, 0, world).size();
      EXPECT_EQ(gather.fp32_units(b), 2 * max_shard);
      EXPECT_LE(gather.units(b), max_shard + norms) << "world " << world << " buffer " << b;
      EXPECT_GE(gather.units(b), max_shard) << "world " << world << " buffer " << b;
    }
  }
}

TEST(Bf16GatherTest, RefusesAShardOfTheWrongSize) {
  ParamLayout layout(Dims(false, false));
  std::unique_ptr<Communicator> comm = MakeLocalCommunicator();
  Bf16Gather gather(&layout, 1);
  const int64_t n = layout.buffer_size(1);
  std::vector<float> shard(n - 1), full(n);
  const absl::Status st =
      gather.Gather(*comm, 1, Tensor(shard.data(), DType::kF32, {n - 1}), Tensor(full.data(), DType::kF32, {n}));
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("bf16 gather of buffer 1"), std::string::npos) << st;
}

}  // namespace
}  // namespace longctx
