// Why: the KV cache must hand the attention exactly the keys of consecutive
// positions ending at the newest token, whatever compaction and growth did to
// its storage, and a sliding-window layer must stay within window - 1 plus
// the largest append. Rows are filled with their position so every move is
// visible.
#include <vector>

#include "gtest/gtest.h"
#include "kernels/backend.h"
#include "kernels/cpu/cpu_backend.h"
#include "model/config.h"
#include "model/kv_cache.h"

namespace longctx {
namespace {

TEST(KvCache, KeepsConsecutivePositionsThroughCompactionAndGrowth) {
  ModelConfig m;
  m.set_hidden_size(8);
  m.set_num_heads(2);
  m.set_num_kv_heads(1);
  m.set_num_layers(2);
  m.set_layer_pattern(RNOPE_SWA);
  m.set_pattern_group(2);  // layer 0 sliding, layer 1 NoPE full
  m.set_sliding_window(6);
  absl::StatusOr<ModelDims> dims = ResolveModelConfig(m);
  ASSERT_TRUE(dims.ok());
  std::unique_ptr<Backend> be = MakeCpuBackend();
  KvCache cache(*dims, be.get(), DType::kF32);
  const int64_t row = dims->kv_dim();
  int64_t pos = 0;
  // Appends of varied sizes: single tokens, blocks larger than the window.
  const std::vector<int64_t> blocks = {3, 1, 1, 9, 1, 1, 1, 1, 1, 1, 1, 2, 14, 1, 1, 5, 1, 1, 1, 1, 1, 1, 1, 1};
  for (int64_t b : blocks) {
    for (int l = 0; l < 2; ++l) {
      KvCache::Rows r = cache.Append(l, b);
      ASSERT_EQ(r.k.shape[0], b);
      for (int64_t t = 0; t < b; ++t)
        for (int64_t x = 0; x < row; ++x) {
          r.k.as<float>()[t * row + x] = static_cast<float>(pos + t);
          r.v.as<float>()[t * row + x] = static_cast<float>(-(pos + t));
        }
    }
    pos += b;
    for (int l = 0; l < 2; ++l) {
      const int64_t len = cache.length(l), first = cache.first_position(l);
      ASSERT_EQ(first + len, pos) << l;
      // A new block's first query needs window - 1 predecessors: all kept.
      if (l == 0) {
        ASSERT_GE(len, std::min<int64_t>(pos, 6 - 1 + b));
      }
      if (l == 1) {
        ASSERT_EQ(first, 0);
      }
      const float* k = cache.keys(l).as<float>();
      const float* v = cache.values(l).as<float>();
      for (int64_t t = 0; t < len; ++t)
        for (int64_t x = 0; x < row; ++x) {
          ASSERT_EQ(k[t * row + x], static_cast<float>(first + t)) << "layer " << l << " row " << t;
          ASSERT_EQ(v[t * row + x], static_cast<float>(-(first + t))) << "layer " << l << " row " << t;
        }
    }
  }
  // Sliding layer memory: bounded by window - 1 + the largest block (14), or 2 windows.
  EXPECT_LE(cache.capacity(0), 6 - 1 + 14);
  EXPECT_GT(cache.first_position(0), 0);
  EXPECT_EQ(cache.length(1), pos);
  cache.Reset();
  EXPECT_EQ(cache.length(0), 0);
  EXPECT_EQ(cache.length(1), 0);
}

}  // namespace
}  // namespace longctx
