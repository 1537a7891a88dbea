// Why: every `longctx` command owns its flags and its help text. A command is
// one CommandSpec (its path, one-line summary, notes, whether it takes
// TrainConfig overrides, what to run) plus the options it declares on the
// CLI11 app Add returns; registrations live one file per group
// (train/cli/*_commands.cc) next to the Run*Command entry functions they call,
// and main.cc only lists the groups. The table parses the command line,
// reports a flag the command does not take or a stray argument as an error
// naming the command, and turns `--section.field=value` / `--section.field
// value` into checked TrainConfig overrides for the commands that take a config.
#ifndef LONGCTX_TRAIN_CLI_COMMAND_TABLE_H_
#define LONGCTX_TRAIN_CLI_COMMAND_TABLE_H_

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace CLI {
class App;
}  // namespace CLI

namespace longctx::cli {

struct CommandSpec {
  std::string path;     // "train", "data build", "bench attention"; a parent path is added first
  std::string summary;  // one line: the first line of `longctx CMD --help` and its row in `longctx --help`
  std::string notes;    // printed after the flags in `longctx CMD --help` (examples, details); may be empty
  // Takes `--section.field=value` (or `--section.field value`) TrainConfig overrides: any
  // argument that is not one of the command's own flags must name a TrainConfig field.
  bool config_overrides = false;
  // Runs the command once its flags are parsed; gets the overrides ("path=value", argv order;
  // empty unless config_overrides) and returns the exit status. Empty for a group of
  // subcommands (data, analyze), which only prints its list.
  std::function<int(const std::vector<std::string>& overrides)> run;
};

class CommandTable {
 public:
  CommandTable();
  ~CommandTable();
  CommandTable(const CommandTable&) = delete;
  CommandTable& operator=(const CommandTable&) = delete;

  // Adds a command and returns its CLI11 app, on which the command declares its options
  // (they must outlive the table: keep them in a shared_ptr the run function captures).
  CLI::App* Add(CommandSpec spec);

  // `longctx --version`: prints text() on stdout and exits 0 (main.cc passes
  // cli/version_text.h's VersionText).
  void SetVersion(std::function<std::string()> text);

  // Parses argv, runs the command, returns the process exit status: 0 after `--help` or `--version`;
  // 1 for a usage error (message on stderr: "longctx CMD: error: ..."), no command, or a
  // group without its subcommand; 2 for an unknown command.
  int Main(int argc, const char* const* argv);

 private:
  struct Entry {
    CommandSpec spec;
    CLI::App* app = nullptr;
  };
  const Entry* EntryOf(const CLI::App* app) const;
  std::string CommandList() const;
  absl::Status CollectOverrides(const Entry& e, const std::vector<std::string>& rest,
                                std::vector<std::string>* overrides) const;
  std::string UnknownFlagHint(const Entry& e, const std::string& name) const;
  int Fail(const std::string& path, const std::string& message) const;

  std::set<const CLI::App*> takes_overrides_;  // the formatter adds the override synopsis to their usage
  std::unique_ptr<CLI::App> root_;
  std::vector<Entry> entries_;
  std::map<std::string, size_t> by_path_;
};

// The registrations, one per group of commands (each in its own file).
void RegisterModelCommands(CommandTable& table);    // train, eval, generate, probe, plan, checkpoint
void RegisterEvalCommands(CommandTable& table);     // eval, generate, probe (RegisterModelCommands calls it)
void RegisterBenchCommands(CommandTable& table);    // bench, bench attention
void RegisterDataCommands(CommandTable& table);     // data build / encode / corpus / tokenize / merge
void RegisterAnalyzeCommands(CommandTable& table);  // analyze attention / posfreq
void RegisterConvertCommands(CommandTable& table);  // convert --to hf / --from hf

}  // namespace longctx::cli

#endif  // LONGCTX_TRAIN_CLI_COMMAND_TABLE_H_
