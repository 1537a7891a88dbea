// Why: `longctx train` and `longctx plan` — the two commands that read a
// TrainConfig (train/config_loader.h) and take `--section.field=value`
// overrides: train runs it, plan sizes it without allocating it. Each body
// sits beside the flags it is registered with (command_table.h); `--seed`,
// `--threads`, `--steps` here are TrainConfig fields. RegisterModelCommands
// lists the model commands in the order `longctx --help` has always shown
// them, with eval, generate and probe from eval_commands.cc.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "base/command_status.h"
#include "kernels/backend_registry.h"
#include "launch/communicator.h"
#include "model/config.h"
#include "model/context_plan.h"
#include "model/plan.h"
#include "train/cli/checkpoint_commands.h"
#include "train/cli/command_table.h"
#include "train/config_loader.h"
#include "train/preemption.h"
#include "train/setup/backend_for_config.h"
#include "train/setup/sft_config.h"
#include "train/trainer.h"

namespace longctx::cli {
namespace {

// `longctx train --config FILE [--section.field=value ...]`
int RunTrainCommand(const std::string& config_path, const std::vector<std::string>& overrides) {
  absl::StatusOr<TrainConfig> config = LoadTrainConfig(config_path, overrides);
  if (!config.ok()) return FailCommand(config.status());
  // Under mpirun/srun a world of ranks (launch/communicator.h), else one process
  // as always. With peers, an error on any rank ends the whole job (AbortJob)
  // so no rank waits forever in a collective. The cuda backend's gradients
  // and shards live in device memory: its ranks talk over NCCL (host scalars
  // still over MPI), the cpu backend's over MPI.
  absl::StatusOr<BackendInfo> backend = FindBackend(config->backend());
  if (!backend.ok()) return FailCommand(backend.status());
  absl::StatusOr<std::unique_ptr<Communicator>> comm = MakeCommunicator(backend->device);
  if (!comm.ok()) return FailCommand(comm.status());
  const bool multi = (*comm)->world_size() > 1;
  const int rank = (*comm)->rank();
  auto fail = [multi](const absl::Status& st) {
    if (multi) AbortJob(st);
    return FailCommand(st);
  };
  absl::StatusOr<std::unique_ptr<Trainer>> trainer = Trainer::Create(*config, std::move(*comm));
  if (!trainer.ok()) return fail(trainer.status());
  absl::StatusOr<TrainSummary> s = (*trainer)->Run();
  if (!s.ok()) return fail(s.status());
  // Stopped by SIGTERM/SIGUSR1 with its checkpoint written: a distinct code (train/preemption.h).
  const int code = (*trainer)->preempted_signal() != 0 ? kPreemptedExitCode : 0;
  if (rank != 0) return code;
  // Not measured (a preempted run has no final eval): null, not 0.
  auto measured = [](const auto& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
  nlohmann::json j = {{"start_step", s->start_step},
                      {"final_step", s->final_step},
                      {"first_loss", measured(s->first_loss)},
                      {"last_loss", measured(s->last_loss)},
                      {"final_batch_loss", measured(s->final_batch_loss)},
                      {"eval_loss", measured(s->eval_loss)},
                      {"eval_tokens", measured(s->eval_tokens)},
                      {"tokens_per_s", measured(s->tokens_per_second)},
                      {"checkpoint", s->checkpoint}};
  std::printf("%s\n", j.dump().c_str());
  return code;
}

void AddTrain(CommandTable& table) {
  auto config = std::make_shared<std::string>();
  CLI::App* c = table.Add(
      {.path = "train",
       .summary = "Train a model from a TrainConfig (resumes from the newest checkpoint in out_dir)",
       .notes = "Any field of train/train.proto or model/config.proto is a flag: --steps=100 (or --steps 100),\n"
                "--model.hidden_size=128, --optim.lr=1e-3, --seed=5, --threads=2, --init_from=DIR.",
       .config_overrides = true,
       .run = [config](const std::vector<std::string>& o) { return RunTrainCommand(*config, o); }});
  c->add_option("--config", *config, "text-format TrainConfig (configs/*.textproto)");
}

// `longctx plan --config FILE [--section.field=value ...] [--json]`
// world > 0 adds the per-rank memory of `mode` ("" = the config's mode) on
// world ranks and, with rank_memory_gb > 0, whether it fits (model/plan.h).
// cp > 1 splits every row over cp ranks of the world (context parallelism,
// model/context_plan.h): per-rank activations, bytes per layer kind, fit.
int RunPlanCommand(const std::string& config_path, const std::vector<std::string>& overrides, bool json,
                   int world, const std::string& mode, double rank_memory_gb, int cp) {
  absl::StatusOr<TrainConfig> config = LoadTrainConfig(config_path, overrides);
  if (!config.ok()) return FailCommand(config.status());
  absl::StatusOr<ModelDims> dims = ResolveModelConfig(config->model());
  if (!dims.ok()) return FailCommand(dims.status());
  if (cp < 1) return FailCommand(absl::InvalidArgumentError(absl::StrCat("--cp ", cp, ": must be >= 1")));
  if (cp > 1 && world == 0) world = cp;
  if (world > 0 && world % cp != 0)
    return FailCommand(absl::InvalidArgumentError(
        absl::StrCat("--cp ", cp, " must divide --world ", world, " (world = data-parallel x context-parallel ranks)")));
  PlanOptions o;
  o.batch = config->data().batch_size();
  o.seq_len = config->data().seq_len();
  o.grad_accum = config->grad_accum();
  o.recompute_every = config->model().recompute_every();
  absl::StatusOr<bool> bf16_activations = ResolveBf16Activations(config->model(), config->precision() == BF16);
  if (!bf16_activations.ok()) return FailCommand(bf16_activations.status());
  o.bf16_activations = *bf16_activations;
  o.bf16_products = config->precision() == BF16;
  o.bf16_operands = Bf16OperandsFor(*config);
  // SFT (data.sft): the schedule's micro-batch with the largest activations (train/setup/sft_config.h).
  if (IsSftConfig(*config)) {
    int64_t best = -1;
    for (const MicroBatchShape& m : TrainingMicroBatchShapes(*config, std::max(1, world / cp))) {
      const int64_t a = EstimateTrainingMemory(*dims, m.batch, m.seq_len, o.logits_chunk_tokens, o.recompute_every,
                                                   o.bf16_activations, o.bf16_products, o.bf16_operands)
                            .activations;
      if (a > best) best = a, o.batch = m.batch, o.seq_len = m.seq_len;
    }
    if (!json)
      std::printf("SFT (data.sft): planned for the schedule's largest micro-batch, %lld x %lld tokens\n",
                  static_cast<long long>(o.batch), static_cast<long long>(o.seq_len));
  }
  Plan plan = MakePlan(*dims, o);
  std::optional<RankMemoryPlan> ranks;
  std::optional<ContextParallelPlan> context;
  if (world > 0) {
    DataParallelMode m = config->mode() == ZERO1  ? DataParallelMode::kZero1
                         : config->mode() == FSDP ? DataParallelMode::kFsdp
                                                  : DataParallelMode::kDdp;
    if (!mode.empty() && !ParseParallelMode(mode, &m))
      return FailCommand(absl::InvalidArgumentError("--mode: '" + mode + "' is not ddp, zero1 or fsdp"));
    const int64_t budget = static_cast<int64_t>(rank_memory_gb * 1024.0 * 1024.0 * 1024.0);
    if (cp > 1) {
      absl::StatusOr<ContextParallelPlan> c = PlanContextParallel(plan, cp, m, world, config->fsdp_reshard_after_forward(),
                                                                  budget, config->grad_sum_fp64());
      if (!c.ok()) return FailCommand(c.status());
      context = std::move(*c);
    } else {
      ranks = PlanRankMemory(plan, m, world, config->fsdp_reshard_after_forward(), budget, config->grad_sum_fp64());
    }
  }
  if (json) {
    nlohmann::json j = PlanToJson(plan);
    if (ranks) j["per_rank"] = RankMemoryToJson(*ranks);
    if (context) j["context_parallel"] = ContextParallelPlanToJson(*context);
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("%s", FormatPlan(plan).c_str());
    if (ranks) std::printf("\n%s", FormatRankMemory(*ranks).c_str());
    if (context) std::printf("\n%s", FormatContextParallelPlan(*context).c_str());
  }
  return 0;
}

void AddPlan(CommandTable& table) {
  struct Args {
    std::string config;
    bool json = false;
    int world = 0;
    std::string mode;
    double rank_memory_gb = 0;
    int cp = 1;
  };
  auto a = std::make_shared<Args>();
  CLI::App* c = table.Add(
      {.path = "plan",
       .summary = "Parameter counts, FLOPs per token and training memory of a config, without allocating it",
       .config_overrides = true,
       .run = [a](const std::vector<std::string>& o) {
         return RunPlanCommand(a->config, o, a->json, a->world, a->mode, a->rank_memory_gb, a->cp);
       }});
  c->add_option("--config", a->config, "text-format TrainConfig (configs/*.textproto)");
  c->add_flag("--json", a->json, "print JSON instead of a table");
  c->add_option("--world", a->world, "ranks: add the per-rank memory of --mode (0 = no per-rank section)")
      ->check(CLI::NonNegativeNumber);
  c->add_option("--mode", a->mode, "ddp, zero1 or fsdp (default: the config's mode)");
  c->add_option("--rank_memory_gb", a->rank_memory_gb, "memory per rank in GiB: say whether the plan fits")
      ->check(CLI::NonNegativeNumber);
  c->add_option("--cp", a->cp,
                "context-parallel ranks per row (divides --world; 2 x cp divides seq_len): per-rank activations and "
                "bytes per layer kind (planned only: the trainer does not split rows yet)")
      ->check(CLI::PositiveNumber);
}

}  // namespace

void RegisterModelCommands(CommandTable& table) {
  AddTrain(table);
  RegisterEvalCommands(table);  // eval, generate, probe (train/cli/eval_commands.cc)
  AddPlan(table);
  RegisterCheckpointCommands(table);  // checkpoint consolidate (train/cli/checkpoint_commands.cc)
}

}  // namespace longctx::cli
