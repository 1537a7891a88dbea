// Why: the `longctx` entry point: parse flags, split off config overrides
// (any --name=value that is not a declared flag is a TrainConfig field path),
// dispatch to a subcommand in commands.cc.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_split.h"
#include "train/commands.h"

ABSL_FLAG(std::string, config, "", "train/plan: text-format TrainConfig (configs/*.textproto)");
ABSL_FLAG(std::string, checkpoint, "", "eval: checkpoint directory (runs/NAME/step-NNNNNNNN)");
ABSL_FLAG(std::string, data, "", "eval: token file (default: the checkpoint's data.path)");
ABSL_FLAG(std::string, batch, "eval", "eval: 'eval' (eval split) or 'last_train' (the last training batch)");
ABSL_FLAG(int, eval_batches, 0, "eval: batches of the eval split (0 = the config's eval_batches)");
ABSL_FLAG(bool, json, false, "plan: print JSON instead of a table");
ABSL_FLAG(std::vector<std::string>, inputs, {}, "data build: text files or directories, comma-separated");
ABSL_FLAG(std::string, out, "", "data build: token file to write");
ABSL_FLAG(std::string, tokenizer, "byte", "data build: tokenizer");
ABSL_FLAG(bool, split_blank_lines, false, "data build: split files into documents at 2+ blank lines");
ABSL_FLAG(int64_t, max_doc_bytes, 0, "data build: cut documents longer than this (0 = never)");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "longctx <train|eval|plan|data build> [flags]\n"
      "  longctx train --config configs/demo.textproto [--steps=100 --model.hidden_size=128 ...]\n"
      "  longctx eval --checkpoint runs/demo/step-00000300 [--data FILE] [--batch=last_train]\n"
      "  longctx plan --config configs/tinyllama-1.1b.textproto [--json]\n"
      "  longctx data build --inputs DIR,FILE --out corpus.ltok [--tokenizer byte]");
  std::vector<char*> flag_args;
  std::vector<std::string> overrides;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if (i > 0 && a.rfind("--", 0) == 0 && a.find('=') != std::string::npos) {
      std::string name = a.substr(2, a.find('=') - 2);
      if (absl::FindCommandLineFlag(name) == nullptr) {
        overrides.push_back(a.substr(2));
        continue;
      }
    }
    flag_args.push_back(argv[i]);
  }
  std::vector<char*> pos = absl::ParseCommandLine(static_cast<int>(flag_args.size()), flag_args.data());
  const std::string cmd = pos.size() > 1 ? pos[1] : "";
  if (cmd == "train") return longctx::RunTrainCommand(absl::GetFlag(FLAGS_config), overrides);
  if (!overrides.empty() && cmd != "plan") {
    std::fprintf(stderr, "longctx: error: unknown flag --%s\n", overrides[0].c_str());
    return 1;
  }
  if (cmd == "plan") return longctx::RunPlanCommand(absl::GetFlag(FLAGS_config), overrides, absl::GetFlag(FLAGS_json));
  if (cmd == "eval")
    return longctx::RunEvalCommand(absl::GetFlag(FLAGS_checkpoint), absl::GetFlag(FLAGS_data),
                                   absl::GetFlag(FLAGS_batch), absl::GetFlag(FLAGS_eval_batches));
  if (cmd == "data" && pos.size() > 2 && std::string(pos[2]) == "build")
    return longctx::RunDataBuildCommand(absl::GetFlag(FLAGS_inputs), absl::GetFlag(FLAGS_out),
                                        absl::GetFlag(FLAGS_tokenizer), absl::GetFlag(FLAGS_split_blank_lines),
                                        absl::GetFlag(FLAGS_max_doc_bytes));
  std::fprintf(stderr, "%s\n", absl::ProgramUsageMessage());
  return cmd.empty() ? 1 : 2;
}
