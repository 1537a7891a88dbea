// Why: see shard_reader.h. Decoding is a pull loop over ZSTD_decompressStream
// with fixed buffers; lines are assembled from the decoded chunks so a line may
// straddle any number of chunks (and frames) without the shard ever being held
// in memory. Each problem is classified once, where it is detected.
#include "data/shard_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "data/text_corpus.h"
#include "base/log.h"

namespace longctx {
namespace fs = std::filesystem;

const char* ShardProblemKindName(ShardProblemKind kind) {
  switch (kind) {
    case ShardProblemKind::kMalformedJson: return "malformed_json";
    case ShardProblemKind::kInvalidUtf8: return "invalid_utf8";
    case ShardProblemKind::kMissingText: return "missing_text";
    case ShardProblemKind::kLineTooLong: return "line_too_long";
    case ShardProblemKind::kTruncatedFrame: return "truncated_frame";
    case ShardProblemKind::kCorruptFrame: return "corrupt_frame";
    case ShardProblemKind::kIoError: return "io_error";
  }
  return "unknown";
}

// ---------------------------------------------------------------------------
// Stats

namespace {

// The problem counters, in one table so ToJson/FromJson/Add/Summary agree.
struct CounterField {
  const char* name;
  int64_t ShardReadStats::*field;
};
constexpr CounterField kProblemFields[] = {
    {"malformed_json", &ShardReadStats::malformed_json},
    {"invalid_utf8", &ShardReadStats::invalid_utf8},
    {"missing_text", &ShardReadStats::missing_text},
    {"line_too_long", &ShardReadStats::line_too_long},
    {"truncated_frames", &ShardReadStats::truncated_frames},
    {"corrupt_frames", &ShardReadStats::corrupt_frames},
    {"io_errors", &ShardReadStats::io_errors},
};
constexpr CounterField kCountFields[] = {
    {"files", &ShardReadStats::files},
    {"files_failed", &ShardReadStats::files_failed},
    {"lines", &ShardReadStats::lines},
    {"blank_lines", &ShardReadStats::blank_lines},
    {"docs", &ShardReadStats::docs},
    {"filtered", &ShardReadStats::filtered},
    {"compressed_bytes", &ShardReadStats::compressed_bytes},
    {"uncompressed_bytes", &ShardReadStats::uncompressed_bytes},
    {"text_bytes", &ShardReadStats::text_bytes},
    {"skipped_compressed_bytes", &ShardReadStats::skipped_compressed_bytes},
};

}  // namespace

int64_t ShardReadStats::problems() const {
  int64_t n = 0;
  for (const CounterField& f : kProblemFields) n += this->*f.field;
  return n;
}

void ShardReadStats::Add(const ShardReadStats& o) {
  for (const CounterField& f : kCountFields) this->*f.field += o.*f.field;
  for (const CounterField& f : kProblemFields) this->*f.field += o.*f.field;
  for (const auto& [k, v] : o.docs_per_set) docs_per_set[k] += v;
  for (const auto& [k, v] : o.filtered_per_set) filtered_per_set[k] += v;
}

nlohmann::json ShardReadStats::ToJson() const {
  nlohmann::json j = nlohmann::json::object();
  for (const CounterField& f : kCountFields) j[f.name] = this->*f.field;
  nlohmann::json errors = nlohmann::json::object();
  for (const CounterField& f : kProblemFields) errors[f.name] = this->*f.field;
  j["errors"] = std::move(errors);
  j["docs_per_set"] = docs_per_set;
  j["filtered_per_set"] = filtered_per_set;
  return j;
}

absl::StatusOr<ShardReadStats> ShardReadStats::FromJson(const nlohmann::json& j) {
  auto bad = [](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat("shard read stats JSON: ", what));
  };
  if (!j.is_object()) return bad("not an object");
  ShardReadStats s;
  size_t known = 0;
  for (const CounterField& f : kCountFields) {
    auto it = j.find(f.name);
    if (it == j.end() || !it->is_number_integer()) return bad(absl::StrCat("missing integer \"", f.name, "\""));
    s.*f.field = it->get<int64_t>();
    ++known;
  }
  auto errors = j.find("errors");
  if (errors == j.end() || !errors->is_object()) return bad("missing object \"errors\"");
  for (const CounterField& f : kProblemFields) {
    auto it = errors->find(f.name);
    if (it == errors->end() || !it->is_number_integer())
      return bad(absl::StrCat("missing integer \"errors.", f.name, "\""));
    s.*f.field = it->get<int64_t>();
  }
  if (errors->size() != std::size(kProblemFields)) return bad("unknown keys in \"errors\"");
  ++known;
  for (const char* map_name : {"docs_per_set", "filtered_per_set"}) {
    auto it = j.find(map_name);
    if (it == j.end() || !it->is_object()) return bad(absl::StrCat("missing object \"", map_name, "\""));
    std::map<std::string, int64_t>& m =
        std::string(map_name) == "docs_per_set" ? s.docs_per_set : s.filtered_per_set;
    for (auto e = it->begin(); e != it->end(); ++e) {
      if (!e.value().is_number_integer()) return bad(absl::StrCat(map_name, ".", e.key(), " is not an integer"));
      m[e.key()] = e.value().get<int64_t>();
    }
    ++known;
  }
  if (j.size() != known) return bad("unknown keys");
  return s;
}

std::string ShardReadStats::Summary() const {
  std::string s = absl::StrCat(files, " files", files_failed > 0 ? absl::StrCat(" (", files_failed, " failed)") : "",
                               ", ", lines, " lines: ", docs, " docs (", text_bytes, " text bytes), ",
                               filtered, " filtered, ", blank_lines, " blank; ", uncompressed_bytes,
                               " bytes decoded from ", compressed_bytes, "; problems ", problems());
  if (problems() > 0) {
    absl::StrAppend(&s, " (");
    bool first = true;
    for (const CounterField& f : kProblemFields) {
      if (this->*f.field == 0) continue;
      absl::StrAppend(&s, first ? "" : ", ", f.name, " ", this->*f.field);
      first = false;
    }
    absl::StrAppend(&s, ")");
  }
  if (skipped_compressed_bytes > 0) absl::StrAppend(&s, ", ", skipped_compressed_bytes, " file bytes not decoded");
  if (!docs_per_set.empty()) {
    absl::StrAppend(&s, "; docs per set:");
    for (const auto& [k, v] : docs_per_set) absl::StrAppend(&s, " ", k.empty() ? "(none)" : k, "=", v);
  }
  if (!filtered_per_set.empty()) {
    absl::StrAppend(&s, "; filtered:");
    for (const auto& [k, v] : filtered_per_set) absl::StrAppend(&s, " ", k.empty() ? "(none)" : k, "=", v);
  }
  return s;
}

// ---------------------------------------------------------------------------
// Listing

bool NaturalLess(std::string_view a, std::string_view b) {
  size_t i = 0, j = 0;
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  while (i < a.size() && j < b.size()) {
    if (digit(a[i]) && digit(b[j])) {
      size_t ie = i, je = j;
      while (ie < a.size() && digit(a[ie])) ++ie;
      while (je < b.size() && digit(b[je])) ++je;
      // Compare the runs as numbers: skip leading zeros, then length, then digits.
      size_t is = i, js = j;
      while (is + 1 < ie && a[is] == '0') ++is;
      while (js + 1 < je && b[js] == '0') ++js;
      if (ie - is != je - js) return ie - is < je - js;
      const int c = a.substr(is, ie - is).compare(b.substr(js, je - js));
      if (c != 0) return c < 0;
      i = ie;
      j = je;
      continue;
    }
    if (a[i] != b[j]) return static_cast<unsigned char>(a[i]) < static_cast<unsigned char>(b[j]);
    ++i;
    ++j;
  }
  if ((i < a.size()) != (j < b.size())) return i >= a.size();  // a is a prefix of b
  return a < b;  // equal as numbers (e.g. leading zeros): bytes decide
}

namespace {

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ListFilesUnder(const std::string& dir,
                                                        const std::function<bool(const std::string&)>& keep,
                                                        std::vector<std::string>* rejected) {
  std::vector<std::string> found;
  std::error_code ec;
  fs::recursive_directory_iterator it(dir, fs::directory_options::none, ec);
  if (ec) return absl::InternalError(absl::StrCat("listing ", dir, ": ", ec.message()));
  for (; it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) break;
    const std::string name = it->path().filename().string();
    if (name.rfind('.', 0) == 0) {
      if (it->is_directory(ec)) it.disable_recursion_pending();
      continue;
    }
    if (!it->is_regular_file(ec)) continue;
    if (keep(name)) {
      found.push_back(it->path().string());
    } else if (rejected != nullptr) {
      rejected->push_back(it->path().string());
    }
  }
  if (ec) return absl::InternalError(absl::StrCat("listing ", dir, ": ", ec.message()));
  std::sort(found.begin(), found.end(), NaturalLess);
  return found;
}

absl::StatusOr<std::vector<std::string>> ListShardFiles(const std::vector<std::string>& inputs,
                                                        std::vector<std::string>* ignored) {
  std::vector<std::string> files;
  for (const std::string& input : inputs) {
    std::error_code ec;
    const fs::file_status st = fs::status(input, ec);
    if (ec || !fs::exists(st)) return absl::NotFoundError(absl::StrCat("shard input ", input, " does not exist"));
    if (!fs::is_directory(st)) {
      files.push_back(input);
      continue;
    }
    absl::StatusOr<std::vector<std::string>> found = ListFilesUnder(
        input, [](const std::string& name) { return EndsWith(name, ".jsonl") || EndsWith(name, ".jsonl.zst"); },
        ignored);
    if (!found.ok()) return found.status();
    files.insert(files.end(), found->begin(), found->end());
  }
  return files;
}

// ---------------------------------------------------------------------------
// Reader

struct ShardReader::FileState {
  std::string path;
  int fd = -1;
  bool zstd = false;
  int64_t file_size = 0;
  int64_t bytes_read = 0;
  ZSTD_DCtx* dctx = nullptr;
  std::vector<char> in_buf;
  ZSTD_inBuffer in{nullptr, 0, 0};
  size_t last_ret = 0;       // last ZSTD_decompressStream result; != 0 = inside a frame
  bool output_full = false;  // the decoder may hold more output
  std::string zstd_error;
  int io_errno = 0;
  std::vector<char> out_buf;
  size_t out_pos = 0, out_len = 0;
  std::string line;      // the line being assembled
  bool skipping = false;  // the current line exceeded max_line_bytes
  int64_t skipped_len = 0;
  int64_t line_no = 1;  // 1-based number of the line being assembled
  bool finished = false;
  int logged = 0, unlogged = 0;

  ~FileState() {
    if (fd >= 0) ::close(fd);
    if (dctx != nullptr) ZSTD_freeDCtx(dctx);
  }
};

ShardReader::ShardReader(std::vector<std::string> files, ShardReaderOptions options)
    : files_(std::move(files)), options_(std::move(options)) {
  if (options_.max_line_bytes < 1) options_.max_line_bytes = 1;
}

ShardReader::~ShardReader() = default;

void ShardReader::Report(ShardProblemKind kind, int64_t line, const std::string& detail) {
  const std::string& path = file_->path;
  if (static_cast<int>(problems_.size()) < options_.max_recorded_problems) {
    problems_.push_back(ShardProblem{kind, path, line, detail});
  }
  if (file_->logged < options_.max_logged_per_file) {
    ++file_->logged;
    LOG(WARNING) << path << (line > 0 ? absl::StrCat(":", line) : std::string()) << ": "
                 << ShardProblemKindName(kind) << ": " << detail;
  } else {
    ++file_->unlogged;
  }
}

bool ShardReader::OpenNextFile() {
  while (next_file_ < files_.size()) {
    const std::string& path = files_[next_file_++];
    file_ = std::make_unique<FileState>();
    FileState& f = *file_;
    f.path = path;
    f.zstd = EndsWith(path, ".zst");
    f.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    struct stat sb;
    if (f.fd < 0 || ::fstat(f.fd, &sb) != 0) {
      const int err = errno;
      ++stats_.files_failed;
      ++stats_.io_errors;
      Report(ShardProblemKind::kIoError, 0, absl::StrCat("cannot open: ", std::strerror(err)));
      file_.reset();
      continue;
    }
    ++stats_.files;
    f.file_size = static_cast<int64_t>(sb.st_size);
    if (f.zstd) {
      f.dctx = ZSTD_createDCtx();
      CHECK(f.dctx != nullptr) << "ZSTD_createDCtx failed";
      f.in_buf.resize(ZSTD_DStreamInSize());
      f.out_buf.resize(ZSTD_DStreamOutSize());
    } else {
      f.out_buf.resize(size_t{128} << 10);
    }
    return true;
  }
  return false;
}

void ShardReader::CloseFile() {
  if (file_ != nullptr && file_->unlogged > 0) {
    LOG(WARNING) << file_->path << ": " << file_->unlogged
                 << " more problems were counted but not logged (max_logged_per_file "
                 << options_.max_logged_per_file << ")";
  }
  file_.reset();
}

ShardReader::Fill ShardReader::FillChunk() {
  FileState& f = *file_;
  f.out_pos = f.out_len = 0;
  auto read_some = [&](char* buf, size_t cap) -> ssize_t {
    for (;;) {
      const ssize_t n = ::read(f.fd, buf, cap);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) f.io_errno = errno;
      if (n > 0) {
        f.bytes_read += n;
        stats_.compressed_bytes += n;
      }
      return n;
    }
  };
  if (!f.zstd) {
    const ssize_t n = read_some(f.out_buf.data(), f.out_buf.size());
    if (n < 0) return Fill::kIoError;
    if (n == 0) return Fill::kEof;
    f.out_len = static_cast<size_t>(n);
    stats_.uncompressed_bytes += n;
    return Fill::kData;
  }
  for (;;) {
    if (f.in.pos == f.in.size && !f.output_full) {
      const ssize_t n = read_some(f.in_buf.data(), f.in_buf.size());
      if (n < 0) return Fill::kIoError;
      if (n == 0) return f.last_ret != 0 ? Fill::kTruncated : Fill::kEof;
      f.in = ZSTD_inBuffer{f.in_buf.data(), static_cast<size_t>(n), 0};
    }
    ZSTD_outBuffer out{f.out_buf.data(), f.out_buf.size(), 0};
    const size_t ret = ZSTD_decompressStream(f.dctx, &out, &f.in);
    if (ZSTD_isError(ret)) {
      f.zstd_error = ZSTD_getErrorName(ret);
      return Fill::kCorrupt;
    }
    f.last_ret = ret;
    f.output_full = out.pos == out.size;
    if (out.pos > 0) {
      f.out_len = out.pos;
      stats_.uncompressed_bytes += static_cast<int64_t>(out.pos);
      return Fill::kData;
    }
  }
}

namespace {

bool AllSpace(std::string_view s) {
  for (char c : s) {
    if (c != ' ' && c != '\t' && c != '\r' && c != '\n' && c != '\f' && c != '\v') return false;
  }
  return true;
}

bool Listed(const std::vector<std::string>& list, const std::string& name) {
  return std::find(list.begin(), list.end(), name) != list.end();
}

}  // namespace

bool ShardReader::HandleLine(std::string_view line, int64_t line_no) {
  if (AllSpace(line)) {
    ++stats_.blank_lines;
    return false;
  }
  const int64_t bad = FindInvalidUtf8(line);
  if (bad >= 0) {
    ++stats_.invalid_utf8;
    Report(ShardProblemKind::kInvalidUtf8, line_no,
           absl::StrCat("invalid UTF-8 at byte ", bad, " of the line (", line.size(), " bytes)"));
    return false;
  }
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(line.begin(), line.end());
  } catch (const nlohmann::json::exception& e) {
    // nlohmann rejects lone surrogate escapes (\uD800 without its pair): text
    // that cannot be UTF-8, so it is counted as such.
    const std::string what = e.what();
    if (what.find("surrogate") != std::string::npos) {
      ++stats_.invalid_utf8;
      Report(ShardProblemKind::kInvalidUtf8, line_no, absl::StrCat("unpaired surrogate escape: ", what));
    } else {
      ++stats_.malformed_json;
      Report(ShardProblemKind::kMalformedJson, line_no, what);
    }
    return false;
  }
  if (!j.is_object()) {
    ++stats_.malformed_json;
    Report(ShardProblemKind::kMalformedJson, line_no,
           absl::StrCat("the line is a JSON ", j.type_name(), ", not an object"));
    return false;
  }
  auto text = j.find("text");
  if (text == j.end() || !text->is_string()) {
    ++stats_.missing_text;
    Report(ShardProblemKind::kMissingText, line_no,
           text == j.end() ? std::string("no \"text\" member")
                           : absl::StrCat("\"text\" is a ", text->type_name(), ", not a string"));
    return false;
  }
  std::string set;
  auto meta = j.find("meta");
  if (meta != j.end() && !meta->is_null()) {
    if (!meta->is_object()) {
      ++stats_.malformed_json;
      Report(ShardProblemKind::kMalformedJson, line_no,
             absl::StrCat("\"meta\" is a ", meta->type_name(), ", not an object"));
      return false;
    }
    auto name = meta->find("redpajama_set_name");
    if (name != meta->end() && !name->is_null()) {
      if (!name->is_string()) {
        ++stats_.malformed_json;
        Report(ShardProblemKind::kMalformedJson, line_no,
               absl::StrCat("\"meta.redpajama_set_name\" is a ", name->type_name(), ", not a string"));
        return false;
      }
      set = name->get<std::string>();
    }
  }
  if ((!options_.include_sets.empty() && !Listed(options_.include_sets, set)) ||
      Listed(options_.exclude_sets, set)) {
    ++stats_.filtered;
    ++stats_.filtered_per_set[set];
    return false;
  }
  doc_text_ = std::move(text->get_ref<std::string&>());
  doc_set_ = std::move(set);
  doc_line_ = line_no;
  ++stats_.docs;
  stats_.text_bytes += static_cast<int64_t>(doc_text_.size());
  ++stats_.docs_per_set[doc_set_];
  return true;
}

bool ShardReader::Next(ShardDocument* doc) {
  const size_t max_line = static_cast<size_t>(options_.max_line_bytes);
  for (;;) {
    if (file_ == nullptr) {
      if (!OpenNextFile()) return false;
      continue;
    }
    FileState& f = *file_;
    if (f.finished) {
      CloseFile();
      continue;
    }
    // Completes the current line (whose text is f.line unless it was too long).
    auto complete_line = [&]() -> bool {
      const int64_t line_no = f.line_no++;
      ++stats_.lines;
      bool yielded = false;
      if (f.skipping) {
        ++stats_.line_too_long;
        Report(ShardProblemKind::kLineTooLong, line_no,
               absl::StrCat("line of ", f.skipped_len, " bytes exceeds max_line_bytes ",
                            options_.max_line_bytes, "; skipped"));
      } else {
        yielded = HandleLine(f.line, line_no);
      }
      f.line.clear();
      f.skipping = false;
      f.skipped_len = 0;
      if (yielded) {
        doc->text = doc_text_;
        doc->set_name = doc_set_;
        doc->path = f.path;
        doc->line = doc_line_;
      }
      return yielded;
    };
    bool yielded = false;
    while (!yielded && f.out_pos < f.out_len) {
      const char* begin = f.out_buf.data() + f.out_pos;
      const size_t avail = f.out_len - f.out_pos;
      const char* nl = static_cast<const char*>(std::memchr(begin, '\n', avail));
      const size_t take = nl != nullptr ? static_cast<size_t>(nl - begin) : avail;
      if (!f.skipping && f.line.size() + take > max_line) {
        f.skipping = true;
        f.skipped_len = static_cast<int64_t>(f.line.size());
        f.line.clear();
        f.line.shrink_to_fit();
      }
      if (f.skipping) {
        f.skipped_len += static_cast<int64_t>(take);
      } else {
        f.line.append(begin, take);
      }
      f.out_pos += take;
      if (nl != nullptr) {
        ++f.out_pos;
        yielded = complete_line();
      }
    }
    if (yielded) return true;

    const Fill r = FillChunk();
    if (r == Fill::kData) continue;
    f.finished = true;
    switch (r) {
      case Fill::kEof:
        // A last line without '\n' is still a line.
        if (f.skipping || !f.line.empty()) {
          if (complete_line()) return true;
        }
        break;
      case Fill::kTruncated:
        ++stats_.truncated_frames;
        Report(ShardProblemKind::kTruncatedFrame, f.line_no,
               absl::StrCat("the file ends inside a zstd frame after ", f.bytes_read,
                            " bytes; the partial line (", f.skipping ? f.skipped_len : int64_t(f.line.size()),
                            " bytes decoded) and the rest of the frame are lost"));
        break;
      case Fill::kCorrupt: {
        ++stats_.corrupt_frames;
        const int64_t undecoded = f.file_size - f.bytes_read + static_cast<int64_t>(f.in.size - f.in.pos);
        stats_.skipped_compressed_bytes += std::max<int64_t>(undecoded, 0);
        Report(ShardProblemKind::kCorruptFrame, f.line_no,
               absl::StrCat("zstd: ", f.zstd_error, "; the partial line and the remaining ",
                            std::max<int64_t>(undecoded, 0), " bytes of the file are skipped"));
        break;
      }
      case Fill::kIoError: {
        ++stats_.io_errors;
        ++stats_.files_failed;
        const int64_t unread = f.file_size - f.bytes_read;
        stats_.skipped_compressed_bytes += std::max<int64_t>(unread, 0);
        Report(ShardProblemKind::kIoError, f.line_no,
               absl::StrCat("read error: ", std::strerror(f.io_errno), "; the rest of the file is skipped"));
        break;
      }
      case Fill::kData:
        break;
    }
  }
}

}  // namespace longctx
