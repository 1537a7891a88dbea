// Why: SFT examples must keep, next to their tokens, which tokens carry loss
// (chat_template.h) and where each example came from (so a packing error can
// name it as file:line). A .ltok file has no room for either, so tokenized SFT
// data is its own small file kind, written once by `longctx data sft` and read
// whole into memory by the trainer (SFT sets are megabytes, not terabytes).
//
// Layout of an .lsft file (integers little-endian):
//   offset 0   char[8] magic "LCSFT001"
//          8   u32     version (1)
//         12   u32     reserved (0)
//         16   u64     vocab_size
//         24   u64     n_tokens (all examples)
//         32   u64     n_examples
//         40   u64     tokenizer name length N
//         48   u64     source table length S (bytes)
//         56   char[N] tokenizer name, zero-padded to a multiple of 8
//              char[S] sources: "path:line" of each example, each ended by '\n',
//                      zero-padded to a multiple of 8
//              i32     tokens [n_tokens], zero-padded to a multiple of 8 bytes
//                      (4 zero bytes when n_tokens is odd)
//              u8      loss flags [n_tokens] (0 or 1), zero-padded to a multiple of 8 bytes
//              u64     example offsets [n_examples + 1] into tokens (0 first,
//                      non-decreasing, n_tokens last; no empty example)
//   last 8     u64     XXH64 (seed 0) of every byte before it
// Every section starts 8-byte aligned; the file is 56 + pad8(N) + pad8(S) +
// pad8(4 n_tokens) + pad8(n_tokens) + 8 (n_examples + 1) + 8 bytes.
#ifndef LONGCTX_DATA_SFT_TOKEN_FILE_H_
#define LONGCTX_DATA_SFT_TOKEN_FILE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace longctx {

inline constexpr char kSftTokenFileMagic[8] = {'L', 'C', 'S', 'F', 'T', '0', '0', '1'};
inline constexpr uint32_t kSftTokenFileVersion = 1;

// Tokenized SFT examples in memory (what the file holds).
class SftDataset {
 public:
  SftDataset() = default;
  SftDataset(int64_t vocab_size, std::string tokenizer_name)
      : vocab_size_(vocab_size), tokenizer_name_(std::move(tokenizer_name)) {}

  // Appends one example; tokens non-empty, loss the same size with 0/1 values,
  // every id in [0, vocab_size); source ("path:line") without '\n'.
  absl::Status Add(absl::Span<const int32_t> tokens, absl::Span<const uint8_t> loss, const std::string& source);

  int64_t n_examples() const { return static_cast<int64_t>(offsets_.size()) - 1; }
  int64_t n_tokens() const { return static_cast<int64_t>(tokens_.size()); }
  int64_t vocab_size() const { return vocab_size_; }
  const std::string& tokenizer_name() const { return tokenizer_name_; }
  int64_t length(int64_t i) const { return static_cast<int64_t>(offsets_[i + 1] - offsets_[i]); }
  absl::Span<const int32_t> tokens(int64_t i) const {
    return absl::MakeConstSpan(tokens_.data() + offsets_[i], length(i));
  }
  absl::Span<const uint8_t> loss(int64_t i) const { return absl::MakeConstSpan(loss_.data() + offsets_[i], length(i)); }
  const std::string& source(int64_t i) const { return sources_[i]; }
  // Tokens with loss over all examples.
  int64_t n_loss_tokens() const;

  // Writes path via path.tmp + rename. Errors name the path.
  absl::Status Write(const std::string& path) const;
  // Reads and verifies (magic, version, sizes, checksum, offsets, flags, ids <
  // vocab_size); every error names the path and what is wrong.
  static absl::StatusOr<SftDataset> Read(const std::string& path);

 private:
  int64_t vocab_size_ = 0;
  std::string tokenizer_name_;
  std::vector<int32_t> tokens_;
  std::vector<uint8_t> loss_;
  std::vector<uint64_t> offsets_ = {0};
  std::vector<std::string> sources_;
};

}  // namespace longctx

#endif  // LONGCTX_DATA_SFT_TOKEN_FILE_H_
