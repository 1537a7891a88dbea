// Why: each `longctx` subcommand is one function taking its already-parsed
// flags; main.cc only dispatches. Each returns a process exit code and prints
// a one-line error (what and where) on failure.
#ifndef LONGCTX_TRAIN_COMMANDS_H_
#define LONGCTX_TRAIN_COMMANDS_H_

#include <cstdint>
#include <string>
#include <vector>

namespace longctx {

// `longctx train --config FILE [--section.field=value ...]`
int RunTrainCommand(const std::string& config_path, const std::vector<std::string>& overrides);
// `longctx eval --checkpoint DIR --data FILE [--batch=eval|last_train] [--eval_batches N]`
int RunEvalCommand(const std::string& checkpoint, const std::string& data, const std::string& batch,
                   int eval_batches);
// `longctx plan --config FILE [--section.field=value ...] [--json]`
int RunPlanCommand(const std::string& config_path, const std::vector<std::string>& overrides, bool json);
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

}  // namespace longctx

#endif  // LONGCTX_TRAIN_COMMANDS_H_
