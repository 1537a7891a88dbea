// Why: the `longctx` entry point. Each command owns its flags and help in the
// command table (command_table.h); the groups register here, in the order
// `longctx --help` lists them.
#include "train/cli/command_table.h"
#include "train/cli/plot_commands.h"
#include "train/cli/version_text.h"
#include "train/preemption.h"

int main(int argc, char** argv) {
  // Before any thread exists: SIGTERM/SIGUSR1 go to one watcher thread, never
  // into a compute thread (train/preemption.h says why).
  longctx::BlockPreemptionSignals();
  longctx::cli::CommandTable table;
  table.SetVersion(longctx::cli::VersionText);
  longctx::cli::RegisterModelCommands(table);
  longctx::cli::RegisterBenchCommands(table);
  longctx::cli::RegisterDataCommands(table);
  longctx::cli::RegisterAnalyzeCommands(table);
  longctx::cli::RegisterConvertCommands(table);
  longctx::cli::RegisterPlotCommands(table);
  return table.Main(argc, argv);
}
