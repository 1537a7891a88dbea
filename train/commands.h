// Why: each `longctx` subcommand is one function taking its already-parsed
// flags; main.cc only dispatches. Each returns a process exit code and prints
// a one-line error (what and where) on failure.
#ifndef LONGCTX_TRAIN_COMMANDS_H_
#define LONGCTX_TRAIN_COMMANDS_H_

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

}  // namespace longctx

#endif  // LONGCTX_TRAIN_COMMANDS_H_
