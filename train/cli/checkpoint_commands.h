// Why: `longctx checkpoint consolidate` is its own small group; the model
// commands' registration calls this so main.cc's list stays as it is.
#ifndef LONGCTX_TRAIN_CLI_CHECKPOINT_COMMANDS_H_
#define LONGCTX_TRAIN_CLI_CHECKPOINT_COMMANDS_H_

#include "train/cli/command_table.h"

namespace longctx::cli {

void RegisterCheckpointCommands(CommandTable& table);  // checkpoint consolidate

}  // namespace longctx::cli

#endif  // LONGCTX_TRAIN_CLI_CHECKPOINT_COMMANDS_H_
