// Why: bf16 matmul precision is only useful if training still learns the same
// way. This trains the tiny test model for 20 AdamW steps on a learnable
// batch (a repeating token pattern, so the loss falls far from ln 260) once at
// fp32 and once at bf16 precision from the same init, and requires the two
// loss curves to agree within a few per cent at every step, while not being
// identical (bf16 rounding really ran). The trainer path (`--precision=bf16`
// through the CLI) is covered by a short `longctx train` run.
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/backend.h"
#include "kernels/cpu/cpu_backend.h"
#include "model/config.h"
#include "model/transformer.h"
#include "optim/adamw.h"
#include "tests/support/test_util.h"
#include "train/config_loader.h"
#include "train/device_batch.h"
#include "train/setup/backend_for_config.h"
#include "train/setup/config_options.h"
#include "train/trainer.h"

namespace longctx {
namespace {

using ::longctx::testing::LongctxBinary;
using ::longctx::testing::RunCommand;
using ::longctx::testing::SourcePath;
using ::longctx::testing::TempDir;

// Rows of a period-7 pattern offset per row: next-token prediction is easy to
// learn but not instant.
PackedBatch PatternBatch(int32_t batch, int32_t seq_len) {
  PackedBatch b;
  b.batch_size = batch;
  b.seq_len = seq_len;
  for (int32_t r = 0; r < batch; ++r) {
    for (int32_t t = 0; t < seq_len; ++t) {
      b.inputs.push_back(40 + (r * 3 + t) % 7 * 5);
      b.targets.push_back(40 + (r * 3 + t + 1) % 7 * 5);
      b.positions.push_back(t);
    }
  }
  for (int32_t r = 0; r <= batch; ++r) b.cu_seqlens.push_back(r * seq_len);
  b.max_seqlen = seq_len;
  b.num_target_tokens = static_cast<int64_t>(batch) * seq_len;
  return b;
}

std::vector<double> TrainLosses(MatmulPrecision precision, int steps) {
  absl::StatusOr<TrainConfig> config = LoadTrainConfig(SourcePath("configs/tiny-test.textproto"), {});
  EXPECT_TRUE(config.ok()) << config.status();
  absl::StatusOr<ModelDims> dims = ResolveModelConfig(config->model());
  EXPECT_TRUE(dims.ok()) << dims.status();
  std::unique_ptr<Backend> backend = MakeCpuBackend();
  EXPECT_TRUE(backend->SetMatmulPrecision(precision).ok());
  Transformer model(*dims, backend.get(), DType::kF32);
  model.InitParams(7);
  AdamWSettings s;
  s.weight_decay = 0.1;
  AdamW opt(&model.layout(), backend.get(), DType::kF32, s);
  const PackedBatch batch = PatternBatch(4, 32);
  DeviceBatch device(backend.get());
  const BatchTensors t = device.Upload(batch);
  std::vector<double> losses;
  for (int i = 0; i < steps; ++i) {
    model.grads().Zero();
    const double n = static_cast<double>(batch.num_target_tokens);
    losses.push_back(model.ForwardBackward(t, 1.0 / n, /*backward=*/true) / n);
    opt.Step(model.params(), model.grads(), 3e-3);
  }
  return losses;
}

TEST(Bf16TrainingTest, LossCurvesAgreeWithFp32) {
  const int steps = 20;
  const std::vector<double> fp32 = TrainLosses(MatmulPrecision::kF32, steps);
  const std::vector<double> bf16 = TrainLosses(MatmulPrecision::kBF16, steps);
  double worst = 0;
  bool identical = true;
  for (int i = 0; i < steps; ++i) {
    const double rel = std::fabs(bf16[i] - fp32[i]) / fp32[i];
    worst = std::max(worst, rel);
    identical = identical && bf16[i] == fp32[i];
    EXPECT_LT(rel, 0.03) << "step " << i << ": fp32 " << fp32[i] << " bf16 " << bf16[i];
  }
  std::printf("loss fp32 %.4f -> %.4f, bf16 %.4f -> %.4f, worst relative gap %.4f\n", fp32.front(), fp32.back(),
              bf16.front(), bf16.back(), worst);
  EXPECT_LT(fp32.back(), 0.6 * fp32.front()) << "the model did not learn; the comparison would be vacuous";
  EXPECT_FALSE(identical) << "bf16 losses are bit-identical to fp32: rounding did not happen";
}

TEST(Bf16TrainingTest, TrainCommandAcceptsPrecision) {
  TempDir dir;
  testing::WriteTextCorpus(dir / "corpus", 40, 3);
  auto r = RunCommand(absl::StrCat(LongctxBinary(), " data build --inputs ", dir / "corpus", " --out ",
                                   dir / "c.ltok"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = RunCommand(absl::StrCat(LongctxBinary(), " train --config ", SourcePath("configs/tiny-test.textproto"),
                              " --data.path=", dir / "c.ltok", " --out_dir=", dir / "run",
                              " --steps=3 --threads=1 --precision=bf16"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = RunCommand(absl::StrCat(LongctxBinary(), " train --config ", SourcePath("configs/tiny-test.textproto"),
                              " --data.path=", dir / "c.ltok", " --out_dir=", dir / "run2", " --precision=fp16"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("precision"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace longctx
