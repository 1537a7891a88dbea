// Why: configs the fault probe found aborting on `CPU allocation of … bytes
// failed` (hidden_size 2e9 or 1048576, vocab_size 2e9, ffn_hidden_size 2e9,
// data.batch_size 65536, a checkpoint with hidden_size 1e9) or growing memory
// without end (num_layers 1e8) must come back as one error with the numbers
// and the field to change, before anything is allocated — and a config that
// fits must still pass.
#include "train/setup/memory_check.h"

#include <filesystem>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"
#include "model/plan.h"
#include "tests/support/test_util.h"
#include "train/checkpoint/checkpoint.h"
#include "train/setup/loaded_checkpoint.h"
#include "train/config_loader.h"

namespace longctx {
namespace {

using ::testing::HasSubstr;
constexpr int64_t kGiB = int64_t{1} << 30;

TrainConfig Demo(const std::vector<std::string>& overrides) {
  auto c = LoadTrainConfig(testing::SourcePath("configs/demo.textproto"), overrides);
  EXPECT_TRUE(c.ok()) << c.status();
  return *c;
}

absl::Status Check(const TrainConfig& c, MemoryUse use, int64_t available, int world = 1, int node = 1) {
  auto dims = ResolveModelConfig(c.model());
  EXPECT_TRUE(dims.ok()) << dims.status();
  return CheckMemoryFits(c, *dims, use, world, node, available, Bf16OperandCopies{});
}

TEST(MemoryCheck, DemoFitsAndTheBoundaryIsThePlanTotal) {
  const TrainConfig c = Demo({});
  auto dims = ResolveModelConfig(c.model());
  ASSERT_TRUE(dims.ok());
  const int64_t need = EstimateTrainingMemory(*dims, c.data().batch_size(), c.data().seq_len()).total;
  EXPECT_TRUE(Check(c, MemoryUse::kTraining, need).ok());
  const absl::Status st = Check(c, MemoryUse::kTraining, need - 1);
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted);
  // Two ranks on the node need twice as much.
  EXPECT_FALSE(Check(c, MemoryUse::kTraining, need, 2, 2).ok());
  EXPECT_TRUE(Check(c, MemoryUse::kTraining, -1).ok());  // unknown memory: no verdict
}

// The copies a CPU backend running `library` reports.
Bf16OperandCopies CopiesOf(Bf16GemmLibrary library) {
  CpuBackendOptions o;
  o.bf16_gemm = library;
  return CpuBf16OperandCopies(o);
}

// At bf16 precision the boundary is the plan's total with the operand copies
// of the library named (oneDNN: bf16 copies, rounded sgemm: fp32 copies), and
// those copies are part of it: the fp32-copies total is the larger.
TEST(MemoryCheck, Bf16BoundaryCountsTheOperandCopies) {
  const TrainConfig c = Demo({"--precision=bf16"});
  auto dims = ResolveModelConfig(c.model());
  ASSERT_TRUE(dims.ok());
  for (const Bf16OperandCopies& ops : {CopiesOf(Bf16GemmLibrary::kOneDnn), CopiesOf(Bf16GemmLibrary::kRoundedSgemm)}) {
    SCOPED_TRACE(ops.name());
    const MemoryPlan m = EstimateTrainingMemory(*dims, c.data().batch_size(), c.data().seq_len(), 0, 0,
                                                false, true, ops);
    ASSERT_GT(m.bf16_operand_copies, 0);
    EXPECT_TRUE(CheckMemoryFits(c, *dims, MemoryUse::kTraining, 1, 1, m.total, ops).ok());
    EXPECT_EQ(CheckMemoryFits(c, *dims, MemoryUse::kTraining, 1, 1, m.total - 1, ops).code(),
              absl::StatusCode::kResourceExhausted);
  }
  const int64_t half = EstimateTrainingMemory(*dims, c.data().batch_size(), c.data().seq_len(), 0, 0, false, true,
                                              CopiesOf(Bf16GemmLibrary::kOneDnn))
                           .total;
  EXPECT_FALSE(
      CheckMemoryFits(c, *dims, MemoryUse::kTraining, 1, 1, half, CopiesOf(Bf16GemmLibrary::kRoundedSgemm)).ok());
}

TEST(MemoryCheck, ProbeSizesAreRefusedNamingTheField) {
  struct Case { std::vector<std::string> overrides; const char* field; };
  const Case cases[] = {
      {{"--model.hidden_size=2000000000", "--model.num_heads=8", "--model.num_kv_heads=4"}, "model.hidden_size 2000000000"},
      {{"--model.hidden_size=1048576"}, "model.hidden_size 1048576"},
      {{"--model.vocab_size=2000000000"}, "model.vocab_size 2000000000"},
      {{"--model.ffn_hidden_size=2000000000"}, "model.ffn_hidden_size 2000000000"},
      {{"--model.num_layers=65536"}, "model.num_layers 65536"},  // more is refused by the loader
      {{"--data.batch_size=65536"}, "data.batch_size 65536"},
  };
  for (const Case& k : cases) {
    const absl::Status st = Check(Demo(k.overrides), MemoryUse::kTraining, 64 * kGiB);
    EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted) << k.field;
    EXPECT_THAT(std::string(st.message()), HasSubstr(k.field));
    EXPECT_THAT(std::string(st.message()), HasSubstr("64.00 GiB available"));
  }
  // What to change follows the larger part.
  EXPECT_THAT(std::string(Check(Demo({"--data.batch_size=65536"}), MemoryUse::kTraining, 64 * kGiB).message()),
              HasSubstr("; lower data.batch_size"));
  EXPECT_THAT(std::string(Check(Demo({"--model.vocab_size=2000000000"}), MemoryUse::kTraining, 64 * kGiB).message()),
              HasSubstr("; make the model smaller"));
}

TEST(MemoryCheck, CheckpointTooLargeForTheMachineIsAnErrorNotAnAbort) {
  const std::string dir = ::testing::TempDir() + "/huge_ckpt";
  std::filesystem::create_directories(dir);
  TrainConfig c = Demo({"--model.hidden_size=1000000000"});
  std::ofstream(dir + "/" + kTrainConfigFile) << ToTextProto(c);
  auto loaded = LoadCheckpointForEval(dir, "", CheckpointData::kSkip);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kResourceExhausted) << loaded.status();
  EXPECT_THAT(std::string(loaded.status().message()), HasSubstr("loading the model needs"));
  EXPECT_THAT(std::string(loaded.status().message()), HasSubstr("model.hidden_size 1000000000"));
}

TEST(MemoryCheck, CliTrainRefusesHugeBatchWithoutAborting) {
  const auto r = testing::RunCommand("timeout 60 " + testing::LongctxBinary() + " train --config " +
                                     testing::SourcePath("configs/demo.textproto") + " --data.batch_size=65536" +
                                     " --out_dir=" + ::testing::TempDir() + "/huge_batch 2>&1");
  EXPECT_EQ(r.exit_code, 1) << r.output;  // not 134 (SIGABRT) or the timeout
  EXPECT_THAT(r.output, HasSubstr("memory: training needs"));
}

}  // namespace
}  // namespace longctx
