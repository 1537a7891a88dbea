// Why: `longctx plan --cp C` promises per-rank memory and bytes per layer
// kind for context parallelism before a run exists to measure. These tests
// pin the promise: C = 1 is today's plan exactly; the per-token activations
// shrink by exactly 1/C; and the received K/V tokens (the byte formula's
// count) equal an independent count — every rank's queries of a real split
// (data/context_split.h), each key they may see, less the rank's own.
#include "model/context_plan.h"

#include <set>

#include "data/context_split.h"
#include "gtest/gtest.h"
#include "model/config.h"

namespace longctx {
namespace {

ModelDims Dims(LayerPattern pattern, int window) {
  ModelConfig m;
  m.set_vocab_size(1000);
  m.set_hidden_size(64);
  m.set_num_layers(8);
  m.set_num_heads(4);
  m.set_num_kv_heads(2);
  m.set_ffn_hidden_size(160);
  m.set_layer_pattern(pattern);
  if (window > 0) m.set_sliding_window(window);
  absl::StatusOr<ModelDims> d = ResolveModelConfig(m);
  EXPECT_TRUE(d.ok()) << d.status();
  return *d;
}

Plan MakeTestPlan(const ModelDims& d, int64_t T, int recompute_every = 0, bool bf16 = false) {
  PlanOptions o;
  o.batch = 2;
  o.seq_len = T;
  o.grad_accum = 3;
  o.recompute_every = recompute_every;
  o.bf16_activations = bf16;
  o.bf16_products = bf16;
  return MakePlan(d, o);
}

// Keys rank r's queries may see that other ranks hold, counted token by token
// on a real split of one document over the row.
int64_t CountReceived(int32_t T, int32_t C, int32_t rank, int64_t window) {
  PackedBatch b;
  b.batch_size = 1;
  b.seq_len = T;
  b.inputs.assign(T, 1);
  b.targets.assign(T, 1);
  for (int32_t i = 0; i < T; ++i) b.positions.push_back(i);
  b.cu_seqlens = {0, T};
  absl::StatusOr<ContextAssignment> a = ZigZagAssignment(T, C);
  EXPECT_TRUE(a.ok());
  absl::StatusOr<ContextShard> s = SplitRowForContext(b, 0, *a, rank);
  EXPECT_TRUE(s.ok());
  std::set<int32_t> own, need;
  for (int32_t i = 0; i < s->num_tokens(); ++i) own.insert(s->GlobalPosition(i));
  for (int32_t i = 0; i < s->num_tokens(); ++i) {
    const int32_t g = s->GlobalPosition(i);
    const int32_t first = window > 0 ? std::max<int32_t>(0, g - static_cast<int32_t>(window) + 1) : 0;
    for (int32_t k = first; k <= g; ++k)
      if (!own.count(k)) need.insert(k);
  }
  return static_cast<int64_t>(need.size());
}

TEST(ContextPlanTest, OneRankPerRowIsTodaysPlan) {
  for (LayerPattern pat : {ALL_ROPE_FULL, RNOPE_SWA}) {
    const ModelDims d = Dims(pat, pat == RNOPE_SWA ? 16 : 0);
    for (int rec : {0, 1, 2})
      for (bool bf16 : {false, true}) {
        const Plan plan = MakeTestPlan(d, 256, rec, bf16);
        for (DataParallelMode mode : {DataParallelMode::kDdp, DataParallelMode::kZero1, DataParallelMode::kFsdp})
          for (int world : {1, 3, 8}) {
            absl::StatusOr<ContextParallelPlan> c = PlanContextParallel(plan, 1, mode, world, true, 1 << 30, true);
            ASSERT_TRUE(c.ok()) << c.status();
            const RankMemoryPlan want = PlanRankMemory(plan, mode, world, true, 1 << 30, true);
            EXPECT_EQ(c->memory.activations, plan.memory.activations);
            EXPECT_EQ(c->memory.total, plan.memory.total);
            EXPECT_EQ(c->exchange_buffers, 0);
            EXPECT_EQ(c->ranks.total, want.total);
            EXPECT_EQ(c->ranks.activations, want.activations);
            EXPECT_EQ(c->ranks.weights, want.weights);
            EXPECT_EQ(c->ranks.grads, want.grads);
            EXPECT_EQ(c->ranks.optimizer, want.optimizer);
            EXPECT_EQ(c->ranks.gathered, want.gathered);
            EXPECT_EQ(c->ranks.grad_sum64, want.grad_sum64);
            EXPECT_EQ(c->bytes_per_step, 0);
            EXPECT_EQ(FormatRankMemory(c->ranks), FormatRankMemory(want));
          }
      }
  }
}

TEST(ContextPlanTest, ActivationsScaleAsOneOverC) {
  const ModelDims d = Dims(RNOPE_SWA, 512);
  const Plan plan = MakeTestPlan(d, 32768);
  for (int C : {2, 4, 8}) {
    absl::StatusOr<ContextParallelPlan> c = PlanContextParallel(plan, C, DataParallelMode::kFsdp, 8);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->rank_tokens, 32768 / C);
    EXPECT_EQ(c->memory.tokens, plan.memory.tokens / C);
    EXPECT_EQ(c->memory.layer_activations * C, plan.memory.layer_activations);
    EXPECT_EQ(c->memory.final_norm * C, plan.memory.final_norm);
    EXPECT_EQ(c->memory.backward_scratch * C, plan.memory.backward_scratch);
    // Only the LM head's logits chunk does not shrink; the exchange buffers come on top.
    const double ratio = static_cast<double>(c->memory.activations) / static_cast<double>(plan.memory.activations);
    EXPECT_LT(ratio, 1.0 / C + 0.02) << "C " << C;
    EXPECT_GT(c->exchange_buffers, 0);
    EXPECT_EQ(c->ranks.activations, c->memory.activations + c->exchange_buffers);
    // Parameters and their shards do not depend on C: FSDP shards over the whole world.
    const RankMemoryPlan base = PlanRankMemory(plan, DataParallelMode::kFsdp, 8);
    EXPECT_EQ(c->ranks.weights, base.weights);
    EXPECT_EQ(c->ranks.optimizer, base.optimizer);
  }
}

TEST(ContextPlanTest, ReceivedTokensEqualAnIndependentCount) {
  for (int32_t C : {1, 2, 3, 4, 8})
    for (int32_t T : {16 * C, 48 * C})
      for (int64_t w : {int64_t{1}, int64_t{2}, int64_t{5}, int64_t{8}, int64_t{17}, int64_t{40}, int64_t{1000}}) {
        for (int32_t r = 0; r < C; ++r)
          EXPECT_EQ(ZigZagReceivedTokens(T, C, r, w), CountReceived(T, C, r, w))
              << "T " << T << " C " << C << " rank " << r << " w " << w;
      }
  // The split's own answer (data/context_split.h) agrees for one document.
  for (int32_t C : {2, 4, 8})
    for (int64_t w : {int64_t{0}, int64_t{3}, int64_t{70}})
      for (int32_t r = 0; r < C; ++r) {
        const int32_t T = 32 * C;
        PackedBatch b;
        b.batch_size = 1;
        b.seq_len = T;
        b.inputs.assign(T, 1);
        b.targets.assign(T, 1);
        for (int32_t i = 0; i < T; ++i) b.positions.push_back(i);
        b.cu_seqlens = {0, T};
        absl::StatusOr<ContextAssignment> a = ZigZagAssignment(T, C);
        absl::StatusOr<ContextShard> s = SplitRowForContext(b, 0, *a, r);
        ASSERT_TRUE(s.ok());
        const int64_t want = w == 0 ? CountReceived(T, C, r, 0) : ZigZagReceivedTokens(T, C, r, w);
        EXPECT_EQ(ContextKeysToReceiveCount(*s, static_cast<int32_t>(w)), want) << "C " << C << " w " << w;
      }
  // Full layers: the ring / all-gather brings every other rank's tokens, which
  // rank 0 (its last chunk sees the whole row) does need; no rank needs more.
  for (int32_t C : {2, 4, 8}) {
    const int32_t T = 32 * C;
    int64_t most = 0;
    for (int32_t r = 0; r < C; ++r) most = std::max(most, CountReceived(T, C, r, 0));
    EXPECT_EQ(most, ZigZagReceivedTokens(T, C, 0, 0));
    EXPECT_EQ(most, T - T / C);
  }
}

TEST(ContextPlanTest, BytesPerLayerKind) {
  const int64_t T = 4096, w = 300;
  const ModelDims d = Dims(RNOPE_SWA, static_cast<int>(w));  // 8 layers: 6 SWA, 2 NoPE full
  for (bool bf16 : {false, true})
    for (int rec : {0, 2}) {
      const Plan plan = MakeTestPlan(d, T, rec, bf16);
      const int C = 4;
      absl::StatusOr<ContextParallelPlan> c = PlanContextParallel(plan, C, DataParallelMode::kDdp, 8);
      ASSERT_TRUE(c.ok()) << c.status();
      ASSERT_EQ(c->layers.size(), 2u);
      const int64_t e = bf16 ? 2 : 4, kv = d.kv_dim();
      const ContextLayerComm& full = c->layers[0];
      const ContextLayerComm& swa = c->layers[1];
      EXPECT_EQ(full.kind, "full");
      EXPECT_EQ(full.layers, 2);
      EXPECT_EQ(swa.layers, 6);
      int64_t halo = 0;
      for (int r = 0; r < C; ++r) halo = std::max(halo, CountReceived(T, C, r, w));
      EXPECT_EQ(halo, 2 * (w - 1));  // a middle rank: w-1 before each of its two chunks
      EXPECT_EQ(swa.forward, halo * 2 * kv * e);
      EXPECT_EQ(full.forward, (T - T / C) * 2 * kv * e);
      EXPECT_EQ(swa.backward, 2 * swa.forward);
      int64_t rec_full = 0, rec_swa = 0;
      for (int l = 0; l < d.layers; ++l)
        if (rec > 0 && l % rec == 0) (d.layer_window(l) == 0 ? rec_full : rec_swa) += 1;
      EXPECT_EQ(full.per_row_all, 2 * 3 * full.forward + rec_full * full.forward);
      EXPECT_EQ(swa.per_row_all, 6 * 3 * swa.forward + rec_swa * swa.forward);
      EXPECT_EQ(c->bytes_per_step, (full.per_row_all + swa.per_row_all) * 2 * 3);  // batch 2 x grad_accum 3
      EXPECT_EQ(c->tokens_per_step, 2 * 2 * 3 * T);                                  // dp 2 groups
    }
}

TEST(ContextPlanTest, RefusesBadSplits) {
  const Plan plan = MakeTestPlan(Dims(ALL_ROPE_FULL, 0), 1000);
  absl::StatusOr<ContextParallelPlan> c = PlanContextParallel(plan, 3, DataParallelMode::kDdp, 8);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("must divide --world 8"), std::string::npos) << c.status();
  c = PlanContextParallel(plan, 16, DataParallelMode::kDdp, 16);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("not divisible by 2 x cp = 32"), std::string::npos) << c.status();
  EXPECT_FALSE(PlanContextParallel(plan, 0, DataParallelMode::kDdp, 8).ok());
}

}  // namespace
}  // namespace longctx
