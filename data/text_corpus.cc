// Why: see text_corpus.h. Everything here is deterministic (sorted traversal,
// no threads) so the same inputs always give a byte-identical token file.
#include "data/text_corpus.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "data/token_file.h"
#include "base/log.h"

namespace longctx {
namespace fs = std::filesystem;

namespace {

bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v';
}

bool AllSpace(std::string_view s) {
  return std::all_of(s.begin(), s.end(), IsSpace);
}

bool IsCont(unsigned char b) { return (b & 0xC0) == 0x80; }

// Cuts a document into pieces of at most max_bytes (see TextCorpusOptions).
void AppendPieces(std::string_view doc, int64_t max_bytes, std::vector<std::string_view>* out) {
  if (max_bytes <= 0) {
    out->push_back(doc);
    return;
  }
  const size_t max = static_cast<size_t>(max_bytes);
  size_t start = 0;
  while (doc.size() - start > max) {
    size_t cut = 0;
    // Prefer a line end in the second half of the window.
    const size_t nl = doc.rfind('\n', start + max - 1);
    if (nl != std::string_view::npos && nl + 1 > start + max / 2) {
      cut = nl + 1;
    } else {
      cut = start + max;
      while (cut > start && IsCont(static_cast<unsigned char>(doc[cut]))) --cut;
      if (cut == start) {  // window smaller than one character: take the character
        cut = start + 1;
        while (cut < doc.size() && IsCont(static_cast<unsigned char>(doc[cut]))) ++cut;
      }
    }
    out->push_back(doc.substr(start, cut - start));
    start = cut;
  }
  if (start < doc.size()) out->push_back(doc.substr(start));
}

absl::Status ReadWholeFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open: ", std::strerror(errno)));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return absl::InternalError(absl::StrCat("read error: ", std::strerror(errno)));
  *out = std::move(ss).str();
  return absl::OkStatus();
}

}  // namespace

int64_t FindInvalidUtf8(std::string_view s) {
  const unsigned char* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    // ASCII fast path, 8 bytes at a time.
    if (i + 8 <= n) {
      uint64_t w;
      std::memcpy(&w, p + i, 8);
      if ((w & 0x8080808080808080ULL) == 0) {
        i += 8;
        continue;
      }
    }
    const unsigned char b = p[i];
    if (b < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (b >= 0xC2 && b <= 0xDF) {
      len = 2;
    } else if (b >= 0xE0 && b <= 0xEF) {
      len = 3;
      if (b == 0xE0) lo = 0xA0;       // overlong
      else if (b == 0xED) hi = 0x9F;  // surrogates
    } else if (b >= 0xF0 && b <= 0xF4) {
      len = 4;
      if (b == 0xF0) lo = 0x90;       // overlong
      else if (b == 0xF4) hi = 0x8F;  // > U+10FFFF
    } else {
      return static_cast<int64_t>(i);
    }
    if (i + len > n) return static_cast<int64_t>(i);
    if (p[i + 1] < lo || p[i + 1] > hi) return static_cast<int64_t>(i);
    for (size_t k = 2; k < len; ++k) {
      if (!IsCont(p[i + k])) return static_cast<int64_t>(i);
    }
    i += len;
  }
  return -1;
}

std::string ReplaceInvalidUtf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  while (!s.empty()) {
    const int64_t bad = FindInvalidUtf8(s);
    if (bad < 0) {
      out.append(s);
      break;
    }
    out.append(s.substr(0, static_cast<size_t>(bad)));
    out.append("\xEF\xBF\xBD");
    s.remove_prefix(static_cast<size_t>(bad) + 1);
  }
  return out;
}

std::vector<std::string_view> SplitTextIntoDocuments(std::string_view text,
                                                     const TextCorpusOptions& options) {
  std::vector<std::string_view> docs;
  if (!options.split_on_blank_lines) {
    if (!AllSpace(text)) AppendPieces(text, options.max_doc_bytes, &docs);
    return docs;
  }
  size_t doc_start = std::string_view::npos, doc_end = 0;
  int blank_run = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    const size_t line_end = nl == std::string_view::npos ? text.size() : nl + 1;
    const std::string_view line = text.substr(pos, line_end - pos);
    if (AllSpace(line)) {
      ++blank_run;
    } else {
      if (doc_start != std::string_view::npos && blank_run >= 2) {
        AppendPieces(text.substr(doc_start, doc_end - doc_start), options.max_doc_bytes, &docs);
        doc_start = std::string_view::npos;
      }
      if (doc_start == std::string_view::npos) doc_start = pos;
      doc_end = line_end;
      blank_run = 0;
    }
    pos = line_end;
  }
  if (doc_start != std::string_view::npos) {
    AppendPieces(text.substr(doc_start, doc_end - doc_start), options.max_doc_bytes, &docs);
  }
  return docs;
}

absl::StatusOr<std::vector<std::string>> ListTextFiles(const std::vector<std::string>& inputs,
                                                       bool skip_hidden) {
  std::vector<std::string> files;
  for (const std::string& input : inputs) {
    std::error_code ec;
    const fs::file_status st = fs::status(input, ec);
    if (ec || !fs::exists(st)) {
      return absl::NotFoundError(absl::StrCat("text input ", input, " does not exist"));
    }
    if (fs::is_regular_file(st)) {
      files.push_back(input);
      continue;
    }
    if (!fs::is_directory(st)) {
      return absl::InvalidArgumentError(
          absl::StrCat("text input ", input, " is neither a regular file nor a directory"));
    }
    std::vector<std::string> found;
    fs::recursive_directory_iterator it(input, fs::directory_options::none, ec);
    if (ec) {
      return absl::InternalError(absl::StrCat("listing ", input, ": ", ec.message()));
    }
    for (; it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (ec) break;
      const fs::path& p = it->path();
      if (skip_hidden && p.filename().string().rfind('.', 0) == 0) {
        if (it->is_directory(ec)) it.disable_recursion_pending();
        continue;
      }
      if (it->is_regular_file(ec)) found.push_back(p.string());
    }
    if (ec) return absl::InternalError(absl::StrCat("listing ", input, ": ", ec.message()));
    std::sort(found.begin(), found.end());
    files.insert(files.end(), found.begin(), found.end());
  }
  return files;
}

std::string TextCorpusStats::Summary() const {
  return absl::StrCat(files_seen, " files (", files_used, " used, ", files_skipped,
                      " skipped), ", docs, " documents, ", tokens, " tokens from ", text_bytes,
                      " bytes of text");
}

absl::Status BuildTokenFileFromText(const std::vector<std::string>& inputs,
                                    const Tokenizer& tokenizer, const std::string& out_path,
                                    const TextCorpusOptions& options, TextCorpusStats* stats) {
  if (options.max_doc_bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_doc_bytes must be >= 0, got ", options.max_doc_bytes));
  }
  absl::StatusOr<std::vector<std::string>> files = ListTextFiles(inputs, options.skip_hidden);
  if (!files.ok()) return files.status();

  std::error_code ec;
  const fs::path out_canon = fs::weakly_canonical(out_path, ec);
  const std::string tmp_prefix = fs::path(out_path).filename().string() + ".tmp.";

  TextCorpusStats local;
  TextCorpusStats& s = stats != nullptr ? *stats : local;
  s = TextCorpusStats();
  TokenFileWriter writer;
  absl::Status st = writer.Open(out_path, tokenizer.vocab_size(), tokenizer.name());
  if (!st.ok()) return st;
  const int32_t eos = tokenizer.eos_id();

  auto skip = [&](const std::string& path, const std::string& why) {
    ++s.files_skipped;
    s.skipped.push_back(absl::StrCat(path, ": ", why));
    if (options.log_summary) LOG(WARNING) << "skipping " << path << ": " << why;
  };

  std::string text;
  for (const std::string& path : *files) {
    // Never read the output (or its tmp file) when it lies inside an input.
    std::error_code ec2;
    if (fs::weakly_canonical(path, ec2) == out_canon && !ec2) continue;
    if (fs::path(path).filename().string().rfind(tmp_prefix, 0) == 0) continue;
    ++s.files_seen;
    absl::Status rs = ReadWholeFile(path, &text);
    if (!rs.ok()) {
      skip(path, absl::StrCat("unreadable (", rs.message(), ")"));
      continue;
    }
    const size_t nul = text.find('\0');
    if (nul != std::string::npos) {
      skip(path, absl::StrCat("binary (NUL byte at offset ", nul, ")"));
      continue;
    }
    const int64_t bad = FindInvalidUtf8(text);
    if (bad >= 0) {
      skip(path, absl::StrCat("binary (invalid UTF-8 at offset ", bad, ")"));
      continue;
    }
    const std::vector<std::string_view> docs = SplitTextIntoDocuments(text, options);
    if (docs.empty()) {
      skip(path, "empty (no non-whitespace text)");
      continue;
    }
    ++s.files_used;
    s.text_bytes += static_cast<int64_t>(text.size());
    for (std::string_view d : docs) {
      std::vector<int32_t> ids = tokenizer.Encode(d);
      ids.push_back(eos);
      st = writer.AddDocument(ids);
      if (!st.ok()) {
        return absl::Status(st.code(), absl::StrCat("while adding a document of ", path, ": ",
                                                    st.message()));
      }
      ++s.docs;
      s.tokens += static_cast<int64_t>(ids.size());
    }
  }
  if (s.docs == 0) {
    std::string why = absl::StrCat("no documents in the text inputs for ", out_path, " (",
                                   s.files_seen, " files, ", s.files_skipped, " skipped");
    if (!s.skipped.empty()) absl::StrAppend(&why, "; first: ", s.skipped.front());
    absl::StrAppend(&why, ")");
    return absl::InvalidArgumentError(why);  // writer's destructor removes the tmp file
  }
  st = writer.Finish();
  if (!st.ok()) return st;
  if (options.log_summary) LOG(INFO) << "wrote " << out_path << ": " << s.Summary();
  return absl::OkStatus();
}

}  // namespace longctx
