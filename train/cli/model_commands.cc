// Why: the commands that train a model or use a checkpoint — train, eval,
// generate, probe, plan — each with its own flags and help (command_table.h).
// Defaults are those of the Run*Command argument structs in commands.h, which
// are the flag defaults `longctx` has always had. train and plan take a
// TrainConfig: `--seed`, `--threads`, `--steps` there are TrainConfig fields;
// generate's and probe's `--seed` are their own sampling / trial seeds.
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "train/cli/checkpoint_commands.h"
#include "train/cli/command_table.h"
#include "train/cli/commands.h"

namespace longctx::cli {
namespace {

// --string, --string_s, --string_w, --string_rope_scale (eval, generate, probe).
void AddStringFlags(CLI::App* app, StringOptions* s) {
  app->add_flag("--string", s->enabled, "STRING positions (inference only; model/layer_attention.h)");
  app->add_option("--string_s", s->s, "STRING shift S (0 = the run's data.seq_len / 3)");
  app->add_option("--string_w", s->w, "STRING local window W (distance d >= S becomes d - S + W)");
  app->add_flag("--string_rope_scale", s->rope_scale, "STRING's RoPE table scale 1 + 0.1 ln 2");
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

void AddEval(CommandTable& table) {
  struct Args {
    std::string checkpoint, data, batch = "eval";
    int eval_batches = 0;
    StringOptions string;
  };
  auto a = std::make_shared<Args>();
  CLI::App* c = table.Add(
      {.path = "eval",
       .summary = "Mean loss of a checkpoint on the eval split or its last training batch (one JSON line)",
       .run = [a](const std::vector<std::string>&) {
         return RunEvalCommand(a->checkpoint, a->data, a->batch, a->eval_batches, a->string);
       }});
  c->add_option("--checkpoint", a->checkpoint, "checkpoint directory (runs/NAME/step-NNNNNNNN)");
  c->add_option("--data", a->data, "token file (default: the checkpoint's data.path)");
  c->add_option("--batch", a->batch, "'eval' (eval split) or 'last_train' (the last training batch)");
  c->add_option("--eval_batches", a->eval_batches, "batches of the eval split (0 = the config's eval_batches)");
  AddStringFlags(c, &a->string);
}

void AddGenerate(CommandTable& table) {
  auto a = std::make_shared<GenerateCommandArgs>();
  CLI::App* c = table.Add(
      {.path = "generate",
       .summary = "Continue a prompt with a checkpoint's model and tokenizer (KV-cache decoding)",
       .run = [a](const std::vector<std::string>&) { return RunGenerateCommand(*a); }});
  c->add_option("--checkpoint", a->checkpoint, "checkpoint directory");
  c->add_option("--prompt", a->prompt, "the text to continue");
  c->add_option("--max_new_tokens", a->max_new_tokens, "tokens to generate at most (stops early at EOS)");
  c->add_option("--temperature", a->sampling.temperature, "sampling temperature (0 = greedy)");
  c->add_option("--top_k", a->sampling.top_k, "sample among the k most likely tokens (0 = all)");
  c->add_option("--seed", a->sampling.seed, "sampling seed");
  AddStringFlags(c, &a->string);
  c->add_flag("--json", a->json, "one JSON line with the ids too");
}

void AddProbe(CommandTable& table) {
  auto a = std::make_shared<ProbeCommandArgs>();
  CLI::App* c = table.Add(
      {.path = "probe",
       .summary = "The NIAH effective-length probe of the STRING paper on a checkpoint",
       .notes = "Haystacks come from the eval split of the run's data; writes per-(length, depth) accuracy JSON\n"
                "(--json_out) and a heatmap (--png).",
       .run = [a](const std::vector<std::string>&) { return RunProbeCommand(*a); }});
  c->add_option("--checkpoint", a->checkpoint, "checkpoint directory");
  c->add_option("--data", a->data, "token file (default: the checkpoint's data.path)");
  c->add_option("--min_len", a->min_len, "shortest test length (prompt tokens)");
  c->add_option("--max_len", a->max_len, "longest test length (0 = 2 x the run's data.seq_len)");
  c->add_option("--len_step", a->len_step, "test length step");
  c->add_option("--trials", a->trials, "trials per length");
  c->add_option("--needles", a->needles, "needles per trial (a trial passes when at least half come back)");
  c->add_option("--depth_bins", a->depth_bins, "needle-depth bins of the heatmap");
  c->add_option("--threshold", a->threshold, "a length fails when its pass rate is below this");
  c->add_option("--seed", a->seed, "trial seed (the trainer's probe_seed defaults to 1 too)");
  c->add_option("--format", a->format, "needle format, paper or compact");
  c->add_flag("--answer_loss_only", a->answer_loss_only, "no decoding, only the answer loss per length");
  c->add_option("--json_out", a->json_out, "JSON report to write");
  c->add_option("--png", a->png, "heatmap PNG to write");
  AddStringFlags(c, &a->string);
}

void AddPlan(CommandTable& table) {
  struct Args {
    std::string config;
    bool json = false;
    int world = 0;
    std::string mode;
    double rank_memory_gb = 0;
  };
  auto a = std::make_shared<Args>();
  CLI::App* c = table.Add(
      {.path = "plan",
       .summary = "Parameter counts, FLOPs per token and training memory of a config, without allocating it",
       .config_overrides = true,
       .run = [a](const std::vector<std::string>& o) {
         return RunPlanCommand(a->config, o, a->json, a->world, a->mode, a->rank_memory_gb);
       }});
  c->add_option("--config", a->config, "text-format TrainConfig (configs/*.textproto)");
  c->add_flag("--json", a->json, "print JSON instead of a table");
  c->add_option("--world", a->world, "ranks: add the per-rank memory of --mode (0 = no per-rank section)")
      ->check(CLI::NonNegativeNumber);
  c->add_option("--mode", a->mode, "ddp, zero1 or fsdp (default: the config's mode)");
  c->add_option("--rank_memory_gb", a->rank_memory_gb, "memory per rank in GiB: say whether the plan fits")
      ->check(CLI::NonNegativeNumber);
}

}  // namespace

void RegisterModelCommands(CommandTable& table) {
  AddTrain(table);
  AddEval(table);
  AddGenerate(table);
  AddProbe(table);
  AddPlan(table);
  RegisterCheckpointCommands(table);  // checkpoint consolidate (train/cli/checkpoint_commands.cc)
}

}  // namespace longctx::cli
