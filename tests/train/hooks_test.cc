// Why: the training loop is "batches → TrainStep → hooks" (train/trainer.h), so
// what a run reports and saves depends on the hooks firing at the right steps:
// eval every eval_every steps and once at the end (one EvalHook for both),
// checkpoints every ckpt_every steps, at the end, and when a run is cut short;
// and on a rank other than 0 the rank-0-only hooks (metrics file, posfreq,
// probe) must not run while the others (eval, checkpoint) still do. Rank 1 of
// 2 is a fake communicator whose collectives are the identity.
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gtest/gtest.h"
#include "launch/communicator.h"
#include "tests/support/test_util.h"
#include "train/config_loader.h"
#include "train/hooks/eval_hook.h"
#include "train/hooks/hook.h"
#include "train/setup/backend_for_config.h"
#include "train/setup/config_options.h"
#include "train/trainer.h"

namespace longctx {
namespace {

using ::longctx::testing::MetricsEvents;
using ::longctx::testing::SourcePath;
using ::longctx::testing::TempDir;

// The local (identity) communicator, reporting another rank and world size.
class FakeRankCommunicator final : public Communicator {
 public:
  using Communicator::ReduceScatterSum;
  FakeRankCommunicator(int rank, int world) : rank_(rank), world_(world), local_(MakeLocalCommunicator()) {}
  int rank() const override { return rank_; }
  int world_size() const override { return world_; }
  int local_rank() const override { return rank_; }
  int local_world_size() const override { return world_; }
  std::string name() const override { return "fake"; }
  Device device() const override { return Device::kCpu; }
  absl::Status AllReduceSum(const Tensor& x) override { return local_->AllReduceSum(x); }
  absl::Status AllReduceSum(double* v, int n) override { return local_->AllReduceSum(v, n); }
  absl::Status AllReduce(double* v, int64_t n, ReduceOp op) override { return local_->AllReduce(v, n, op); }
  absl::Status AllReduce(int64_t* v, int64_t n, ReduceOp op) override { return local_->AllReduce(v, n, op); }
  // Collectives over shards act on the pretended rank's ShardRange (the local
  // communicator's shard is the whole buffer, which would overrun a rank's
  // shard): reduce-scatter copies this rank's piece; all-gather writes it back
  // and leaves the other ranks' pieces as they were.
  absl::Status ReduceScatterSum(const float* full, int64_t n, float* shard) override {
    const IndexRange r = ShardRange(n, rank_, world_);
    std::memcpy(shard, full + r.begin, sizeof(float) * r.size());
    return absl::OkStatus();
  }
  absl::Status ReduceScatterSum(const void* full, int64_t n, DType dtype, void* shard) override {
    const IndexRange r = ShardRange(n, rank_, world_);
    const size_t elem = DTypeSize(dtype);
    std::memcpy(shard, static_cast<const char*>(full) + r.begin * elem, elem * r.size());
    return absl::OkStatus();
  }
  absl::Status AllGather(const void* shard, int64_t n, DType dtype, void* full) override {
    const IndexRange r = ShardRange(n, rank_, world_);
    const size_t elem = DTypeSize(dtype);
    char* dst = static_cast<char*>(full) + r.begin * elem;
    if (dst != shard) std::memmove(dst, shard, r.size() * elem);
    return absl::OkStatus();
  }
  absl::Status Broadcast(const Tensor& x, int root) override { return local_->Broadcast(x, root); }
  absl::Status BroadcastBytes(void* d, int64_t n, int root) override { return local_->BroadcastBytes(d, n, root); }
  absl::Status Barrier() override { return local_->Barrier(); }

 private:
  int rank_, world_;
  std::unique_ptr<Communicator> local_;
};

// Records every event it sees, with the rank and world size it was told.
struct Record {
  std::vector<std::string> events;  // "start", "step N", "end N", "final N"
  int rank = -1, world = -1;
};

class RecordingHook final : public Hook {
 public:
  RecordingHook(bool rank0_only, Record* r) : rank0_only_(rank0_only), r_(r) {}
  std::string name() const override { return "recording"; }
  bool rank0_only() const override { return rank0_only_; }
  absl::Status OnRunStart(HookContext& ctx) override {
    r_->rank = ctx.rank, r_->world = ctx.world_size;
    r_->events.push_back("start");
    return absl::OkStatus();
  }
  absl::Status OnStepEnd(HookContext&, const StepEvent& e) override {
    r_->events.push_back("step " + std::to_string(e.result.step));
    return absl::OkStatus();
  }
  absl::Status OnRunEnd(HookContext&, const RunEndEvent& e) override {
    r_->events.push_back("end " + std::to_string(e.step));
    return absl::OkStatus();
  }
  absl::Status OnFinal(HookContext&, const RunEndEvent& e) override {
    r_->events.push_back("final " + std::to_string(e.step));
    return absl::OkStatus();
  }

 private:
  bool rank0_only_;
  Record* r_;
};

class HooksTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(::longctx::testing::WriteByteTokenCorpus(tmp_ / "text", data_, 60, 5).ok());
  }
  TrainConfig Config(const std::string& out_dir, std::vector<std::string> extra) {
    std::vector<std::string> o = {"data.path=" + data_, "out_dir=" + out_dir, "threads=1", "steps=7",
                                  "eval_every=3",       "ckpt_every=2",       "keep_checkpoints=10",
                                  "log_every=100",      "eval_batches=2",     "posfreq_every=5"};
    o.insert(o.end(), extra.begin(), extra.end());
    absl::StatusOr<TrainConfig> c = LoadTrainConfig(SourcePath("configs/tiny-test.textproto"), o);
    EXPECT_TRUE(c.ok()) << c.status();
    return *c;
  }
  static const EvalHook* FindEval(const Trainer& t) {
    for (const auto& h : t.hooks())
      if (auto* e = dynamic_cast<const EvalHook*>(h.get())) return e;
    return nullptr;
  }
  static std::vector<int64_t> Steps(const std::vector<nlohmann::json>& events) {
    std::vector<int64_t> s;
    for (const auto& e : events) s.push_back(e["step"].get<int64_t>());
    return s;
  }

  TempDir tmp_;
  std::string data_ = tmp_ / "corpus.ltok";
};

TEST(HookScheduleTest, PeriodicBeforeLast) {
  EXPECT_TRUE(PeriodicBeforeLast(3, 3, 7));
  EXPECT_TRUE(PeriodicBeforeLast(6, 3, 7));
  EXPECT_FALSE(PeriodicBeforeLast(4, 3, 7));
  EXPECT_FALSE(PeriodicBeforeLast(6, 3, 6));  // the last step is the final hooks' job
  EXPECT_FALSE(PeriodicBeforeLast(3, 0, 7));  // 0 = off
}

TEST_F(HooksTest, FireAtTheConfiguredStepsOnRankZero) {
  const std::string out = tmp_ / "run";
  absl::StatusOr<std::unique_ptr<Trainer>> t = Trainer::Create(Config(out, {}), MakeLocalCommunicator());
  ASSERT_TRUE(t.ok()) << t.status();
  Record all, rank0;
  (*t)->AddHook(std::make_unique<RecordingHook>(false, &all));
  (*t)->AddHook(std::make_unique<RecordingHook>(true, &rank0));
  absl::StatusOr<TrainSummary> s = (*t)->Run();
  ASSERT_TRUE(s.ok()) << s.status();

  const std::vector<std::string> want = {"start",  "step 1", "step 2", "step 3", "step 4", "step 5",
                                         "step 6", "step 7", "end 7",  "final 7"};
  EXPECT_EQ(all.events, want);
  EXPECT_EQ(rank0.events, want);
  EXPECT_EQ(all.rank, 0);
  EXPECT_EQ(all.world, 1);

  const std::string metrics = out + "/metrics.jsonl";
  // Eval: periodic at 3 and 6, final at 7, all through the one EvalHook.
  const std::vector<nlohmann::json> evals = MetricsEvents(metrics, "eval");
  EXPECT_EQ(Steps(evals), (std::vector<int64_t>{3, 6, 7}));
  const EvalHook* eval = FindEval(**t);
  ASSERT_NE(eval, nullptr);
  EXPECT_EQ(eval->evals_run(), 3);
  ASSERT_EQ(evals.size(), 3u);
  EXPECT_EQ(evals[2]["loss"].get<double>(), s->eval_loss);
  EXPECT_EQ(evals[2]["tokens"].get<int64_t>(), s->eval_tokens);
  // Periodic checkpoints at 2, 4, 6 and the final one at 7.
  for (const char* step : {"step-00000002", "step-00000004", "step-00000006", "step-00000007"})
    EXPECT_TRUE(std::filesystem::exists(out + "/" + step + "/trainer_state.json")) << step;
  EXPECT_FALSE(std::filesystem::exists(out + "/step-00000003"));
  EXPECT_EQ(s->checkpoint, out + "/step-00000007");
  // Train events: log_every 100, so only the last step; posfreq at 5 and the final one.
  EXPECT_EQ(Steps(MetricsEvents(metrics, "train")), (std::vector<int64_t>{7}));
  EXPECT_EQ(Steps(MetricsEvents(metrics, "posfreq")), (std::vector<int64_t>{5, 7}));
}

TEST_F(HooksTest, InterruptedRunSavesWithoutFinalHooks) {
  const std::string out = tmp_ / "cut";
  absl::StatusOr<std::unique_ptr<Trainer>> t = Trainer::Create(Config(out, {}), MakeLocalCommunicator());
  ASSERT_TRUE(t.ok()) << t.status();
  Record r;
  (*t)->AddHook(std::make_unique<RecordingHook>(false, &r));
  absl::StatusOr<TrainSummary> s = (*t)->Run(/*max_steps_this_run=*/3);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(r.events, (std::vector<std::string>{"start", "step 1", "step 2", "step 3", "end 3"}));
  EXPECT_EQ(s->checkpoint, out + "/step-00000003");  // the interrupted-run save
  EXPECT_TRUE(std::filesystem::exists(out + "/step-00000003/trainer_state.json"));
  EXPECT_EQ(Steps(MetricsEvents(out + "/metrics.jsonl", "eval")), (std::vector<int64_t>{3}));  // periodic only
}

TEST_F(HooksTest, RankZeroOnlyHooksDoNotRunOnRankOne) {
  const std::string out = tmp_ / "rank1";
  absl::StatusOr<std::unique_ptr<Trainer>> t =
      Trainer::Create(Config(out, {}), std::make_unique<FakeRankCommunicator>(1, 2));
  ASSERT_TRUE(t.ok()) << t.status();
  Record every_rank, rank0;
  (*t)->AddHook(std::make_unique<RecordingHook>(false, &every_rank));
  (*t)->AddHook(std::make_unique<RecordingHook>(true, &rank0));
  absl::StatusOr<TrainSummary> s = (*t)->Run();
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(rank0.events.empty());
  EXPECT_EQ(every_rank.rank, 1);
  EXPECT_EQ(every_rank.world, 2);
  EXPECT_EQ(every_rank.events.back(), "final 7");
  // Eval (every rank) ran periodically and at the end; rank 1 writes no file.
  const EvalHook* eval = FindEval(**t);
  ASSERT_NE(eval, nullptr);
  EXPECT_EQ(eval->evals_run(), 3);
  EXPECT_GT(s->eval_tokens, 0);
  EXPECT_FALSE(std::filesystem::exists(out + "/metrics.jsonl"));
  EXPECT_FALSE(std::filesystem::exists(out + "/step-00000007"));
  EXPECT_TRUE(s->checkpoint.empty());
}

}  // namespace
}  // namespace longctx
