// Why: `longctx plot` registers from its own file (plot_commands.cc); main.cc
// includes this to list it.
#ifndef LONGCTX_TRAIN_CLI_PLOT_COMMANDS_H_
#define LONGCTX_TRAIN_CLI_PLOT_COMMANDS_H_

#include "train/cli/command_table.h"

namespace longctx::cli {

void RegisterPlotCommands(CommandTable& table);  // plot --run DIR

}  // namespace longctx::cli

#endif  // LONGCTX_TRAIN_CLI_PLOT_COMMANDS_H_
