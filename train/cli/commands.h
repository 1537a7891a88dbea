// Why: each `longctx` subcommand is one function taking its already-parsed
// flags; main.cc only dispatches. Each returns a process exit code and prints
// a one-line error (what and where) on failure.
#ifndef LONGCTX_TRAIN_COMMANDS_H_
#define LONGCTX_TRAIN_COMMANDS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "base/command_status.h"
#include "model/layer_attention.h"
#include "model/sampling.h"

namespace longctx {

// `longctx train --config FILE [--section.field=value ...]`
int RunTrainCommand(const std::string& config_path, const std::vector<std::string>& overrides);
// `longctx eval --checkpoint DIR --data FILE [--batch=eval|last_train] [--eval_batches N]
//  [--string [--string_s N] [--string_w N] [--string_rope_scale]]`: with STRING (s 0 = the run's
// data.seq_len / 3) the loss is the forward with STRING positions (Transformer::SetStringOptions).
int RunEvalCommand(const std::string& checkpoint, const std::string& data, const std::string& batch,
                   int eval_batches, const StringOptions& string = {});
// `longctx plan --config FILE [--section.field=value ...] [--json]`
// world > 0 adds the per-rank memory of `mode` ("" = the config's mode) on
// world ranks and, with rank_memory_gb > 0, whether it fits (model/plan.h).
int RunPlanCommand(const std::string& config_path, const std::vector<std::string>& overrides, bool json,
                   int world = 0, const std::string& mode = "", double rank_memory_gb = 0);
// `longctx data build --inputs A,B --out FILE [--tokenizer byte] [--split_blank_lines] [--max_doc_bytes N]`
int RunDataBuildCommand(const std::vector<std::string>& inputs, const std::string& out, const std::string& tokenizer,
                        bool split_blank_lines, int64_t max_doc_bytes);
// `longctx data encode --tokenizer byte|llama3|llama2|PATH`: reads text on stdin
// and prints the ids of each input line (without its '\n') on one output line,
// space-separated, no BOS/EOS.
int RunDataEncodeCommand(const std::string& tokenizer);
// `longctx data corpus --out DIR [--brown PKG_DIR] [--threads N]`: the default
// SlimPajama-layout corpus (data/corpus_builder.h); prints its summary JSON.
int RunDataCorpusCommand(const std::string& out, const std::string& brown_dir, int threads);
// `longctx data tokenize --input DIR,FILE --out DIR [--tokenizer T] [--threads N]
//  [--exclude_sets A,B] [--include_sets A,B] [--max_line_bytes N]`: one token
// file per shard plus manifest.json (data/tokenize_shards.h), resumable.
int RunDataTokenizeCommand(const std::vector<std::string>& inputs, const std::string& out,
                           const std::string& tokenizer, int threads, const std::vector<std::string>& exclude_sets,
                           const std::vector<std::string>& include_sets, int64_t max_line_bytes);
// `longctx data merge --input DIR,FILE --out FILE`: the documents of token files
// (a tokenize output directory in manifest order) into one token file.
int RunDataMergeCommand(const std::vector<std::string>& inputs, const std::string& out);
// `longctx analyze posfreq --data FILE --seq_len L [--rows N] [--min_pairs K] [--png OUT] [--json_out OUT]`:
// the STRING paper's Figure 1 position-frequency cases for a corpus (data/posfreq_analysis.h).
int RunAnalyzePosfreqCommand(const std::string& data, int64_t seq_len, int64_t rows, double min_pairs,
                             const std::string& png, const std::string& json_out);

// `longctx probe --checkpoint DIR [--min_len 128] [--max_len N] [--len_step 128] [--trials N]
//  [--needles 4] [--depth_bins 10] [--threshold 0.5] [--seed S] [--format paper|compact]
//  [--json_out F] [--png F] [--data FILE]`: the NIAH effective-length probe
// (train/probe/niah_probe.h) on a checkpoint, haystacks from the eval split of its data.
struct ProbeCommandArgs {
  std::string checkpoint, data, json_out, png;
  int64_t min_len = 128, max_len = 0, len_step = 128;  // max_len 0: 2 x the run's data.seq_len
  int trials = 10, needles = 4, depth_bins = 10;
  double threshold = 0.5;
  uint64_t seed = 1;
  std::string format = "paper";
  bool answer_loss_only = false;  // no decoding: answer losses per length only
  // STRING for the greedy decoding (s 0 = the run's data.seq_len / 3).
  StringOptions string;
};
int RunProbeCommand(const ProbeCommandArgs& args);

// `longctx generate --checkpoint DIR --prompt TEXT [--max_new_tokens 64] [--temperature 0] [--top_k 0]
//  [--seed 1] [--string [--string_s N] [--string_w N] [--string_rope_scale]] [--json]`: continues the
// prompt with the checkpoint's model and tokenizer (data.tokenizer) by KV-cache decoding
// (model/inference.h), stopping at max_new_tokens or the tokenizer's EOS, and prints the
// continuation (--json: one JSON line with the ids too). generate_command.cc.
struct GenerateCommandArgs {
  std::string checkpoint, prompt;
  int max_new_tokens = 64;
  SamplingOptions sampling;
  StringOptions string;  // s 0 = the run's data.seq_len / 3
  bool json = false;
};
int RunGenerateCommand(const GenerateCommandArgs& args);

}  // namespace longctx

#endif  // LONGCTX_TRAIN_COMMANDS_H_
