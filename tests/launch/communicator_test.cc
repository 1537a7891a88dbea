// Why: the single-process pieces of launch/ — the one shard layout every
// FSDP/ZeRO buffer uses, the Local communicator the trainer runs on today, and
// the factory's launcher detection — must hold without mpirun. (Multi-rank
// collectives: communicator_mpi_check.cc under mpirun, from ctest.)
#include <cstdlib>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "launch/communicator.h"
#include "launch/mpi_communicator.h"

namespace longctx {
namespace {

TEST(ShardRange, CoversExactlyInRankOrderWithFirstRanksLarger) {
  for (int world = 1; world <= 9; ++world) {
    for (int64_t n : {0, 1, 2, 3, 7, 8, 9, 100, 1000003}) {
      int64_t next = 0;
      for (int r = 0; r < world; ++r) {
        const IndexRange s = ShardRange(n, r, world);
        EXPECT_EQ(s.begin, next) << "n=" << n << " world=" << world << " rank=" << r;
        const int64_t expected = n / world + (r < n % world ? 1 : 0);
        EXPECT_EQ(s.size(), expected) << "n=" << n << " world=" << world << " rank=" << r;
        for (int64_t i : {s.begin, s.end - 1})
          if (s.size() > 0) {
            EXPECT_EQ(ShardOwner(n, i, world), r) << "n=" << n << " i=" << i;
          }
        next = s.end;
      }
      EXPECT_EQ(next, n) << "n=" << n << " world=" << world;
    }
  }
  EXPECT_EQ(ShardRange(10, 0, 3).size(), 4);
  EXPECT_EQ(ShardRange(10, 1, 3).begin, 4);
  EXPECT_EQ(ShardRange(10, 2, 3).begin, 7);
  // Invalid arguments give an empty range, not a crash.
  EXPECT_EQ(ShardRange(10, 3, 3).size(), 0);
  EXPECT_EQ(ShardRange(-1, 0, 1).size(), 0);
}

TEST(ShardRange, OwnerOfEveryElement) {
  for (int world : {1, 3, 4, 7}) {
    for (int64_t n : {1, 5, 29}) {
      for (int64_t i = 0; i < n; ++i) {
        const int owner = ShardOwner(n, i, world);
        const IndexRange s = ShardRange(n, owner, world);
        EXPECT_TRUE(s.begin <= i && i < s.end) << "n=" << n << " world=" << world << " i=" << i;
      }
    }
  }
}

TEST(LocalCommunicator, WorldOfOneAndIdentityCollectives) {
  std::unique_ptr<Communicator> c = MakeLocalCommunicator();
  EXPECT_EQ(c->rank(), 0);
  EXPECT_EQ(c->world_size(), 1);
  EXPECT_EQ(c->local_rank(), 0);
  EXPECT_EQ(c->local_world_size(), 1);
  EXPECT_EQ(c->name(), "local");
  EXPECT_EQ(c->Where(), "local rank 0/1");

  std::vector<float> x = {1.5f, -2.0f, 3.0f};
  ASSERT_TRUE(c->AllReduceSum(Tensor(x.data(), DType::kF32, {3})).ok());
  EXPECT_EQ(x, (std::vector<float>{1.5f, -2.0f, 3.0f}));
  // Any tensor, as before (bf16 or CUDA gradients in a single process).
  uint16_t h = 7;
  EXPECT_TRUE(c->AllReduceSum(Tensor(&h, DType::kBF16, {1})).ok());
  double d[2] = {1.25, -3};
  ASSERT_TRUE(c->AllReduceSum(d, 2).ok());
  ASSERT_TRUE(c->AllReduceMax(d, 2).ok());
  ASSERT_TRUE(c->AllReduceMin(d, 2).ok());
  EXPECT_EQ(d[0], 1.25);
  EXPECT_EQ(d[1], -3);
  int64_t i64[1] = {(int64_t{1} << 62) + 1};
  ASSERT_TRUE(c->AllReduceSum(i64, 1).ok());
  EXPECT_EQ(i64[0], (int64_t{1} << 62) + 1);

  // The one shard is the whole buffer: reduce-scatter and all-gather copy.
  std::vector<float> shard(3, 0.0f), full(3, 0.0f);
  ASSERT_TRUE(c->ReduceScatterSum(x.data(), 3, shard.data()).ok());
  EXPECT_EQ(shard, x);
  ASSERT_TRUE(c->AllGather(shard.data(), 3, full.data()).ok());
  EXPECT_EQ(full, x);
  ASSERT_TRUE(c->AllGather(full.data(), 3, full.data()).ok());  // in place
  EXPECT_EQ(full, x);

  char bytes[4] = {'a', 'b', 'c', 'd'};
  ASSERT_TRUE(c->BroadcastBytes(bytes, 4, 0).ok());
  EXPECT_EQ(std::string(bytes, 4), "abcd");
  ASSERT_TRUE(c->Broadcast(Tensor(x.data(), DType::kF32, {3}), 0).ok());
  ASSERT_TRUE(c->Barrier().ok());

  absl::StatusOr<bool> yes = c->AllAgree(true), no = c->AllAgree(false);
  ASSERT_TRUE(yes.ok() && no.ok());
  EXPECT_TRUE(*yes);
  EXPECT_FALSE(*no);
}

TEST(LocalCommunicator, SplitAndSendRecv) {
  // A world of one is its own sub-group and its own ring neighbour.
  std::unique_ptr<Communicator> c = MakeLocalCommunicator();
  absl::StatusOr<std::unique_ptr<Communicator>> g = c->Split(3, 7);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ((*g)->world_size(), 1);
  EXPECT_EQ((*g)->rank(), 0);
  EXPECT_EQ((*g)->name(), "local");
  c.reset();  // the group outlives its parent
  std::vector<float> out = {1, 2, 3}, in(3, 0);
  ASSERT_TRUE((*g)->SendRecv(out.data(), 3, 0, in.data(), 3, 0, DType::kF32).ok());
  EXPECT_EQ(in, out);
  std::vector<uint16_t> b = {1, 2}, bi(2);
  ASSERT_TRUE((*g)->SendRecv(b.data(), 2, 0, bi.data(), 2, 0, DType::kBF16).ok());
  EXPECT_EQ(bi, b);
  EXPECT_TRUE((*g)->SendRecv(nullptr, 0, 0, nullptr, 0, 0, DType::kF32).ok());
  // Errors: another rank, unequal counts to itself, overlap, negative color.
  absl::Status st = (*g)->SendRecv(out.data(), 3, 1, in.data(), 3, 0, DType::kF32);
  EXPECT_TRUE(absl::IsInvalidArgument(st));
  EXPECT_NE(st.message().find("local rank 0/1: SendRecv: dest 1 is not a rank of a world of 1"), std::string::npos)
      << st;
  EXPECT_TRUE(absl::IsInvalidArgument((*g)->SendRecv(out.data(), 3, 0, in.data(), 2, 0, DType::kF32)));
  EXPECT_TRUE(absl::IsInvalidArgument((*g)->SendRecv(out.data(), 2, 0, out.data() + 1, 2, 0, DType::kF32)));
  EXPECT_TRUE(absl::IsInvalidArgument((*g)->Split(-1, 0).status()));
}

TEST(LocalCommunicator, BadArgumentsNameTheRank) {
  std::unique_ptr<Communicator> c = MakeLocalCommunicator();
  float f = 0;
  absl::Status st = c->Broadcast(Tensor(&f, DType::kF32, {1}), 1);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("local rank 0/1"), std::string::npos) << st;
  EXPECT_NE(st.message().find("root 1"), std::string::npos) << st;
  st = c->AllReduce(static_cast<double*>(nullptr), 2, ReduceOp::kMax);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  st = c->ReduceScatterSum(&f, -5, &f);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
}

// Sets or clears environment variables for one test and restores them.
class ScopedEnv {
 public:
  void Set(const char* name, const char* value) {
    Save(name);
    if (value != nullptr) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnv() {
    for (auto& [name, value, had] : saved_) {
      if (had) {
        setenv(name.c_str(), value.c_str(), 1);
      } else {
        unsetenv(name.c_str());
      }
    }
  }

 private:
  void Save(const char* name) {
    const char* v = std::getenv(name);
    saved_.push_back({name, v != nullptr ? v : "", v != nullptr});
  }
  struct Saved {
    std::string name, value;
    bool had;
  };
  std::vector<Saved> saved_;
};

void ClearLaunchers(ScopedEnv& env) {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID", "SLURM_NTASKS"})
    env.Set(name, nullptr);
}

TEST(DetectLauncher, ByEnvironment) {
  ScopedEnv env;
  ClearLaunchers(env);
  EXPECT_EQ(DetectLauncher(), "");
  env.Set("SLURM_PROCID", "0");
  EXPECT_EQ(DetectLauncher(), "") << "SLURM_PROCID alone (no task count) is not a launch";
  env.Set("SLURM_NTASKS", "2");
  EXPECT_EQ(DetectLauncher(), "slurm");
  env.Set("PMI_RANK", "0");
  EXPECT_EQ(DetectLauncher(), "pmi");
  env.Set("PMIX_RANK", "0");
  EXPECT_EQ(DetectLauncher(), "pmix");
  env.Set("OMPI_COMM_WORLD_SIZE", "4");
  EXPECT_EQ(DetectLauncher(), "openmpi");
  env.Set("OMPI_COMM_WORLD_SIZE", "");
  EXPECT_EQ(DetectLauncher(), "pmix") << "an empty variable is no launcher";
}

TEST(MakeCommunicator, WithoutLauncherIsLocalAndLeavesMpiAlone) {
  ScopedEnv env;
  ClearLaunchers(env);
  absl::StatusOr<std::unique_ptr<Communicator>> c = MakeCommunicator();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ((*c)->name(), "local");
  EXPECT_EQ((*c)->world_size(), 1);
  EXPECT_FALSE(MpiIsActive()) << "a process without a launcher must not initialize MPI";
  // A CUDA-side communicator without a launcher is Local too (identity).
  absl::StatusOr<std::unique_ptr<Communicator>> g = MakeCommunicator(Device::kCuda);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ((*g)->name(), "local");
}

TEST(AbortJob, WithoutMpiPrintsRankAndExitsOne) {
  EXPECT_EXIT(AbortJob(absl::InternalError("disk full while saving step 7")), testing::ExitedWithCode(1),
              "longctx: rank 0/1: error: disk full while saving step 7");
}

}  // namespace
}  // namespace longctx
