// Why: `longctx plan --world N --mode M` promises per-rank memory; these pin its
// arithmetic to what train/parallel allocates: DDP holds 16 bytes per
// parameter, ZeRO-1 shards only m and v, FSDP shards everything and adds the
// gathered buffer 0 + one layer (weights and grads), and "fits" compares the
// total with the budget.
#include <algorithm>
#include "gtest/gtest.h"
#include "model/config.h"
#include "model/plan.h"

namespace longctx {
namespace {

Plan SmallPlan() {
  ModelConfig m;
  m.set_vocab_size(1000);
  m.set_hidden_size(64);
  m.set_num_layers(4);
  m.set_num_heads(4);
  m.set_num_kv_heads(2);
  m.set_ffn_hidden_size(160);
  absl::StatusOr<ModelDims> d = ResolveModelConfig(m);
  EXPECT_TRUE(d.ok()) << d.status();
  PlanOptions o;
  o.batch = 1;
  o.seq_len = 32;
  return MakePlan(*d, o);
}

TEST(PlanRankMemoryTest, ModesAndWorlds) {
  const Plan p = SmallPlan();
  const int64_t P = p.params.total, top = p.params.embedding + p.params.final_norm + p.params.lm_head;
  const int64_t layer = p.params.per_layer;
  const RankMemoryPlan ddp = PlanRankMemory(p, DataParallelMode::kDdp, 4);
  EXPECT_EQ(ddp.weights + ddp.grads + ddp.optimizer, 16 * P);
  EXPECT_EQ(ddp.total, 16 * P + p.memory.activations);
  const RankMemoryPlan z1 = PlanRankMemory(p, DataParallelMode::kZero1, 4);
  EXPECT_EQ(z1.weights, 4 * P);
  EXPECT_LT(z1.optimizer, ddp.optimizer / 3);
  const RankMemoryPlan f1 = PlanRankMemory(p, DataParallelMode::kFsdp, 1);
  const RankMemoryPlan f4 = PlanRankMemory(p, DataParallelMode::kFsdp, 4);
  EXPECT_EQ(f1.weights, 4 * P);
  // Sharded state falls as 1/world (up to one element per buffer).
  EXPECT_NEAR(static_cast<double>(f4.weights), f1.weights / 4.0, 4.0 * (p.dims.layers + 1));
  EXPECT_NEAR(static_cast<double>(f4.optimizer), f1.optimizer / 4.0, 8.0 * (p.dims.layers + 1));
  EXPECT_EQ(f4.gathered, 2 * 4 * (top + layer));
  const RankMemoryPlan keep = PlanRankMemory(p, DataParallelMode::kFsdp, 4, /*reshard_after_forward=*/false);
  EXPECT_EQ(keep.gathered, 4 * (2 * top + p.dims.layers * layer + layer));
  // Fits: exactly at the total, not one byte below.
  EXPECT_TRUE(PlanRankMemory(p, DataParallelMode::kFsdp, 4, true, f4.total).fits());
  EXPECT_FALSE(PlanRankMemory(p, DataParallelMode::kFsdp, 4, true, f4.total - 1).fits());
  DataParallelMode m;
  EXPECT_TRUE(ParseParallelMode("FSDP", &m));
  EXPECT_EQ(m, DataParallelMode::kFsdp);
  EXPECT_FALSE(ParseParallelMode("zero3", &m));
}


TEST(PlanRankMemoryTest, Fp64GradientSum) {
  Plan p = SmallPlan();
  const int64_t P = p.params.total, top = p.params.embedding + p.params.final_norm + p.params.lm_head;
  const int64_t largest = std::max(top, p.params.per_layer);
  // One micro-batch on one rank: the fp32 gradient is the sum, nothing extra.
  EXPECT_EQ(PlanRankMemory(p, DataParallelMode::kDdp, 1, true, 0, true).grad_sum64, 0);
  // Two terms on two ranks: the fp32 shortcut, nothing extra.
  EXPECT_EQ(PlanRankMemory(p, DataParallelMode::kDdp, 2, true, 0, true).grad_sum64, 0);
  p.options.grad_accum = 2;
  const RankMemoryPlan d1 = PlanRankMemory(p, DataParallelMode::kDdp, 1, true, 0, true);
  EXPECT_EQ(d1.grad_sum64, 8 * P + 8 * std::min<int64_t>(largest, 1 << 20));
  EXPECT_EQ(d1.total, PlanRankMemory(p, DataParallelMode::kDdp, 1).total + d1.grad_sum64);
  // FSDP: the accumulator is the shard's, plus pieces sent over 4 ranks.
  const RankMemoryPlan f4 = PlanRankMemory(p, DataParallelMode::kFsdp, 4, true, 0, true);
  const RankMemoryPlan f4_32 = PlanRankMemory(p, DataParallelMode::kFsdp, 4, true, 0, false);
  const int64_t shard_total = f4_32.weights / 4, c = (largest + 3) / 4;
  EXPECT_EQ(f4.grad_sum64, 8 * shard_total + 8 * (c * 4 + c));
  EXPECT_EQ(f4_32.grad_sum64, 0);
}

}  // namespace
}  // namespace longctx
