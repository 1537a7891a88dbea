// Why: SlimPajama tokenizes into one .ltok per shard (thousands of files), and
// training wants one document-indexed collection. TokenDataset presents several
// TokenFileReaders as one: global document i is document i − (docs before its
// file) of the file that holds it, files in a fixed order (a directory's
// manifest.json order, else natural path order), so document indices — and the
// packer's hash-based eval split, which keys on them — are stable as long as
// the set of files is.
#ifndef LONGCTX_DATA_TOKEN_DATASET_H_
#define LONGCTX_DATA_TOKEN_DATASET_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "data/token_file.h"

namespace longctx {

class TokenDataset final : public DocumentSource {
 public:
  // Each input is a .ltok file or a directory. A directory with a
  // manifest.json (written by TokenizeShards) contributes the manifest's
  // shard outputs in manifest order, and each file's n_docs, n_tokens and
  // checksum must match the manifest; a directory without one contributes
  // every *.ltok below it in natural path order (see NaturalLess). All files
  // must share the tokenizer name and vocab_size. No file at all → error.
  static absl::StatusOr<TokenDataset> Open(const std::vector<std::string>& inputs,
                                           const TokenFileReadOptions& options = {});

  TokenDataset(TokenDataset&&) = default;
  TokenDataset& operator=(TokenDataset&&) = default;

  int64_t n_docs() const override { return doc_starts_.back(); }
  int64_t n_tokens() const override { return n_tokens_; }
  int64_t vocab_size() const override { return vocab_size_; }
  const std::string& tokenizer_name() const { return tokenizer_name_; }
  // "N token files under DIR" style name for messages.
  const std::string& description() const { return description_; }

  int n_files() const { return static_cast<int>(files_.size()); }
  const TokenFileReader& file(int k) const { return files_[k]; }
  // Global index of file k's first document.
  int64_t first_doc(int k) const { return doc_starts_[k]; }
  // (file, document within the file) of global document i (CHECKed in range).
  std::pair<int, int64_t> Locate(int64_t i) const;

  // The TokenFileReader calls, on global document indices (CHECKed).
  int64_t doc_length(int64_t i) const override;
  void ReadTokens(int64_t doc, int64_t start, int64_t count, int32_t* out) const override;
  std::string source_name() const override { return description_; }
  absl::Span<const int32_t> doc(int64_t i, std::vector<int32_t>* buffer) const;
  std::vector<int32_t> DocCopy(int64_t i) const;

 private:
  TokenDataset() = default;

  std::vector<TokenFileReader> files_;
  std::vector<int64_t> doc_starts_{0};  // [n_files + 1] prefix sums of n_docs
  int64_t n_tokens_ = 0;
  int64_t vocab_size_ = 0;
  std::string tokenizer_name_;
  std::string description_;
};

// Writes every document of dataset, in order, into one token file at out_path
// (tmp + rename by TokenFileWriter). For consumers that take a single file.
absl::Status WriteMergedTokenFile(const TokenDataset& dataset, const std::string& out_path);

}  // namespace longctx

#endif  // LONGCTX_DATA_TOKEN_DATASET_H_
