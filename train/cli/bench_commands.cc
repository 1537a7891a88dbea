// Why: `longctx bench` and `longctx bench attention` (train/bench/) own their
// flags here. Both take a TrainConfig with overrides (`--threads`, `--precision`
// are TrainConfig fields; bench's `--steps` is its own timed-step count, not
// TrainConfig.steps). Their entry functions read their own flags as `name=value`
// entries ahead of the overrides (RunBenchCommand's TakeBenchFlags), so each
// flag given here is handed on in that form; one not given keeps the entry
// function's default, which is what the help shows.
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "train/bench/bench.h"
#include "train/cli/command_table.h"

namespace longctx::cli {
namespace {

// Flags whose values the entry function parses and checks itself.
struct PassThroughFlags {
  std::string config;
  std::deque<std::pair<std::string, std::string>> values;  // (name, value) of the i-th flag; a deque keeps them in place
  std::vector<CLI::Option*> options;

  void Add(CLI::App* app, const std::string& name, const std::string& default_text, const std::string& help) {
    values.emplace_back(name, "");
    options.push_back(app->add_option("--" + name, values.back().second, help)->default_str(default_text));
  }
  // The given flags as `name=value`, then the TrainConfig overrides.
  std::vector<std::string> Entries(const std::vector<std::string>& overrides) const {
    std::vector<std::string> out;
    for (size_t i = 0; i < options.size(); ++i)
      if (options[i]->count() > 0) out.push_back(values[i].first + "=" + values[i].second);
    out.insert(out.end(), overrides.begin(), overrides.end());
    return out;
  }
};

void AddBench(CommandTable& table) {
  auto f = std::make_shared<PassThroughFlags>();
  CLI::App* c = table.Add(
      {.path = "bench",
       .summary = "Median full training step of a config: tokens/s, GFLOP/s, fraction of the sgemm peak",
       .notes = "--threads=N and --precision=bf16 are TrainConfig fields; any other --section.field=value\n"
                "changes the config. --peer=pytorch needs python3-torch (scripts/setup_bench.sh).",
       .config_overrides = true,
       .run = [f](const std::vector<std::string>& o) { return RunBenchCommand(f->config, f->Entries(o)); }});
  c->add_option("--config", f->config, "text-format TrainConfig (configs/*.textproto)");
  f->Add(c, "steps", "10", "timed steps (the median is reported)");
  f->Add(c, "warmup", "2", "untimed steps first");
  f->Add(c, "peer", "", "'pytorch': run the same model in PyTorch in this invocation");
  f->Add(c, "peer_steps", "0", "the peer's timed steps (0 = --steps)");
  f->Add(c, "peer_warmup", "-1", "the peer's warm-up steps (-1 = --warmup)");
  f->Add(c, "python", "/usr/bin/python3", "the peer's Python interpreter");
  f->Add(c, "peer_script", "", "the peer's script (default: bench/torch_reference.py, from share/longctx/bench of an installed longctx)");
  f->Add(c, "bf16_gemm", "auto", "bf16 matrix products: auto, sgemm or onednn");
  f->Add(c, "sgemm", "auto", "fp32 matrix products: auto, onednn or openblas");
  f->Add(c, "profile", "false", "true: time every backend op of the timed steps");
}

void AddBenchAttention(CommandTable& table) {
  auto f = std::make_shared<PassThroughFlags>();
  CLI::App* c = table.Add(
      {.path = "bench attention",
       .summary = "One attention layer's forward + backward and one transformer layer's step over lengths",
       .notes = "The config gives the shape (heads, kv heads, head dim); --section.field=value changes it.",
       .config_overrides = true,
       .run = [f](const std::vector<std::string>& o) { return RunBenchAttentionCommand(f->config, f->Entries(o)); }});
  c->add_option("--config", f->config, "text-format TrainConfig (configs/*.textproto)");
  f->Add(c, "lengths", "2048,4096,8192,16384,32768", "sequence lengths L, comma-separated");
  f->Add(c, "window", "1024", "sliding window of the swa kind");
  f->Add(c, "kinds", "swa", "attention kinds: swa, full (comma-separated)");
  f->Add(c, "repeats", "3", "timed repeats per length at least (median)");
  f->Add(c, "min_seconds", "1",
         "attention: more repeats until the timed ones add up to this many seconds (0: --repeats only)");
  f->Add(c, "max_full_len", "32768", "longest L timed for the full kind");
  f->Add(c, "layer", "true", "false: time the attention op only, not the 1-layer model step");
  f->Add(c, "documents", "", "cut each L into documents in these proportions, e.g. 8,4,2,2 (default: one)");
  f->Add(c, "key_parts", "0", "backward key parts per item, 1-8 (CPU; 0: chosen for the threads)");
  f->Add(c, "attention_isa", "auto",
         "CPU attention tiles: auto, avx512, avx2 (fp32 tiles, as an AVX2-only CPU runs them) or scalar");
  f->Add(c, "attention_amx", "true",
         "false: bf16 attention on AVX512-BF16 dot products (vdpbf16ps) even where the CPU has AMX");
  f->Add(c, "row_peaks", "true",
         "measure the GEMM peak of the run's precision after every row too (CPU), and flag rows timed in a slow "
         "phase of the machine");
}

}  // namespace

void RegisterBenchCommands(CommandTable& table) {
  AddBench(table);
  AddBenchAttention(table);
}

}  // namespace longctx::cli
