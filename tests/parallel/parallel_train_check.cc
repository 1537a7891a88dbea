// Why: DDP, ZeRO-1 and FSDP are only tested by running several ranks, so this
// program is launched by ctest under mpirun (tests/parallel/CMakeLists.txt).
// It trains configs/demo.textproto's model (layers/steps/rows overridable to
// keep CI short) on a deterministic byte corpus (or --data=FILE.ltok) with a fixed global batch of
// `--global_micro` micro-batches per step (grad_accum = global_micro / world),
// through the same pieces the trainer uses (Packer, Transformer,
// ParallelStrategy), and prints one line per step on rank 0:
//   step S loss L grad_norm G hash H
// In DDP every rank hashes its parameters after every step and the job aborts
// unless all hashes are equal. compare_runs.sh compares the loss columns of
// runs with 1, 2 and 4 ranks. --fail_rank R --fail_step S makes rank R find a
// bad token id in its micro-batch at step S: it must end the whole job
// non-zero with its message (AbortJob), never hang.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kernels/backend.h"
#include "kernels/cpu/cpu_backend.h"
#include "launch/communicator.h"
#include "model/config.h"
#include "model/transformer.h"
#include "optim/lr_schedule.h"
#include "tests/support/abort_event.h"
#include "tests/support/test_util.h"
#include "train/config_loader.h"
#include "train/device_batch.h"
#include "train/parallel/collectives.h"
#include "train/parallel/parallel_strategy.h"
#include "train/parallel/rank_threads.h"
#include "train/setup/backend_for_config.h"
#include "train/setup/config_options.h"
#include "train/trainer.h"

namespace longctx {
namespace {

std::string Arg(int argc, char** argv, const std::string& name, const std::string& def) {
  const std::string p = "--" + name + "=";
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]).rfind(p, 0) == 0) return std::string(argv[i]).substr(p.size());
  return def;
}
int IntArg(int argc, char** argv, const std::string& name, int def) {
  int v = def;
  if (!absl::SimpleAtoi(Arg(argc, argv, name, std::to_string(def)), &v)) AbortJob(absl::InvalidArgumentError(name));
  return v;
}

void Check(const absl::Status& st) {
  if (!st.ok()) AbortJob(st);
}

int Main(int argc, char** argv) {
  absl::StatusOr<std::unique_ptr<Communicator>> comm_or = MakeCommunicator();
  Check(comm_or.status());
  Communicator& comm = **comm_or;
  const int world = comm.world_size(), rank = comm.rank();
  const std::string mode = Arg(argc, argv, "mode", "ddp");
  const int global_micro = IntArg(argc, argv, "global_micro", 4);
  const int fail_rank = IntArg(argc, argv, "fail_rank", -1), fail_step = IntArg(argc, argv, "fail_step", -1);
  if (global_micro % world != 0)
    AbortJob(absl::InvalidArgumentError(absl::StrCat("--global_micro ", global_micro, " is not a multiple of world ", world)));

  std::vector<std::string> overrides = {
      absl::StrCat("--mode=", mode == "zero1" ? "ZERO1" : mode == "fsdp" ? "FSDP" : "DDP"),
      absl::StrCat("--steps=", Arg(argc, argv, "steps", "50")),
      absl::StrCat("--model.num_layers=", Arg(argc, argv, "layers", "8")),
      absl::StrCat("--data.batch_size=", Arg(argc, argv, "batch_size", "8")),
      absl::StrCat("--data.seq_len=", Arg(argc, argv, "seq_len", "256")),
      absl::StrCat("--fsdp_reshard_after_forward=", Arg(argc, argv, "reshard", "true")),
      absl::StrCat("--grad_accum=", global_micro / world),
      absl::StrCat("--grad_sum_fp64=", Arg(argc, argv, "fp64", "true")),
      absl::StrCat("--precision=", Arg(argc, argv, "precision", "FP32")),
      absl::StrCat("--fsdp_gather_bf16=", Arg(argc, argv, "gather_bf16", "true"))};
  // --lr=X (a high rate makes the loss spike that amplifies summation-order
  // differences: the cheap ctest case of compare_runs.sh).
  if (const std::string lr = Arg(argc, argv, "lr", ""); !lr.empty()) overrides.push_back("--optim.lr=" + lr);
  // --threads=N per rank (0: cores / local ranks). Runs compared bit for bit
  // need the same count: a GEMM may round differently with another.
  overrides.push_back(absl::StrCat("--threads=", Arg(argc, argv, "threads", "0")));
  overrides.push_back("--force_threads=true");
  // Each rank writes the same deterministic corpus into its own directory,
  // unless --data names a token file (scripts/compare_parallel_demo.sh: the
  // demo corpus itself).
  testing::TempDir dir;
  std::string corpus = Arg(argc, argv, "data", "");
  if (corpus.empty()) {
    corpus = dir / "corpus.ltok";
    Check(testing::WriteByteTokenCorpus(dir / "text", corpus, 120, 3));
  }
  overrides.push_back("--data.path=" + corpus);
  // --config=FILE (default configs/demo.textproto; scripts/bench_parallel.sh: ref-b).
  const std::string config_path = Arg(argc, argv, "config", "");
  absl::StatusOr<TrainConfig> config =
      LoadTrainConfig(config_path.empty() ? testing::SourcePath("configs/demo.textproto") : config_path, overrides);
  Check(config.status());

  absl::StatusOr<RankThreads> threads = ChooseThreadsPerRank(config->threads(), comm.local_world_size(), 0, config->force_threads());
  Check(threads.status());
  if (rank == 0 && !threads->warning.empty()) std::fprintf(stderr, "%s\n", threads->warning.c_str());

  absl::StatusOr<ModelDims> dims = ResolveModelConfig(config->model());
  Check(dims.status());
  std::unique_ptr<Backend> be = MakeCpuBackend();
  Check(be->SetThreads(threads->threads));
  if (config->precision() == BF16) Check(be->SetMatmulPrecision(MatmulPrecision::kBF16));
  Transformer model(*dims, be.get(), DType::kF32);
  absl::StatusOr<std::unique_ptr<TokenDataset>> data = OpenTrainingData(*config);
  Check(data.status());
  absl::StatusOr<std::unique_ptr<Packer>> packer = MakeTrainPacker(*config, data->get());
  Check(packer.status());
  absl::StatusOr<std::unique_ptr<ParallelStrategy>> strategy = MakeParallelStrategy(*config, &model, &comm);
  Check(strategy.status());
  // The strategy initialises (FSDP: each rank only its shards; step 1's loss
  // then checks they are InitParams' values).
  Check((*strategy)->Setup(config->seed()));
  DeviceBatch device_batch(be.get());

  const int steps = config->steps();
  std::vector<PackedBatch> micro(global_micro);
  for (int step = 1; step <= steps; ++step) {
    int64_t target_tokens = 0;
    for (auto& b : micro) {
      absl::StatusOr<PackedBatch> n = (*packer)->Next();
      Check(n.status());
      b = std::move(*n);
      target_tokens += b.num_target_tokens;
    }
    (*strategy)->BeginStep();
    double loss_sum = 0;
    for (int i = rank; i < global_micro; i += world) {
      if (rank == fail_rank && step == fail_step) micro[i].inputs[3] = dims->vocab + 7;
      for (int32_t id : micro[i].inputs)
        if (id < 0 || id >= dims->vocab) {
          ::longctx::test::PrintAbortEvent();  // the moment expect_abort.sh measures from
          AbortJob(absl::InvalidArgumentError(absl::StrFormat(
              "step %d: micro-batch %d has token id %d outside the vocabulary [0, %d)", step, i, id, dims->vocab)));
        }
      (*strategy)->BeginMicroBatch();
      loss_sum += model.ForwardBackward(device_batch.Upload(micro[i]), 1.0 / static_cast<double>(target_tokens), true);
      (*strategy)->EndMicroBatch();
    }
    TakeCommSeconds();
    Check((*strategy)->FinishBackward());
    Check(comm.AllReduceSum(&loss_sum, 1));
    const double lr = WarmupCosineLr(step, config->optim().lr(), config->optim().min_lr(),
                                     config->optim().warmup_steps(), steps);
    absl::StatusOr<StepStats> stats = (*strategy)->OptimizerStep(lr);
    Check(stats.status());
    uint64_t hash = 0;
    if ((*strategy)->name() == std::string("DDP")) {
      hash = HashParameters(model);
      int64_t lo[2] = {static_cast<int64_t>(hash >> 32), static_cast<int64_t>(hash & 0xffffffffu)};
      int64_t hi[2] = {lo[0], lo[1]};
      Check(comm.AllReduceMin(lo, 2));
      Check(comm.AllReduceMax(hi, 2));
      if (lo[0] != hi[0] || lo[1] != hi[1])
        AbortJob(absl::InternalError(absl::StrFormat("DDP: parameters differ across ranks after step %d "
                                                     "(rank hash %016x)", step, hash)));
    }
    const double comm_s = TakeCommSeconds();  // the gradient sum and the update's collectives
    if (rank == 0)
      std::printf("step %d loss %.17g grad_norm %.17g hash %016llx comm_s %.4f\n", step, loss_sum / target_tokens,
                  stats->grad_norm, static_cast<unsigned long long>(hash), comm_s);
  }
  // --sync_repeats=N: the gradient sum of the last step again, N times, each
  // after a barrier (no rank waits for another inside it): the cost of the
  // collectives themselves, against the step's comm_s that includes waiting
  // (docs/BENCHMARKS.md, the overlap argument). DDP and ZeRO-1 only (FSDP
  // reduces inside the backward).
  const int sync_repeats = IntArg(argc, argv, "sync_repeats", 0);
  if (sync_repeats > 0 && (*strategy)->name() != std::string("FSDP")) {
    std::vector<double> t;
    for (int k = 0; k < sync_repeats; ++k) {
      Check(comm.Barrier());
      TakeCommSeconds();
      const auto t0 = std::chrono::steady_clock::now();
      Check((*strategy)->FinishBackward());
      t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(t.begin(), t.end());
    if (rank == 0)
      std::printf("sync_alone_s %.4f (median of %d, after a barrier)\n", t[t.size() / 2], sync_repeats);
  }
  if (rank == 0)
    std::printf("parallel_train_check: %s world %d: %d steps, %d threads per rank, grad_sum_fp64 %d, state %lld bytes "
                "on rank 0\n", (*strategy)->name(), world, steps, threads->threads, config->grad_sum_fp64() ? 1 : 0,
                static_cast<long long>((*strategy)->state_bytes()));
  std::fflush(stdout);
  return 0;
}

}  // namespace
}  // namespace longctx

int main(int argc, char** argv) { return longctx::Main(argc, argv); }
