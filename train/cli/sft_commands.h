// Why: the SFT data command (`longctx data sft`) lives in its own file next to
// its run function; data_commands.cc registers it with one call.
#ifndef LONGCTX_TRAIN_CLI_SFT_COMMANDS_H_
#define LONGCTX_TRAIN_CLI_SFT_COMMANDS_H_

#include "train/cli/command_table.h"

namespace longctx::cli {

// `longctx data sft --input FILE|DIR,... --out DIR --tokenizer T`: SFT JSONL →
// DIR/sft.lsft (+ DIR/report.json with the read counts and every recorded bad
// line). `longctx data sft --dump FILE.lsft|DIR [--seq_len 512 --batch_size 2
// --rows 2]`: packs the first batch (no shuffle) and prints it decoded, the
// tokens that carry loss wrapped in ⟦ ⟧.
void AddDataSftCommand(CommandTable& table);

}  // namespace longctx::cli

#endif  // LONGCTX_TRAIN_CLI_SFT_COMMANDS_H_
