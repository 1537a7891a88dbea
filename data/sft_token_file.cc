// Why: see sft_token_file.h.
#include "data/sft_token_file.h"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "data/token_file.h"

namespace longctx {
namespace {

void PutU32(std::string* s, uint32_t v) { s->append(reinterpret_cast<const char*>(&v), 4); }
void PutU64(std::string* s, uint64_t v) { s->append(reinterpret_cast<const char*>(&v), 8); }
void Pad8(std::string* s) { s->append((8 - s->size() % 8) % 8, '\0'); }
uint64_t Padded8(uint64_t n) { return (n + 7) / 8 * 8; }

}  // namespace

absl::Status SftDataset::Add(absl::Span<const int32_t> tokens, absl::Span<const uint8_t> loss,
                             const std::string& source) {
  if (tokens.empty()) return absl::InvalidArgumentError(absl::StrCat(source, ": empty SFT example"));
  if (loss.size() != tokens.size()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", tokens.size(), " tokens but ", loss.size(), " loss flags"));
  }
  if (source.find('\n') != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("SFT example source contains a newline: ", source));
  }
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= vocab_size_) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": token ", i, " is ", tokens[i], ", outside [0, ", vocab_size_, ")"));
    }
    if (loss[i] > 1) return absl::InvalidArgumentError(absl::StrCat(source, ": loss flag ", i, " is not 0 or 1"));
  }
  tokens_.insert(tokens_.end(), tokens.begin(), tokens.end());
  loss_.insert(loss_.end(), loss.begin(), loss.end());
  offsets_.push_back(tokens_.size());
  sources_.push_back(source);
  return absl::OkStatus();
}

int64_t SftDataset::n_loss_tokens() const {
  int64_t n = 0;
  for (uint8_t f : loss_) n += f;
  return n;
}

absl::Status SftDataset::Write(const std::string& path) const {
  std::string sources;
  for (const std::string& s : sources_) absl::StrAppend(&sources, s, "\n");
  std::string b;
  b.append(kSftTokenFileMagic, 8);
  PutU32(&b, kSftTokenFileVersion);
  PutU32(&b, 0);
  PutU64(&b, static_cast<uint64_t>(vocab_size_));
  PutU64(&b, tokens_.size());
  PutU64(&b, static_cast<uint64_t>(n_examples()));
  PutU64(&b, tokenizer_name_.size());
  PutU64(&b, sources.size());
  b.append(tokenizer_name_);
  Pad8(&b);
  b.append(sources);
  Pad8(&b);
  b.append(reinterpret_cast<const char*>(tokens_.data()), tokens_.size() * 4);
  Pad8(&b);
  b.append(reinterpret_cast<const char*>(loss_.data()), loss_.size());
  Pad8(&b);
  for (uint64_t o : offsets_) PutU64(&b, o);
  PutU64(&b, XxHash64(b.data(), b.size()));
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) return absl::InternalError(absl::StrCat(tmp, ": cannot open for writing"));
    f.write(b.data(), static_cast<std::streamsize>(b.size()));
    f.flush();
    if (!f) {
      std::remove(tmp.c_str());
      return absl::InternalError(absl::StrCat(tmp, ": write failed"));
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return absl::InternalError(absl::StrCat(path, ": rename from ", tmp, " failed: ", ec.message()));
  return absl::OkStatus();
}

absl::StatusOr<SftDataset> SftDataset::Read(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return absl::NotFoundError(absl::StrCat(path, ": cannot open SFT token file"));
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string b = ss.str();
  auto bad = [&](const std::string& what) {
    return absl::DataLossError(absl::StrCat(path, ": not a valid SFT token file (.lsft): ", what));
  };
  if (b.size() < 64) return bad(absl::StrCat("only ", b.size(), " bytes"));
  if (std::memcmp(b.data(), kSftTokenFileMagic, 8) != 0) return bad("wrong magic (want LCSFT001)");
  auto u32 = [&](size_t off) {
    uint32_t v;
    std::memcpy(&v, b.data() + off, 4);
    return v;
  };
  auto u64 = [&](size_t off) {
    uint64_t v;
    std::memcpy(&v, b.data() + off, 8);
    return v;
  };
  if (u32(8) != kSftTokenFileVersion) return bad(absl::StrCat("version ", u32(8), ", this reader knows 1"));
  const uint64_t vocab = u64(16), n_tokens = u64(24), n_examples = u64(32), name_len = u64(40), src_len = u64(48);
  if (vocab == 0 || vocab > 0x7fffffffULL) return bad(absl::StrCat("vocab_size ", vocab));
  constexpr uint64_t kMax = uint64_t{1} << 40;
  if (n_tokens > kMax || n_examples > kMax || name_len > 4096 || src_len > kMax) return bad("absurd sizes in the header");
  const uint64_t expect = 56 + Padded8(name_len) + Padded8(src_len) + Padded8(n_tokens * 4) + Padded8(n_tokens) +
                          (n_examples + 1) * 8 + 8;
  if (b.size() != expect) {
    return bad(absl::StrCat("size ", b.size(), " bytes, the header implies ", expect, " (truncated or corrupt)"));
  }
  if (XxHash64(b.data(), b.size() - 8) != u64(b.size() - 8)) return bad("checksum mismatch (corrupt file)");
  SftDataset d(static_cast<int64_t>(vocab), b.substr(56, name_len));
  size_t off = 56 + Padded8(name_len);
  const std::string sources = b.substr(off, src_len);
  off += Padded8(src_len);
  d.tokens_.resize(n_tokens);
  std::memcpy(d.tokens_.data(), b.data() + off, n_tokens * 4);
  off += Padded8(n_tokens * 4);
  d.loss_.assign(b.begin() + static_cast<std::ptrdiff_t>(off), b.begin() + static_cast<std::ptrdiff_t>(off + n_tokens));
  off += Padded8(n_tokens);
  d.offsets_.resize(n_examples + 1);
  std::memcpy(d.offsets_.data(), b.data() + off, (n_examples + 1) * 8);
  if (d.offsets_[0] != 0 || d.offsets_.back() != n_tokens) return bad("example offsets do not span the tokens");
  for (uint64_t i = 0; i < n_examples; ++i) {
    if (d.offsets_[i + 1] <= d.offsets_[i]) return bad(absl::StrCat("example ", i, " is empty or offsets decrease"));
  }
  for (uint64_t i = 0; i < n_tokens; ++i) {
    if (d.tokens_[i] < 0 || static_cast<uint64_t>(d.tokens_[i]) >= vocab) {
      return bad(absl::StrCat("token ", i, " is ", d.tokens_[i], ", outside the vocabulary of ", vocab));
    }
    if (d.loss_[i] > 1) return bad(absl::StrCat("loss flag ", i, " is ", int{d.loss_[i]}));
  }
  std::vector<std::string> parts = absl::StrSplit(sources, '\n');
  if (parts.size() != n_examples + 1 || !parts.back().empty()) {
    return bad(absl::StrCat("the source table has ", parts.size() - 1, " entries for ", n_examples, " examples"));
  }
  parts.pop_back();
  d.sources_ = std::move(parts);
  return d;
}

}  // namespace longctx
