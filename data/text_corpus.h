// Why: the tiny experiments and tests train on plain text files (essays, the
// Brown corpus, source trees) rather than SlimPajama shards. This turns files
// and directories of text into a .ltok token file deterministically (sorted
// traversal), one document per file or per paragraph group, EOS after every
// document and no BOS (TinyLlama style), and reports what it skipped and why
// instead of silently dropping input.
#ifndef LONGCTX_DATA_TEXT_CORPUS_H_
#define LONGCTX_DATA_TEXT_CORPUS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "data/tokenizer.h"

namespace longctx {

struct TextCorpusOptions {
  // false: one document per file. true: documents are paragraph groups
  // separated by >= 2 consecutive blank (empty or whitespace-only) lines; a
  // single blank line stays inside a document. Leading/trailing blank lines of
  // a group are not part of it.
  bool split_on_blank_lines = false;
  // > 0: documents longer than this many bytes are cut into pieces of at most
  // this size, each its own document (cut after the last newline in the second
  // half of the window if there is one, else at a UTF-8 character boundary).
  int64_t max_doc_bytes = 0;
  // Skip files and directories whose name starts with '.' while recursing
  // (inputs named explicitly are always read).
  bool skip_hidden = true;
  // Log the summary (and each skipped file) with LOG(INFO)/LOG(WARNING).
  bool log_summary = true;
};

struct TextCorpusStats {
  int64_t files_seen = 0;     // regular files found
  int64_t files_used = 0;     // files that gave at least one document
  int64_t files_skipped = 0;  // binary, unreadable or empty files
  int64_t docs = 0;
  int64_t tokens = 0;  // including one EOS per document
  int64_t text_bytes = 0;
  std::vector<std::string> skipped;  // "path: reason", one per skipped file
  std::string Summary() const;
};

// Tokenizes inputs (files, or directories recursed in sorted path order) into
// out_path. Files with a NUL byte or invalid UTF-8 are skipped as binary; files
// with no non-whitespace text are skipped as empty; the output file itself is
// never read. A missing input, or no document at all → error (and no output).
absl::Status BuildTokenFileFromText(const std::vector<std::string>& inputs,
                                    const Tokenizer& tokenizer, const std::string& out_path,
                                    const TextCorpusOptions& options = {},
                                    TextCorpusStats* stats = nullptr);

// Building blocks, exposed for tests and other corpus readers.
// Offset of the first byte that makes s invalid UTF-8 (overlong forms,
// surrogates and code points > U+10FFFF are invalid), or -1 when s is valid.
int64_t FindInvalidUtf8(std::string_view s);
// s with each byte that FindInvalidUtf8 rejects replaced by U+FFFD: what goes
// where only valid UTF-8 may (JSON strings, cairo's text calls).
std::string ReplaceInvalidUtf8(std::string_view s);
// The documents of one file's text under options (views into text).
std::vector<std::string_view> SplitTextIntoDocuments(std::string_view text,
                                                     const TextCorpusOptions& options);
// The files that inputs name, in processing order.
absl::StatusOr<std::vector<std::string>> ListTextFiles(const std::vector<std::string>& inputs,
                                                       bool skip_hidden = true);

}  // namespace longctx

#endif  // LONGCTX_DATA_TEXT_CORPUS_H_
