// Why: see sft_jsonl.h.
#include "data/sft_jsonl.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "base/log.h"
#include "data/unicode_classes.h"

namespace longctx {
namespace {

// A problem line must be valid UTF-8: it goes into report.json, and nlohmann
// refuses to dump a string that is not (type_error.316), while parse errors
// quote the bad bytes they met. Each byte that does not start a valid
// sequence is written as \xNN.
std::string Utf8OrEscaped(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    char32_t cp;
    const int n = DecodeUtf8(s, i, &cp);
    if (cp == kInvalidCodePoint) {
      absl::StrAppend(&out, "\\x", absl::Hex(static_cast<unsigned int>(static_cast<unsigned char>(s[i])), absl::kZeroPad2));
    } else {
      out.append(s.substr(i, n));
    }
    i += n;
  }
  return out;
}

}  // namespace

std::string SftReadStats::Summary() const {
  return absl::StrCat(files, " files, ", lines, " lines: ", examples, " examples (", tokens, " tokens, ", loss_tokens,
                      " with loss), ", blank_lines, " blank, skipped ", skipped(), " (malformed_json ",
                      malformed_json, ", bad_example ", bad_example, ", line_too_long ", line_too_long, ")");
}

absl::StatusOr<std::vector<std::string>> SftInputFiles(const std::vector<std::string>& inputs) {
  namespace fs = std::filesystem;
  std::vector<std::string> files;
  for (const std::string& in : inputs) {
    std::error_code ec;
    if (fs::is_directory(in, ec)) {
      std::vector<std::string> here;
      for (const auto& e : fs::directory_iterator(in, ec)) {
        if (e.is_regular_file() && e.path().extension() == ".jsonl") here.push_back(e.path().string());
      }
      if (ec) return absl::InternalError(absl::StrCat(in, ": cannot list: ", ec.message()));
      if (here.empty()) return absl::NotFoundError(absl::StrCat(in, ": no .jsonl files in this directory"));
      std::sort(here.begin(), here.end());
      files.insert(files.end(), here.begin(), here.end());
    } else if (fs::is_regular_file(in, ec)) {
      files.push_back(in);
    } else {
      return absl::NotFoundError(absl::StrCat(in, ": no such SFT JSONL file or directory"));
    }
  }
  if (files.empty()) return absl::InvalidArgumentError("no SFT input given");
  return files;
}

absl::StatusOr<SftReadStats> ReadSftJsonl(const std::vector<std::string>& files, const ChatTemplate& chat_template,
                                          SftDataset* out, const SftReadOptions& options) {
  SftReadStats stats;
  int logged = 0;
  auto problem = [&](const std::string& path, int64_t line, const char* kind, const std::string& detail) {
    std::string msg = Utf8OrEscaped(absl::StrCat(path, ":", line, ": ", kind, ": ", detail));
    if (logged < options.max_logged) {
      LOG(WARNING) << msg;
      ++logged;
    }
    if (static_cast<int>(stats.problems.size()) < options.max_recorded) stats.problems.push_back(std::move(msg));
  };
  for (const std::string& path : files) {
    std::ifstream f(path, std::ios::binary);
    if (!f) return absl::NotFoundError(absl::StrCat(path, ": cannot open SFT JSONL file"));
    ++stats.files;
    std::string text;
    int64_t line_no = 0;
    while (std::getline(f, text)) {
      ++line_no;
      ++stats.lines;
      if (!text.empty() && text.back() == '\r') text.pop_back();
      if (absl::StripAsciiWhitespace(text).empty()) {
        ++stats.blank_lines;
        continue;
      }
      if (static_cast<int64_t>(text.size()) > options.max_line_bytes) {
        ++stats.line_too_long;
        problem(path, line_no, "line_too_long",
                absl::StrCat(text.size(), " bytes > max_line_bytes ", options.max_line_bytes));
        continue;
      }
      absl::StatusOr<SftExample> ex = ParseSftJsonLine(text);
      if (!ex.ok()) {
        const std::string msg(ex.status().message());
        const bool json = msg.rfind("malformed JSON", 0) == 0 || msg == "not a JSON object";
        ++(json ? stats.malformed_json : stats.bad_example);
        problem(path, line_no, json ? "malformed_json" : "bad_example", msg);
        continue;
      }
      absl::StatusOr<TemplatedExample> t = chat_template.Apply(*ex);
      if (!t.ok()) {
        ++stats.bad_example;
        problem(path, line_no, "bad_example", std::string(t.status().message()));
        continue;
      }
      absl::Status st = out->Add(t->tokens, t->loss, absl::StrCat(path, ":", line_no));
      if (!st.ok()) return st;
      ++stats.examples;
      stats.tokens += static_cast<int64_t>(t->tokens.size());
      for (uint8_t l : t->loss) stats.loss_tokens += l;
    }
    if (f.bad()) return absl::DataLossError(absl::StrCat(path, ":", line_no + 1, ": read error"));
  }
  if (logged < static_cast<int>(stats.skipped())) {
    LOG(WARNING) << stats.skipped() - logged << " more bad SFT lines not logged (counted in the summary)";
  }
  return stats;
}

}  // namespace longctx
