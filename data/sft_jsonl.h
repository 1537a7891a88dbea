// Why: SFT data arrives as JSON-lines files written by people and scripts, so
// some lines will be bad. Like the shard reader (shard_reader.h), this reader
// never stops at a bad line and never drops one silently: each is logged as
// path:line: kind: detail, counted per kind, and skipped, and
//   lines == examples + blank_lines + malformed_json + bad_example + line_too_long.
// Good lines go through the tokenizer's chat template (chat_template.h) into an
// SftDataset whose example sources are "path:line".
#ifndef LONGCTX_DATA_SFT_JSONL_H_
#define LONGCTX_DATA_SFT_JSONL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "data/chat_template.h"
#include "data/sft_token_file.h"

namespace longctx {

struct SftReadOptions {
  int64_t max_line_bytes = int64_t{64} << 20;  // longer lines → line_too_long
  int max_logged = 100;                        // LOG(WARNING) at most this many problems
  int max_recorded = 1000;                     // keep the first this many in problems
};

struct SftReadStats {
  int64_t files = 0;
  int64_t lines = 0;
  int64_t examples = 0;
  int64_t blank_lines = 0;
  int64_t malformed_json = 0;  // not JSON, invalid UTF-8, a NUL byte, a number out of double range, not an object
  int64_t bad_example = 0;     // JSON but not an SFT example, or the template rejects it
  int64_t line_too_long = 0;
  int64_t tokens = 0;       // of the examples kept
  int64_t loss_tokens = 0;  // of those, tokens with loss
  std::vector<std::string> problems;  // "path:line: kind: detail", valid UTF-8 (bad bytes written \xNN)
  int64_t skipped() const { return malformed_json + bad_example + line_too_long; }
  std::string Summary() const;
};

// Files: each input is a file or a directory whose *.jsonl files (not
// recursive) are read in name order. Errors (the whole call fails): an input
// that does not exist, a directory without .jsonl files, a file that cannot be
// read.
absl::StatusOr<std::vector<std::string>> SftInputFiles(const std::vector<std::string>& inputs);

// Reads the files, appending each good example to *out.
absl::StatusOr<SftReadStats> ReadSftJsonl(const std::vector<std::string>& files, const ChatTemplate& chat_template,
                                          SftDataset* out, const SftReadOptions& options = {});

}  // namespace longctx

#endif  // LONGCTX_DATA_SFT_JSONL_H_
