// Why: see token_file.h. The writer streams (a corpus never has to fit in
// memory, only its document index does) and publishes the file atomically
// (tmp + fsync + rename), so a crash never leaves a half-written file under the
// real name. The reader validates everything it will later index with, so the
// packer can use the offsets and tokens without re-checking.
#include "data/token_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/log.h"

namespace longctx {

static_assert(std::endian::native == std::endian::little,
              "token files are little-endian and read in place");

// ---------------------------------------------------------------------------
// XXH64: libxxhash (Debian libxxhash-dev), the reference implementation.

XxHash64Stream::XxHash64Stream(uint64_t seed) : state_(XXH64_createState()) {
  CHECK(state_ != nullptr) << "XXH64_createState: out of memory";
  XXH64_reset(state_, seed);
}

XxHash64Stream::~XxHash64Stream() {
  if (state_ != nullptr) XXH64_freeState(state_);
}

XxHash64Stream::XxHash64Stream(XxHash64Stream&& other) noexcept : state_(std::exchange(other.state_, nullptr)) {}

XxHash64Stream& XxHash64Stream::operator=(XxHash64Stream&& other) noexcept {
  if (this != &other) {
    if (state_ != nullptr) XXH64_freeState(state_);
    state_ = std::exchange(other.state_, nullptr);
  }
  return *this;
}

void XxHash64Stream::Update(const void* data, size_t size) {
  CHECK(state_ != nullptr) << "XxHash64Stream used after a move";
  if (size > 0) XXH64_update(state_, data, size);
}

uint64_t XxHash64Stream::Digest() const {
  CHECK(state_ != nullptr) << "XxHash64Stream used after a move";
  return XXH64_digest(state_);
}

uint64_t XxHash64(const void* data, size_t size, uint64_t seed) { return XXH64(data, size, seed); }

// ---------------------------------------------------------------------------
// Writer
namespace {

constexpr size_t kWriteBufferBytes = size_t{1} << 20;

inline uint64_t AlignUp8(uint64_t x) { return (x + 7) & ~uint64_t{7}; }

std::string ErrnoText(int err) { return std::strerror(err); }

void PutU32(unsigned char* p, uint32_t v) { std::memcpy(p, &v, 4); }
void PutU64(unsigned char* p, uint64_t v) { std::memcpy(p, &v, 8); }

std::vector<unsigned char> EncodeHeader(uint32_t width, uint64_t vocab, uint64_t n_tokens,
                                        uint64_t n_docs, std::string_view name) {
  const uint64_t header_bytes = AlignUp8(kTokenFileFixedHeaderBytes + name.size());
  std::vector<unsigned char> h(header_bytes, 0);
  std::memcpy(h.data(), kTokenFileMagic, 8);
  PutU32(h.data() + 8, kTokenFileVersion);
  PutU32(h.data() + 12, width);
  PutU64(h.data() + 16, vocab);
  PutU64(h.data() + 24, n_tokens);
  PutU64(h.data() + 32, n_docs);
  PutU64(h.data() + 40, header_bytes);
  PutU32(h.data() + 48, static_cast<uint32_t>(name.size()));
  PutU32(h.data() + 52, 0);
  if (!name.empty()) std::memcpy(h.data() + kTokenFileFixedHeaderBytes, name.data(), name.size());
  return h;
}

absl::Status PwriteAll(int fd, const void* data, size_t size, off_t offset, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::pwrite(fd, p, size, offset);
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::InternalError(absl::StrCat("writing ", path, ": ", ErrnoText(errno)));
    }
    p += n;
    size -= static_cast<size_t>(n);
    offset += n;
  }
  return absl::OkStatus();
}

}  // namespace

TokenFileWriter::~TokenFileWriter() {
  if (fd_ >= 0 && !finished_) Abandon();
}

void TokenFileWriter::Abandon() {
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
  if (!tmp_path_.empty()) ::unlink(tmp_path_.c_str());
  finished_ = true;  // the writer is unusable from here on
}

absl::Status TokenFileWriter::Open(const std::string& path, int64_t vocab_size,
                                   std::string_view tokenizer_name) {
  if (fd_ >= 0 || finished_) {
    return absl::FailedPreconditionError(absl::StrCat("TokenFileWriter for ", path_,
                                                      " was already opened"));
  }
  if (vocab_size < 1 || vocab_size > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat("token file ", path, ": vocab_size ", vocab_size, " not in [1, 2^31-1]"));
  }
  if (tokenizer_name.size() > kTokenFileMaxNameBytes) {
    return absl::InvalidArgumentError(absl::StrCat("token file ", path, ": tokenizer name of ",
                                                   tokenizer_name.size(), " bytes is too long"));
  }
  path_ = path;
  tmp_path_ = absl::StrCat(path, ".tmp.", ::getpid());
  vocab_size_ = vocab_size;
  width_ = TokenWidthForVocab(vocab_size);
  fd_ = ::open(tmp_path_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    const int err = errno;
    tmp_path_.clear();
    finished_ = true;
    return absl::InternalError(absl::StrCat("creating ", path, " (tmp file ", path, ".tmp.*): ",
                                            ErrnoText(err)));
  }
  offsets_.assign(1, 0);
  buffer_.reserve(kWriteBufferBytes);
  // Counts are placeholders until Finish rewrites the header.
  const std::vector<unsigned char> header = EncodeHeader(width_, vocab_size, 0, 0, tokenizer_name);
  header_bytes_ = header.size();
  name_ = std::string(tokenizer_name);
  return WriteBytes(header.data(), header.size());
}

absl::Status TokenFileWriter::FlushBuffer() {
  if (buffer_.empty()) return absl::OkStatus();
  const char* p = reinterpret_cast<const char*>(buffer_.data());
  size_t size = buffer_.size();
  while (size > 0) {
    const ssize_t n = ::write(fd_, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      Abandon();
      return absl::InternalError(absl::StrCat("writing ", path_, ": ", ErrnoText(err)));
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
  buffer_.clear();
  return absl::OkStatus();
}

absl::Status TokenFileWriter::WriteBytes(const void* data, size_t size) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  while (size > 0) {
    const size_t take = std::min(size, kWriteBufferBytes - buffer_.size());
    buffer_.insert(buffer_.end(), p, p + take);
    p += take;
    size -= take;
    if (buffer_.size() == kWriteBufferBytes) {
      absl::Status st = FlushBuffer();
      if (!st.ok()) return st;
    }
  }
  return absl::OkStatus();
}

absl::Status TokenFileWriter::AddDocument(absl::Span<const int32_t> ids) {
  if (fd_ < 0 || finished_) {
    return absl::FailedPreconditionError(
        absl::StrCat("TokenFileWriter for ", path_.empty() ? "(unopened)" : path_,
                     " is not open (never opened, failed or finished)"));
  }
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab_size_) {
      return absl::InvalidArgumentError(absl::StrCat("token file ", path_, ": document ", n_docs(),
                                                     " token ", i, " has id ", ids[i],
                                                     " outside [0, ", vocab_size_, ")"));
    }
  }
  if (width_ == 4) {
    absl::Status st = WriteBytes(ids.data(), ids.size() * 4);
    if (!st.ok()) return st;
  } else {
    uint16_t chunk[4096];
    for (size_t i = 0; i < ids.size(); i += 4096) {
      const size_t n = std::min<size_t>(4096, ids.size() - i);
      for (size_t j = 0; j < n; ++j) chunk[j] = static_cast<uint16_t>(ids[i + j]);
      absl::Status st = WriteBytes(chunk, n * 2);
      if (!st.ok()) return st;
    }
  }
  offsets_.push_back(offsets_.back() + ids.size());
  return absl::OkStatus();
}

absl::Status TokenFileWriter::Finish() {
  if (fd_ < 0 || finished_) {
    return absl::FailedPreconditionError(
        absl::StrCat("TokenFileWriter for ", path_.empty() ? "(unopened)" : path_,
                     " is not open (never opened, failed or finished)"));
  }
  auto fail = [this](absl::Status st) {
    Abandon();
    return st;
  };
  const uint64_t n_tokens = offsets_.back();
  const uint64_t n_docs = offsets_.size() - 1;
  // Pad the token array to 8 bytes so the offsets are aligned in the mapping.
  const uint64_t token_bytes = n_tokens * width_;
  const unsigned char zeros[8] = {0};
  absl::Status st = WriteBytes(zeros, AlignUp8(token_bytes) - token_bytes);
  if (st.ok()) st = WriteBytes(offsets_.data(), offsets_.size() * sizeof(uint64_t));
  if (st.ok()) st = FlushBuffer();
  if (!st.ok()) return fail(st);  // FlushBuffer already abandoned; Abandon is idempotent
  const std::vector<unsigned char> header = EncodeHeader(width_, vocab_size_, n_tokens, n_docs, name_);
  CHECK_EQ(header.size(), header_bytes_);
  st = PwriteAll(fd_, header.data(), header.size(), 0, path_);
  if (!st.ok()) return fail(st);

  // Checksum: one sequential pass over what is now on disk (page cache).
  const uint64_t body_bytes = header_bytes_ + AlignUp8(token_bytes) + offsets_.size() * 8;
  XxHash64Stream hash;
  std::vector<unsigned char> chunk(size_t{4} << 20);
  uint64_t pos = 0;
  while (pos < body_bytes) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(chunk.size(), body_bytes - pos));
    const ssize_t n = ::pread(fd_, chunk.data(), want, static_cast<off_t>(pos));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = n < 0 ? ErrnoText(errno) : std::string("unexpected end of file");
      return fail(absl::InternalError(
          absl::StrCat("re-reading ", tmp_path_, " for the checksum of ", path_, ": ", why)));
    }
    hash.Update(chunk.data(), static_cast<size_t>(n));
    pos += static_cast<uint64_t>(n);
  }
  const uint64_t checksum = hash.Digest();
  st = PwriteAll(fd_, &checksum, 8, static_cast<off_t>(body_bytes), path_);
  if (!st.ok()) return fail(st);
  if (::fsync(fd_) != 0) {
    return fail(absl::InternalError(absl::StrCat("fsync of ", path_, ": ", ErrnoText(errno))));
  }
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) {
    return fail(absl::InternalError(absl::StrCat("closing ", path_, ": ", ErrnoText(errno))));
  }
  if (std::rename(tmp_path_.c_str(), path_.c_str()) != 0) {
    return fail(absl::InternalError(
        absl::StrCat("renaming ", tmp_path_, " to ", path_, ": ", ErrnoText(errno))));
  }
  tmp_path_.clear();
  finished_ = true;
  buffer_ = {};
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// Reader
namespace {

absl::Status Corrupt(const std::string& path, const std::string& what) {
  return absl::DataLossError(absl::StrCat("token file ", path, ": ", what));
}

uint32_t GetU32(const unsigned char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
uint64_t GetU64(const unsigned char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

}  // namespace

TokenFileReader::TokenFileReader(TokenFileReader&& other) noexcept { *this = std::move(other); }

TokenFileReader& TokenFileReader::operator=(TokenFileReader&& other) noexcept {
  if (this == &other) return *this;
  Release();
  path_ = std::move(other.path_);
  tokenizer_name_ = std::move(other.tokenizer_name_);
  map_ = std::exchange(other.map_, nullptr);
  map_size_ = std::exchange(other.map_size_, 0);
  width_ = other.width_;
  vocab_size_ = other.vocab_size_;
  n_tokens_ = other.n_tokens_;
  n_docs_ = other.n_docs_;
  tokens_ = std::exchange(other.tokens_, nullptr);
  offsets_ = std::exchange(other.offsets_, nullptr);
  return *this;
}

TokenFileReader::~TokenFileReader() { Release(); }

void TokenFileReader::Release() {
  if (map_ != nullptr) ::munmap(const_cast<unsigned char*>(map_), map_size_);
  map_ = nullptr;
  map_size_ = 0;
  tokens_ = nullptr;
  offsets_ = nullptr;
}

absl::StatusOr<TokenFileReader> TokenFileReader::Open(const std::string& path,
                                                      const TokenFileReadOptions& options) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) return absl::NotFoundError(absl::StrCat("token file ", path, " does not exist"));
    return absl::InternalError(absl::StrCat("opening token file ", path, ": ", ErrnoText(err)));
  }
  struct stat sb;
  if (::fstat(fd, &sb) != 0) {
    const int err = errno;
    ::close(fd);
    return absl::InternalError(absl::StrCat("stat of token file ", path, ": ", ErrnoText(err)));
  }
  const uint64_t size = static_cast<uint64_t>(sb.st_size);
  constexpr uint64_t kMinSize = kTokenFileFixedHeaderBytes + 8 + 8;  // header, offsets[0], checksum
  if (size < kMinSize) {
    ::close(fd);
    return Corrupt(path, absl::StrCat("truncated: ", size, " bytes, less than the minimum ",
                                      kMinSize, " of an empty token file"));
  }
  void* m = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int map_err = errno;
  ::close(fd);
  if (m == MAP_FAILED) {
    return absl::InternalError(absl::StrCat("mmap of token file ", path, ": ", ErrnoText(map_err)));
  }
  TokenFileReader r;
  r.path_ = path;
  r.map_ = static_cast<const unsigned char*>(m);
  r.map_size_ = size;
  const unsigned char* p = r.map_;

  if (std::memcmp(p, kTokenFileMagic, 8) != 0) {
    return Corrupt(path, absl::StrCat("bad magic \"", absl::CHexEscape(absl::string_view(
                                                          reinterpret_cast<const char*>(p), 8)),
                                      "\" (expected \"LCTOK001\"; not a longctx token file?)"));
  }
  const uint32_t version = GetU32(p + 8);
  if (version != kTokenFileVersion) {
    return Corrupt(path, absl::StrCat("unsupported version ", version, " (this build reads ",
                                      kTokenFileVersion, ")"));
  }
  r.width_ = GetU32(p + 12);
  r.vocab_size_ = GetU64(p + 16);
  r.n_tokens_ = GetU64(p + 24);
  r.n_docs_ = GetU64(p + 32);
  const uint64_t header_bytes = GetU64(p + 40);
  const uint32_t name_len = GetU32(p + 48);
  if (r.width_ != 2 && r.width_ != 4) {
    return Corrupt(path, absl::StrCat("token width ", r.width_, " (must be 2 or 4)"));
  }
  if (r.vocab_size_ < 1 || r.vocab_size_ > static_cast<uint64_t>(std::numeric_limits<int32_t>::max())) {
    return Corrupt(path, absl::StrCat("vocab_size ", r.vocab_size_, " not in [1, 2^31-1]"));
  }
  if (r.width_ == 2 && r.vocab_size_ > 65536) {
    return Corrupt(path, absl::StrCat("vocab_size ", r.vocab_size_, " does not fit 2-byte tokens"));
  }
  if (name_len > kTokenFileMaxNameBytes) {
    return Corrupt(path, absl::StrCat("tokenizer name length ", name_len, " exceeds ",
                                      kTokenFileMaxNameBytes));
  }
  if (header_bytes != AlignUp8(kTokenFileFixedHeaderBytes + name_len)) {
    return Corrupt(path, absl::StrCat("header size ", header_bytes, " inconsistent with a ",
                                      name_len, "-byte tokenizer name"));
  }
  // Expected total size from the counts (128-bit: corrupt counts must not wrap).
  using u128 = unsigned __int128;
  const u128 token_bytes = static_cast<u128>(r.n_tokens_) * r.width_;
  const u128 expected = static_cast<u128>(header_bytes) + ((token_bytes + 7) / 8) * 8 +
                        (static_cast<u128>(r.n_docs_) + 1) * 8 + 8;
  if (expected != size) {
    const std::string counts = absl::StrCat("n_tokens=", r.n_tokens_, ", n_docs=", r.n_docs_,
                                            ", width=", r.width_);
    if (expected > size) {
      return Corrupt(path, absl::StrCat("truncated or corrupt counts: the header (", counts,
                                        ") implies ",
                                        expected > u128(~uint64_t{0}) ? std::string("> 2^64")
                                                                      : absl::StrCat(uint64_t(expected)),
                                        " bytes but the file has ", size));
    }
    return Corrupt(path, absl::StrCat("size mismatch: the header (", counts, ") implies ",
                                      uint64_t(expected), " bytes but the file has ", size,
                                      " (trailing bytes or corrupt counts)"));
  }
  r.tokenizer_name_.assign(reinterpret_cast<const char*>(p + kTokenFileFixedHeaderBytes), name_len);
  r.tokens_ = p + header_bytes;
  r.offsets_ = reinterpret_cast<const uint64_t*>(p + header_bytes + AlignUp8(r.n_tokens_ * r.width_));

  // Document index.
  if (r.offsets_[0] != 0) {
    return Corrupt(path, absl::StrCat("document offsets[0] = ", r.offsets_[0], " (must be 0)"));
  }
  for (uint64_t i = 0; i < r.n_docs_; ++i) {
    if (r.offsets_[i + 1] < r.offsets_[i] || r.offsets_[i + 1] > r.n_tokens_) {
      return Corrupt(path, absl::StrCat("document offsets out of order or out of range: offsets[", i,
                                        "] = ", r.offsets_[i], ", offsets[", i + 1, "] = ",
                                        r.offsets_[i + 1], ", n_tokens = ", r.n_tokens_));
    }
  }
  if (r.offsets_[r.n_docs_] != r.n_tokens_) {
    return Corrupt(path, absl::StrCat("document offsets end at ", r.offsets_[r.n_docs_],
                                      " but n_tokens = ", r.n_tokens_));
  }

  if (options.verify_checksum) {
    const uint64_t stored = GetU64(p + size - 8);
    const uint64_t actual = XxHash64(p, size - 8);
    if (stored != actual) {
      return Corrupt(path, absl::StrFormat("checksum mismatch: stored %016x, computed %016x "
                                           "(file corrupted after it was written)",
                                           stored, actual));
    }
  }

  if (options.verify_tokens) {
    uint64_t bad = r.n_tokens_;
    uint64_t bad_value = 0;
    if (r.width_ == 2) {
      const unsigned char* t = r.tokens_;
      for (uint64_t i = 0; i < r.n_tokens_; ++i) {
        uint16_t v;
        std::memcpy(&v, t + 2 * i, 2);
        if (v >= r.vocab_size_) {
          bad = i, bad_value = v;
          break;
        }
      }
    } else {
      const uint32_t* t = reinterpret_cast<const uint32_t*>(r.tokens_);
      for (uint64_t i = 0; i < r.n_tokens_; ++i) {
        if (t[i] >= r.vocab_size_) {
          bad = i, bad_value = t[i];
          break;
        }
      }
    }
    if (bad < r.n_tokens_) {
      const uint64_t* end = r.offsets_ + r.n_docs_ + 1;
      const int64_t doc = (std::upper_bound(r.offsets_, end, bad) - r.offsets_) - 1;
      return Corrupt(path, absl::StrCat("token ", bad, " (document ", doc, ") has id ", bad_value,
                                        " >= vocab_size ", r.vocab_size_));
    }
  }
  return r;
}

int64_t TokenFileReader::doc_offset(int64_t i) const {
  CHECK(i >= 0 && static_cast<uint64_t>(i) < n_docs_) << "doc " << i << " of " << n_docs_;
  return static_cast<int64_t>(offsets_[i]);
}

int64_t TokenFileReader::doc_length(int64_t i) const {
  CHECK(i >= 0 && static_cast<uint64_t>(i) < n_docs_) << "doc " << i << " of " << n_docs_;
  return static_cast<int64_t>(offsets_[i + 1] - offsets_[i]);
}

int32_t TokenFileReader::token(int64_t index) const {
  CHECK(index >= 0 && static_cast<uint64_t>(index) < n_tokens_) << index << " of " << n_tokens_;
  if (width_ == 4) {
    uint32_t v;
    std::memcpy(&v, tokens_ + 4 * index, 4);
    return static_cast<int32_t>(v);
  }
  uint16_t v;
  std::memcpy(&v, tokens_ + 2 * index, 2);
  return v;
}

void TokenFileReader::ReadTokens(int64_t doc, int64_t start, int64_t count, int32_t* out) const {
  const int64_t len = doc_length(doc);
  CHECK(start >= 0 && count >= 0 && start + count <= len)
      << "tokens [" << start << ", " << start + count << ") of document " << doc << " (length "
      << len << ")";
  const uint64_t begin = offsets_[doc] + static_cast<uint64_t>(start);
  if (width_ == 4) {
    if (count > 0) std::memcpy(out, tokens_ + 4 * begin, static_cast<size_t>(count) * 4);
    return;
  }
  const unsigned char* t = tokens_ + 2 * begin;
  for (int64_t i = 0; i < count; ++i) {
    uint16_t v;
    std::memcpy(&v, t + 2 * i, 2);
    out[i] = v;
  }
}

absl::Span<const int32_t> TokenFileReader::doc(int64_t i, std::vector<int32_t>* buffer) const {
  const int64_t len = doc_length(i);
  if (width_ == 4) {
    return absl::Span<const int32_t>(reinterpret_cast<const int32_t*>(tokens_ + 4 * offsets_[i]),
                                     static_cast<size_t>(len));
  }
  buffer->resize(static_cast<size_t>(len));
  ReadTokens(i, 0, len, buffer->data());
  return absl::Span<const int32_t>(buffer->data(), buffer->size());
}

std::vector<int32_t> TokenFileReader::DocCopy(int64_t i) const {
  std::vector<int32_t> out(static_cast<size_t>(doc_length(i)));
  ReadTokens(i, 0, static_cast<int64_t>(out.size()), out.data());
  return out;
}

}  // namespace longctx
