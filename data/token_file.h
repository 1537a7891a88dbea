// Why: tokenizing a corpus is slow and training reads it many times, so text is
// tokenized once into a binary .ltok file that is mmapped at training time. The
// file keeps a document index (documents are the unit of packing, masking and
// the train/eval split) and a checksum, so a truncated or corrupt file fails
// loudly at open instead of silently training on garbage.
//
// Layout (all integers little-endian):
//   offset 0   char[8]  magic "LCTOK001"
//          8   u32      version (1)
//         12   u32      token width in bytes: 2 when vocab_size <= 65536, else 4
//         16   u64      vocab_size
//         24   u64      n_tokens
//         32   u64      n_docs
//         40   u64      header_bytes (where the token array starts; multiple of 8)
//         48   u32      tokenizer name length
//         52   u32      reserved (0)
//         56   char[]   tokenizer name, zero-padded up to header_bytes
//   header_bytes        tokens [n_tokens] (u16 or u32), zero-padded to a multiple of 8
//   then                u64 document offsets [n_docs + 1] into the token array;
//                       offsets[0] = 0, non-decreasing, offsets[n_docs] = n_tokens
//   last 8 bytes        u64 XXH64 (seed 0) of every byte before it
#ifndef LONGCTX_DATA_TOKEN_FILE_H_
#define LONGCTX_DATA_TOKEN_FILE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "data/document_source.h"

// xxhash.h's XXH64_state_t, declared here so only token_file.cc includes it.
struct XXH64_state_s;

namespace longctx {

inline constexpr char kTokenFileMagic[8] = {'L', 'C', 'T', 'O', 'K', '0', '0', '1'};
inline constexpr uint32_t kTokenFileVersion = 1;
inline constexpr size_t kTokenFileFixedHeaderBytes = 56;
inline constexpr uint32_t kTokenFileMaxNameBytes = 4096;

// XXH64 (the xxHash 64-bit algorithm, computed by libxxhash), one-shot and
// streaming. Used for the token file checksum; exposed so tests and tools can
// recompute it.
uint64_t XxHash64(const void* data, size_t size, uint64_t seed = 0);

// Owns a libxxhash XXH64 state: movable, not copyable.
class XxHash64Stream {
 public:
  explicit XxHash64Stream(uint64_t seed = 0);
  ~XxHash64Stream();
  XxHash64Stream(XxHash64Stream&& other) noexcept;
  XxHash64Stream& operator=(XxHash64Stream&& other) noexcept;
  XxHash64Stream(const XxHash64Stream&) = delete;
  XxHash64Stream& operator=(const XxHash64Stream&) = delete;

  void Update(const void* data, size_t size);
  uint64_t Digest() const;

 private:
  XXH64_state_s* state_;
};

// Token width the writer uses for a vocabulary: 2 bytes when vocab_size <= 65536.
inline uint32_t TokenWidthForVocab(int64_t vocab_size) { return vocab_size <= 65536 ? 2 : 4; }

// Streams documents into <path>.tmp and, on Finish, appends the index and the
// checksum, fsyncs and renames onto path; a writer destroyed before Finish
// removes its tmp file. Every error names the path.
class TokenFileWriter {
 public:
  TokenFileWriter() = default;
  ~TokenFileWriter();
  TokenFileWriter(const TokenFileWriter&) = delete;
  TokenFileWriter& operator=(const TokenFileWriter&) = delete;

  // vocab_size in [1, 2^31 - 1]; tokenizer_name at most kTokenFileMaxNameBytes.
  absl::Status Open(const std::string& path, int64_t vocab_size, std::string_view tokenizer_name);
  // Appends one document (may be empty). Every id must be in [0, vocab_size).
  absl::Status AddDocument(absl::Span<const int32_t> ids);
  // Writes the index and checksum and renames the tmp file onto path.
  absl::Status Finish();

  int64_t n_docs() const { return static_cast<int64_t>(offsets_.size()) - 1; }
  int64_t n_tokens() const { return offsets_.empty() ? 0 : static_cast<int64_t>(offsets_.back()); }
  const std::string& path() const { return path_; }

 private:
  absl::Status WriteBytes(const void* data, size_t size);
  absl::Status FlushBuffer();
  void Abandon();

  std::string path_, tmp_path_, name_;
  int fd_ = -1;
  bool finished_ = false;
  int64_t vocab_size_ = 0;
  uint32_t width_ = 0;
  uint64_t header_bytes_ = 0;
  std::vector<uint64_t> offsets_;
  std::vector<unsigned char> buffer_;
};

struct TokenFileReadOptions {
  // Hash the whole file at open (one sequential pass; turn off for huge files
  // that were verified before).
  bool verify_checksum = true;
  // Check every token < vocab_size at open (one pass over the token array).
  bool verify_tokens = true;
};

// Read-only mmapped view of a .ltok file. Movable, not copyable; spans it
// returns stay valid while the reader lives.
class TokenFileReader final : public DocumentSource {
 public:
  static absl::StatusOr<TokenFileReader> Open(const std::string& path,
                                              const TokenFileReadOptions& options = {});

  TokenFileReader(TokenFileReader&& other) noexcept;
  TokenFileReader& operator=(TokenFileReader&& other) noexcept;
  TokenFileReader(const TokenFileReader&) = delete;
  TokenFileReader& operator=(const TokenFileReader&) = delete;
  ~TokenFileReader();

  int64_t n_docs() const override { return static_cast<int64_t>(n_docs_); }
  int64_t n_tokens() const override { return static_cast<int64_t>(n_tokens_); }
  int64_t vocab_size() const override { return static_cast<int64_t>(vocab_size_); }
  uint32_t token_width() const { return width_; }
  const std::string& tokenizer_name() const { return tokenizer_name_; }
  const std::string& path() const { return path_; }

  // Document i (0 <= i < n_docs; CHECKed): where it starts in the token array
  // and how many tokens it has.
  int64_t doc_offset(int64_t i) const;
  int64_t doc_length(int64_t i) const override;

  // Token at a global index in [0, n_tokens) (CHECKed).
  int32_t token(int64_t index) const;
  // Copies tokens [start, start + count) of document `doc` into out (widening
  // u16 → int32); the range must lie inside the document (CHECKed).
  void ReadTokens(int64_t doc, int64_t start, int64_t count, int32_t* out) const override;
  std::string source_name() const override { return path_; }
  // Document i as int32 ids. For 4-byte files the span points into the mapping
  // (buffer untouched); for 2-byte files the ids are widened into *buffer and
  // the span points there (valid until *buffer changes).
  absl::Span<const int32_t> doc(int64_t i, std::vector<int32_t>* buffer) const;
  // Document i as a fresh vector.
  std::vector<int32_t> DocCopy(int64_t i) const;

 private:
  TokenFileReader() = default;
  void Release();

  std::string path_;
  std::string tokenizer_name_;
  const unsigned char* map_ = nullptr;
  size_t map_size_ = 0;
  uint32_t width_ = 0;
  uint64_t vocab_size_ = 0, n_tokens_ = 0, n_docs_ = 0;
  const unsigned char* tokens_ = nullptr;
  const uint64_t* offsets_ = nullptr;
};

}  // namespace longctx

#endif  // LONGCTX_DATA_TOKEN_FILE_H_
