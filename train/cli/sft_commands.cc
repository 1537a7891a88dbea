// Why: see sft_commands.h.
#include "train/cli/sft_commands.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "base/command_status.h"
#include "data/byte_tokenizer.h"
#include "data/chat_template.h"
#include "data/make_tokenizer.h"
#include "data/sft_jsonl.h"
#include "data/sft_packer.h"
#include "data/sft_token_file.h"
#include "data/tokenizer.h"

namespace longctx::cli {
namespace {

struct SftArgs {
  std::vector<std::string> input;
  std::string out, tokenizer = "byte", dump;
  int32_t seq_len = 512, batch_size = 2, rows = 2;
  bool split = false;
};

// A file, or DIR/sft.lsft.
std::string SftFilePath(const std::string& p) {
  return std::filesystem::is_directory(p) ? (std::filesystem::path(p) / "sft.lsft").string() : p;
}

int RunBuild(const SftArgs& a) {
  if (a.input.empty() || a.out.empty()) {
    return FailCommand(absl::InvalidArgumentError("data sft: --input and --out are required (or --dump FILE)"));
  }
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok = MakeTokenizer(a.tokenizer);
  if (!tok.ok()) return FailCommand(tok.status());
  absl::StatusOr<ChatTemplate> tmpl = ChatTemplate::ForTokenizer(tok->get());
  if (!tmpl.ok()) return FailCommand(tmpl.status());
  absl::StatusOr<std::vector<std::string>> files = SftInputFiles(a.input);
  if (!files.ok()) return FailCommand(files.status());
  SftDataset data((*tok)->vocab_size(), (*tok)->name());
  absl::StatusOr<SftReadStats> stats = ReadSftJsonl(*files, *tmpl, &data);
  if (!stats.ok()) return FailCommand(stats.status());
  std::error_code ec;
  std::filesystem::create_directories(a.out, ec);
  if (ec) return FailCommand(absl::InternalError(absl::StrCat(a.out, ": cannot create: ", ec.message())));
  const std::string path = (std::filesystem::path(a.out) / "sft.lsft").string();
  if (stats->examples == 0) {
    return FailCommand(absl::InvalidArgumentError(absl::StrCat("data sft: no good example in the input (",
                                                               stats->Summary(), ")")));
  }
  absl::Status st = data.Write(path);
  if (!st.ok()) return FailCommand(st);
  nlohmann::json report = {{"files", *files},
                           {"tokenizer", (*tok)->name()},
                           {"template", ChatTemplateKindName(tmpl->kind())},
                           {"content_trimmed", tmpl->trims_content()},
                           {"lines", stats->lines},
                           {"examples", stats->examples},
                           {"tokens", stats->tokens},
                           {"loss_tokens", stats->loss_tokens},
                           {"blank_lines", stats->blank_lines},
                           {"malformed_json", stats->malformed_json},
                           {"bad_example", stats->bad_example},
                           {"line_too_long", stats->line_too_long},
                           {"problems", stats->problems}};
  // The problems are valid UTF-8 (sft_jsonl.cc escapes bad bytes), but a file
  // name need not be: replace what is not, rather than throw (type_error.316)
  // and leave no report.
  const std::string report_path = (std::filesystem::path(a.out) / "report.json").string();
  std::ofstream report_file(report_path);
  report_file << report.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  report_file.close();
  if (!report_file) return FailCommand(absl::DataLossError(absl::StrCat(report_path, ": cannot write")));
  std::printf("%s -> %s\n", stats->Summary().c_str(), path.c_str());
  return 0;
}

int RunDump(const SftArgs& a) {
  absl::StatusOr<SftDataset> data = SftDataset::Read(SftFilePath(a.dump));
  if (!data.ok()) return FailCommand(data.status());
  std::unique_ptr<Tokenizer> tok;
  if (data->tokenizer_name() == "byte") {
    tok = std::make_unique<ByteTokenizer>(/*render_specials=*/true);
  } else {
    absl::StatusOr<std::unique_ptr<Tokenizer>> t = MakeTokenizer(data->tokenizer_name());
    if (!t.ok()) return FailCommand(t.status());
    tok = std::move(*t);
  }
  SftPackerOptions po;
  po.seq_len = a.seq_len;
  po.batch_size = a.batch_size;
  po.shuffle = false;
  po.pad_id = tok->pad_id();
  po.long_examples = a.split ? SftLongExamples::kSplit : SftLongExamples::kError;
  absl::StatusOr<SftPacker> packer = SftPacker::Create(&*data, po);
  if (!packer.ok()) return FailCommand(packer.status());
  absl::StatusOr<PackedBatch> batch = packer->Next();
  if (!batch.ok()) return FailCommand(batch.status());
  std::printf("%lld examples, %lld tokens (%lld with loss); first batch: %d rows × %d, %lld targets with loss\n",
              static_cast<long long>(data->n_examples()), static_cast<long long>(data->n_tokens()),
              static_cast<long long>(data->n_loss_tokens()), batch->batch_size, batch->seq_len,
              static_cast<long long>(batch->num_target_tokens));
  const std::string text = DumpPackedBatch(
      *batch, [&](const std::vector<int32_t>& ids) { return tok->Decode(ids); }, a.rows);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}

}  // namespace

void AddDataSftCommand(CommandTable& table) {
  auto a = std::make_shared<SftArgs>();
  CLI::App* c = table.Add(
      {.path = "data sft",
       .summary = "SFT JSONL (messages or prompt/response) -> DIR/sft.lsft with loss masks; --dump shows a packed batch",
       .notes = "Bad lines are logged as path:line, counted in DIR/report.json and skipped.\n"
                "Loss is on assistant tokens and their end-of-turn token only (data/chat_template.h).",
       .run = [a](const std::vector<std::string>&) { return a->dump.empty() ? RunBuild(*a) : RunDump(*a); }});
  c->add_option("--input", a->input, "SFT .jsonl files or directories of them")->delimiter(',');
  c->add_option("--out", a->out, "output directory (sft.lsft, report.json)");
  c->add_option("--tokenizer", a->tokenizer, "tokenizer: byte, llama3, llama2 or a tokenizer.json path");
  c->add_option("--dump", a->dump, "an .lsft file (or a data sft output directory) to pack and print");
  c->add_option("--seq_len", a->seq_len, "--dump: row length");
  c->add_option("--batch_size", a->batch_size, "--dump: rows in the batch");
  c->add_option("--rows", a->rows, "--dump: rows printed");
  c->add_flag("--split_long_examples", a->split, "--dump: split examples longer than a row instead of failing");
}

}  // namespace longctx::cli
