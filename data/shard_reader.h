// Why: SlimPajama arrives as hundreds of GB of zstd-compressed JSON-lines shards
// (`train/chunk1..10/example_train_N.jsonl.zst`, SPECS.md "Data: SlimPajama").
// A shard must be streamed (never held in memory), and at that scale some lines
// will be bad: malformed JSON, invalid UTF-8, a missing `text`, an absurdly
// long line, a truncated or corrupt zstd frame. TinyLlama also dropped a whole
// source set (RedPajamaGithub). This reader yields the good documents in a
// deterministic order and reports every line it does not yield, with file and
// 1-based line number, in a per-category count, so nothing is silently dropped:
//   lines == docs + filtered + blank_lines + malformed_json + invalid_utf8
//            + missing_text + line_too_long
// and what could not be decoded at all (the partial line at a truncated frame,
// everything after a corrupt frame or a read error) is counted per file in
// truncated_frames / corrupt_frames / io_errors (+ skipped_compressed_bytes).
//
// Memory is bounded: a fixed zstd input and output buffer (~128 KiB each, from
// ZSTD_DStreamInSize/OutSize), the current line (at most max_line_bytes; a
// longer line is discarded while it streams past and reported) and the parsed
// JSON of that one line. zstd's own window is capped by its default
// ZSTD_d_windowLogMax (128 MiB).
#ifndef LONGCTX_DATA_SHARD_READER_H_
#define LONGCTX_DATA_SHARD_READER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "absl/status/statusor.h"

namespace longctx {

// Why each line or file part was not yielded.
enum class ShardProblemKind {
  kMalformedJson,   // not parseable JSON, not an object, or a non-string set name
  kInvalidUtf8,     // raw invalid UTF-8, or a lone \uD800-\uDFFF escape
  kMissingText,     // no "text" member, or not a string
  kLineTooLong,     // longer than max_line_bytes (discarded unread)
  kTruncatedFrame,  // the file ends inside a zstd frame; the partial line is lost
  kCorruptFrame,    // zstd reports corrupt data; the rest of the file is skipped
  kIoError,         // the file cannot be opened or read; the rest is skipped
};
const char* ShardProblemKindName(ShardProblemKind kind);

struct ShardProblem {
  ShardProblemKind kind;
  std::string path;
  int64_t line = 0;  // 1-based line of the decompressed stream
  std::string detail;
};

struct ShardReaderOptions {
  // Documents whose meta.redpajama_set_name is listed are skipped (counted as
  // filtered). TinyLlama: {"RedPajamaGithub"}.
  std::vector<std::string> exclude_sets;
  // Non-empty: only these sets are yielded (a document without a set name is
  // then filtered too). Applied before exclude_sets.
  std::vector<std::string> include_sets;
  // Longest line (bytes, without the '\n') that is parsed; longer → kLineTooLong.
  int64_t max_line_bytes = int64_t{64} << 20;
  // LOG(WARNING) each problem (file:line: kind: detail), at most this many per
  // file; the rest are still counted and one line says how many went unlogged.
  int max_logged_per_file = 100;
  // Keep the first this many problems in problems() (counts are always exact).
  int max_recorded_problems = 1000;
};

struct ShardReadStats {
  int64_t files = 0;                     // files opened
  int64_t files_failed = 0;              // files that hit kIoError (open or read)
  int64_t lines = 0;                     // complete lines seen (see the invariant above)
  int64_t blank_lines = 0;               // empty or whitespace-only lines
  int64_t docs = 0;                      // documents yielded
  int64_t filtered = 0;                  // good documents skipped by the set filter
  int64_t compressed_bytes = 0;          // bytes read from the files
  int64_t uncompressed_bytes = 0;        // bytes decoded (plain files: = compressed)
  int64_t text_bytes = 0;                // bytes of yielded `text`
  int64_t skipped_compressed_bytes = 0;  // file bytes never decoded (corrupt frame, I/O error)
  int64_t malformed_json = 0;
  int64_t invalid_utf8 = 0;
  int64_t missing_text = 0;
  int64_t line_too_long = 0;
  int64_t truncated_frames = 0;
  int64_t corrupt_frames = 0;
  int64_t io_errors = 0;
  std::map<std::string, int64_t> docs_per_set;      // "" = no set name
  std::map<std::string, int64_t> filtered_per_set;

  int64_t problems() const;  // sum of the seven problem categories
  void Add(const ShardReadStats& other);
  nlohmann::json ToJson() const;
  // Inverse of ToJson (for resumed manifests); unknown keys are an error.
  static absl::StatusOr<ShardReadStats> FromJson(const nlohmann::json& json);
  std::string Summary() const;  // one line for logs
};

// One yielded document; the views stay valid until the next Next().
struct ShardDocument {
  std::string_view text;
  std::string_view set_name;  // "" when the line has no meta.redpajama_set_name
  std::string_view path;
  int64_t line = 0;
};

// Files that inputs name, in reading order: a file is taken as given (".zst"
// suffix → zstd, anything else → plain JSON lines); a directory is searched
// recursively (names starting with '.' skipped) for *.jsonl and *.jsonl.zst,
// sorted in natural order (digit runs compare as numbers: chunk2 < chunk10,
// example_train_9 < example_train_10). Other files found in directories are
// appended to *ignored when given. A missing input is NotFound.
absl::StatusOr<std::vector<std::string>> ListShardFiles(const std::vector<std::string>& inputs,
                                                        std::vector<std::string>* ignored = nullptr);
// The natural order used above (a strict weak order; ties fall back to bytes).
bool NaturalLess(std::string_view a, std::string_view b);

// Regular files below dir (recursively) whose name `keep` accepts, in
// NaturalLess order. Names starting with '.' are skipped, and hidden
// directories are not entered. Rejected regular files go to `rejected` if set.
absl::StatusOr<std::vector<std::string>> ListFilesUnder(const std::string& dir,
                                                        const std::function<bool(const std::string&)>& keep,
                                                        std::vector<std::string>* rejected = nullptr);

// Streams the documents of files in order. Never fails: every problem is
// logged, recorded, counted and skipped.
class ShardReader {
 public:
  ShardReader(std::vector<std::string> files, ShardReaderOptions options = {});
  ~ShardReader();
  ShardReader(const ShardReader&) = delete;
  ShardReader& operator=(const ShardReader&) = delete;

  // The next document; false once every file is read.
  bool Next(ShardDocument* doc);

  const ShardReadStats& stats() const { return stats_; }
  const std::vector<ShardProblem>& problems() const { return problems_; }

 private:
  struct FileState;
  enum class Fill { kData, kEof, kTruncated, kCorrupt, kIoError };

  bool OpenNextFile();
  void CloseFile();
  Fill FillChunk();
  // Handles one complete line; true when it produced a document.
  bool HandleLine(std::string_view line, int64_t line_no);
  void Report(ShardProblemKind kind, int64_t line, const std::string& detail);

  std::vector<std::string> files_;
  ShardReaderOptions options_;
  size_t next_file_ = 0;
  std::unique_ptr<FileState> file_;
  ShardReadStats stats_;
  std::vector<ShardProblem> problems_;
  // The yielded document.
  std::string doc_text_, doc_set_;
  int64_t doc_line_ = 0;
};

}  // namespace longctx

#endif  // LONGCTX_DATA_SHARD_READER_H_
