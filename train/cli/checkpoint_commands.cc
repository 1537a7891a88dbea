// Why: a training checkpoint (weights, AdamW moments, trainer state, manifest)
// is more than a model; `checkpoint consolidate` verifies it against its
// manifest and writes the directory a model consumer needs: one HF-layout
// model.safetensors + config.json (+ the run's config and trainer state that
// eval, generate and probe read), assembling a ZeRO-1/FSDP checkpoint's
// per-rank shard files. See ConsolidateCheckpoint (checkpoint.h).
// `checkpoint verify` checks one is what a resume needs: structure, then every
// file against its manifest (the kill storm uses it; VerifyCheckpointFiles).
#include "train/cli/checkpoint_commands.h"

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "base/command_status.h"
#include "train/checkpoint/checkpoint.h"

namespace longctx::cli {

void RegisterCheckpointCommands(CommandTable& table) {
  table.Add({.path = "checkpoint", .summary = "checkpoint tools (consolidate)"});
  struct Args {
    std::string checkpoint, out;
  };
  auto a = std::make_shared<Args>();
  CLI::App* c = table.Add(
      {.path = "checkpoint consolidate",
       .summary = "verify a checkpoint and write one HF-layout model.safetensors + config.json to --out",
       .notes = "A sharded (ZeRO-1/FSDP) checkpoint's shard files are assembled into whole tensors.\n"
                "The output is what eval, generate and probe read (no optimizer state).\n"
                "  longctx checkpoint consolidate --checkpoint runs/x/step-00000300 --out runs/x/hf",
       .run = [a](const std::vector<std::string>&) {
         if (absl::Status st = ConsolidateCheckpoint(a->checkpoint, a->out); !st.ok()) return FailCommand(st);
         std::printf("consolidated %s into %s\n", a->checkpoint.c_str(), a->out.c_str());
         return 0;
       }});
  c->add_option("--checkpoint", a->checkpoint, "checkpoint directory (runs/NAME/step-NNNNNNNN)")->required();
  c->add_option("--out", a->out, "output directory (created; must not hold a model.safetensors)")->required();

  auto v = std::make_shared<std::string>();
  CLI::App* vc = table.Add(
      {.path = "checkpoint verify",
       .summary = "check a checkpoint is one resume can use: its structure, its files against its manifest (sizes, "
                  "XXH64) and its trainer state",
       .notes = "Checks what a resume relies on: a step directory's COMPLETE marker, manifest.json present, a sharded\n"
                "layout's world size, shard names and ranges (tiling every buffer, matching the tensors in each\n"
                "shard file), every file listed, and each file's size and XXH64.\n"
                "Exit 0 and one line when all hold; else the first problem, naming the directory and the file.",
       .run = [v](const std::vector<std::string>&) {
         if (absl::Status st = VerifyCheckpointFiles(*v); !st.ok()) return FailCommand(st);
         absl::StatusOr<nlohmann::json> state = LoadTrainerState(*v);
         if (!state.ok()) return FailCommand(state.status());
         std::printf("verified %s: step %lld\n", v->c_str(), static_cast<long long>((*state)["step"].get<int64_t>()));
         return 0;
       }});
  vc->add_option("--checkpoint", *v, "checkpoint directory")->required();
}

}  // namespace longctx::cli
