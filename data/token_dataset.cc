// Why: see token_dataset.h. The manifest check catches a directory whose files
// were replaced or partly re-tokenized since the manifest was written.
#include "data/token_dataset.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "data/shard_reader.h"
#include "data/tokenize_shards.h"
#include "base/log.h"

namespace longctx {
namespace fs = std::filesystem;

namespace {

struct Listed {
  std::string path;
  // From the manifest, when there is one (checked after opening).
  bool has_expect = false;
  int64_t docs = 0, tokens = 0;
  uint64_t checksum = 0;
};

absl::Status ListFromManifest(const std::string& dir, std::vector<Listed>* out) {
  const std::string manifest_path = (fs::path(dir) / kTokenizeManifestName).string();
  std::ifstream in(manifest_path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", manifest_path));
  nlohmann::json m;
  try {
    m = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    return absl::DataLossError(absl::StrCat(manifest_path, ": ", e.what()));
  }
  auto bad = [&](const std::string& what) { return absl::DataLossError(absl::StrCat(manifest_path, ": ", what)); };
  if (!m.is_object() || !m.contains("shards") || !m["shards"].is_array()) return bad("no \"shards\" array");
  for (const nlohmann::json& s : m["shards"]) {
    if (!s.is_object() || !s.contains("output") || !s["output"].is_string() || !s.contains("docs") ||
        !s["docs"].is_number_integer() || !s.contains("tokens") || !s["tokens"].is_number_integer() ||
        !s.contains("checksum") || !s["checksum"].is_string()) {
      return bad(absl::StrCat("shard entry without output/docs/tokens/checksum: ", s.dump()));
    }
    Listed l;
    l.path = (fs::path(dir) / s["output"].get<std::string>()).string();
    l.has_expect = true;
    l.docs = s["docs"].get<int64_t>();
    l.tokens = s["tokens"].get<int64_t>();
    const std::string hex = s["checksum"].get<std::string>();
    char* end = nullptr;
    l.checksum = std::strtoull(hex.c_str(), &end, 16);
    if (hex.size() != 16 || end != hex.c_str() + hex.size()) return bad(absl::StrCat("bad checksum \"", hex, "\""));
    out->push_back(std::move(l));
  }
  return absl::OkStatus();
}

absl::Status ListDirectory(const std::string& dir, std::vector<Listed>* out) {
  absl::StatusOr<std::vector<std::string>> found = ListFilesUnder(dir, [](const std::string& name) {
    return name.size() > 5 && name.compare(name.size() - 5, 5, ".ltok") == 0;
  });
  if (!found.ok()) return found.status();
  for (std::string& p : *found) out->push_back(Listed{std::move(p)});
  return absl::OkStatus();
}

uint64_t StoredChecksumOf(const TokenFileReader& r) {
  // The checksum is the file's last 8 bytes; re-read them (the reader does not
  // expose them).
  return ReadTokenFileChecksum(r.path()).value_or(0);
}

}  // namespace

absl::StatusOr<TokenDataset> TokenDataset::Open(const std::vector<std::string>& inputs,
                                                const TokenFileReadOptions& options) {
  if (inputs.empty()) return absl::InvalidArgumentError("TokenDataset: no inputs");
  std::vector<Listed> listed;
  for (const std::string& input : inputs) {
    std::error_code ec;
    if (fs::is_directory(input, ec)) {
      const size_t before = listed.size();
      absl::Status st = fs::exists(fs::path(input) / kTokenizeManifestName, ec) ? ListFromManifest(input, &listed)
                                                                               : ListDirectory(input, &listed);
      if (!st.ok()) return st;
      if (listed.size() == before) {
        return absl::NotFoundError(absl::StrCat("TokenDataset: no .ltok files in ", input));
      }
    } else {
      listed.push_back(Listed{input});
    }
  }
  TokenDataset d;
  for (const Listed& l : listed) {
    absl::StatusOr<TokenFileReader> r = TokenFileReader::Open(l.path, options);
    if (!r.ok()) return r.status();
    if (d.files_.empty()) {
      d.tokenizer_name_ = r->tokenizer_name();
      d.vocab_size_ = r->vocab_size();
    } else if (r->tokenizer_name() != d.tokenizer_name_ || r->vocab_size() != d.vocab_size_) {
      return absl::InvalidArgumentError(absl::StrCat(
          "TokenDataset: ", l.path, " has tokenizer \"", r->tokenizer_name(), "\" (vocab ", r->vocab_size(),
          ") but ", d.files_.front().path(), " has \"", d.tokenizer_name_, "\" (vocab ", d.vocab_size_, ")"));
    }
    if (l.has_expect) {
      const uint64_t sum = StoredChecksumOf(*r);
      if (r->n_docs() != l.docs || r->n_tokens() != l.tokens || sum != l.checksum) {
        return absl::DataLossError(absl::StrFormat(
            "TokenDataset: %s does not match its manifest entry (docs %d vs %d, tokens %d vs %d, checksum "
            "%016x vs %016x); re-run `longctx data tokenize` on that directory",
            l.path, r->n_docs(), l.docs, r->n_tokens(), l.tokens, sum, l.checksum));
      }
    }
    d.n_tokens_ += r->n_tokens();
    d.doc_starts_.push_back(d.doc_starts_.back() + r->n_docs());
    d.files_.push_back(std::move(*r));
  }
  d.description_ = inputs.size() == 1 && d.files_.size() == 1
                       ? inputs.front()
                       : absl::StrCat(d.files_.size(), " token files (", inputs.front(),
                                      inputs.size() > 1 ? ", ..." : "", ")");
  return d;
}

std::pair<int, int64_t> TokenDataset::Locate(int64_t i) const {
  CHECK(i >= 0 && i < n_docs()) << "document " << i << " of " << n_docs();
  // The file k with doc_starts_[k] <= i < doc_starts_[k + 1] (empty files are skipped
  // naturally: upper_bound lands after every start equal to i's file start).
  const auto it = std::upper_bound(doc_starts_.begin(), doc_starts_.end(), i);
  const int k = static_cast<int>(it - doc_starts_.begin()) - 1;
  return {k, i - doc_starts_[k]};
}

int64_t TokenDataset::doc_length(int64_t i) const {
  const auto [k, j] = Locate(i);
  return files_[k].doc_length(j);
}

void TokenDataset::ReadTokens(int64_t doc, int64_t start, int64_t count, int32_t* out) const {
  const auto [k, j] = Locate(doc);
  files_[k].ReadTokens(j, start, count, out);
}

absl::Span<const int32_t> TokenDataset::doc(int64_t i, std::vector<int32_t>* buffer) const {
  const auto [k, j] = Locate(i);
  return files_[k].doc(j, buffer);
}

std::vector<int32_t> TokenDataset::DocCopy(int64_t i) const {
  const auto [k, j] = Locate(i);
  return files_[k].DocCopy(j);
}

absl::Status WriteMergedTokenFile(const TokenDataset& dataset, const std::string& out_path) {
  TokenFileWriter writer;
  absl::Status st = writer.Open(out_path, dataset.vocab_size(), dataset.tokenizer_name());
  if (!st.ok()) return st;
  std::vector<int32_t> buffer;
  for (int64_t i = 0; i < dataset.n_docs(); ++i) {
    st = writer.AddDocument(dataset.doc(i, &buffer));
    if (!st.ok()) return st;
  }
  return writer.Finish();
}

}  // namespace longctx
