// Why: see tokenize_shards.h. Workers pull shard indices from an atomic
// counter; every result lands in its shard's slot, so the manifest is in shard
// order whatever the scheduling. The manifest holds no timings or resume flags:
// the same inputs give a byte-identical manifest and outputs.
#include "data/tokenize_shards.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <system_error>
#include <thread>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "data/make_tokenizer.h"
#include "data/token_file.h"
#include "data/tokenizer.h"
#include "base/log.h"

namespace longctx {
namespace fs = std::filesystem;

absl::StatusOr<uint64_t> ReadTokenFileChecksum(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::NotFoundError(absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  struct stat sb;
  uint64_t sum = 0;
  const bool ok = ::fstat(fd, &sb) == 0 && sb.st_size >= 8 &&
                  ::pread(fd, &sum, 8, sb.st_size - 8) == 8;
  ::close(fd);
  if (!ok) return absl::DataLossError(absl::StrCat("cannot read the checksum of ", path));
  return sum;
}

namespace {

struct ShardJob {
  std::string source;
  std::string output;  // relative to out_dir
  std::string output_abs;
  std::string record_abs;  // the sidecar
};

std::string StripShardSuffix(const std::string& name) {
  for (const char* suffix : {".jsonl.zst", ".jsonl", ".zst"}) {
    const size_t n = std::strlen(suffix);
    if (name.size() > n && name.compare(name.size() - n, n, suffix) == 0) return name.substr(0, name.size() - n);
  }
  return name;
}

absl::StatusOr<std::vector<ShardJob>> PlanJobs(const TokenizeShardsOptions& o) {
  std::vector<ShardJob> jobs;
  std::set<std::string> outputs;
  for (const std::string& input : o.inputs) {
    std::vector<std::string> ignored;
    absl::StatusOr<std::vector<std::string>> files = ListShardFiles({input}, &ignored);
    if (!files.ok()) return files.status();
    if (!ignored.empty()) {
      LOG(INFO) << "tokenize: ignoring " << ignored.size() << " files under " << input
                << " not named *.jsonl or *.jsonl.zst (first: " << ignored.front() << ")";
    }
    std::error_code ec;
    const bool is_dir = fs::is_directory(input, ec);
    for (const std::string& f : *files) {
      const fs::path rel = is_dir ? fs::path(f).lexically_relative(input) : fs::path(f).filename();
      ShardJob job;
      job.source = f;
      job.output = (rel.parent_path() / (StripShardSuffix(rel.filename().string()) + ".ltok")).string();
      if (!outputs.insert(job.output).second) {
        return absl::InvalidArgumentError(absl::StrCat("tokenize: two shards map to the same output ", job.output,
                                                       " (the second is ", f, ")"));
      }
      job.output_abs = (fs::path(o.out_dir) / job.output).string();
      job.record_abs = job.output_abs + ".json";
      jobs.push_back(std::move(job));
    }
  }
  if (jobs.empty()) {
    return absl::NotFoundError("tokenize: no shards (*.jsonl or *.jsonl.zst) in the inputs");
  }
  return jobs;
}

nlohmann::json ReaderSettingsJson(const ShardReaderOptions& r) {
  return {{"exclude_sets", r.exclude_sets}, {"include_sets", r.include_sets}, {"max_line_bytes", r.max_line_bytes}};
}

struct SourceId {
  int64_t size = -1;
  int64_t mtime_ns = -1;
};

SourceId StatSource(const std::string& path) {
  struct stat sb;
  if (::stat(path.c_str(), &sb) != 0) return {};
  return {static_cast<int64_t>(sb.st_size),
          static_cast<int64_t>(sb.st_mtim.tv_sec) * 1000000000 + sb.st_mtim.tv_nsec};
}

absl::Status WriteFileAtomically(const std::string& path, const std::string& contents) {
  const std::string tmp = absl::StrCat(path, ".tmp.", ::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return absl::InternalError(absl::StrCat("creating ", tmp, ": ", std::strerror(errno)));
  size_t done = 0;
  while (done < contents.size()) {
    const ssize_t n = ::write(fd, contents.data() + done, contents.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      return absl::InternalError(absl::StrCat("writing ", tmp, ": ", std::strerror(err)));
    }
    done += static_cast<size_t>(n);
  }
  const bool ok = ::fsync(fd) == 0;
  ::close(fd);
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return absl::InternalError(absl::StrCat("publishing ", path, ": ", std::strerror(err)));
  }
  return absl::OkStatus();
}

std::string Hex64(uint64_t v) { return absl::StrFormat("%016x", v); }

// The token file's stored checksum after checking it against the bytes, read
// with pread in 1 MiB pieces: verifying a multi-GB output costs no memory
// (TokenFileReader would map it and count every page in the resident set).
absl::StatusOr<uint64_t> VerifyChecksumStreaming(const std::string& path) {
  absl::StatusOr<uint64_t> stored = ReadTokenFileChecksum(path);
  if (!stored.ok()) return stored.status();
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::NotFoundError(absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  struct stat sb;
  if (::fstat(fd, &sb) != 0) {
    ::close(fd);
    return absl::InternalError(absl::StrCat("stat of ", path, ": ", std::strerror(errno)));
  }
  const uint64_t body = static_cast<uint64_t>(sb.st_size) - 8;
  std::vector<char> buf(size_t{1} << 20);
  XxHash64Stream hash;
  uint64_t pos = 0;
  while (pos < body) {
    const ssize_t n = ::pread(fd, buf.data(), std::min<uint64_t>(buf.size(), body - pos), static_cast<off_t>(pos));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ::close(fd);
      return absl::DataLossError(absl::StrCat("reading ", path, ": unexpected end or error"));
    }
    hash.Update(buf.data(), static_cast<size_t>(n));
    pos += static_cast<uint64_t>(n);
  }
  ::close(fd);
  if (hash.Digest() != *stored) {
    return absl::DataLossError(absl::StrFormat("token file %s: checksum mismatch: stored %016x, computed %016x",
                                               path, *stored, hash.Digest()));
  }
  return *stored;
}

// OK: the shard's output from an earlier run is complete and current (out is
// filled in). NotFound: there is no earlier output. Anything else: why it has
// to be redone.
absl::Status CheckResumable(const ShardJob& job, const std::string& tokenizer, int64_t vocab,
                            const nlohmann::json& reader_settings, ShardOutcome* out) {
  std::error_code ec;
  if (!fs::exists(job.output_abs, ec)) return absl::NotFoundError("no output yet");
  std::ifstream in(job.record_abs, std::ios::binary);
  if (!in) return absl::DataLossError(absl::StrCat("no shard record ", job.record_abs));
  nlohmann::json rec;
  try {
    rec = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    return absl::DataLossError(absl::StrCat(job.record_abs, ": ", e.what()));
  }
  try {
    const SourceId id = StatSource(job.source);
    std::error_code ec;
    if (fs::weakly_canonical(rec.at("source").get<std::string>(), ec) != fs::weakly_canonical(job.source, ec) ||
        rec.at("source_bytes").get<int64_t>() != id.size ||
        rec.at("source_mtime_ns").get<int64_t>() != id.mtime_ns) {
      return absl::FailedPreconditionError("the source shard changed since it was tokenized");
    }
    if (rec.at("tokenizer").get<std::string>() != tokenizer || rec.at("vocab_size").get<int64_t>() != vocab) {
      return absl::FailedPreconditionError("tokenized with another tokenizer");
    }
    if (rec.at("reader") != reader_settings) {
      return absl::FailedPreconditionError("tokenized with other reader settings (set filters, max_line_bytes)");
    }
    absl::StatusOr<ShardReadStats> stats = ShardReadStats::FromJson(rec.at("stats"));
    if (!stats.ok()) return stats.status();
    // The checksum covers every byte (and the writer checked every id), so
    // the reader only has to check the header and the document index here.
    absl::StatusOr<uint64_t> sum = VerifyChecksumStreaming(job.output_abs);
    if (!sum.ok()) return sum.status();
    TokenFileReadOptions light;
    light.verify_checksum = false;
    light.verify_tokens = false;
    absl::StatusOr<TokenFileReader> r = TokenFileReader::Open(job.output_abs, light);
    if (!r.ok()) return r.status();
    if (r->n_docs() != rec.at("docs").get<int64_t>() || r->n_tokens() != rec.at("tokens").get<int64_t>() ||
        Hex64(*sum) != rec.at("checksum").get<std::string>() || r->tokenizer_name() != tokenizer) {
      return absl::DataLossError("the token file does not match its shard record");
    }
    out->docs = r->n_docs();
    out->tokens = r->n_tokens();
    out->checksum = *sum;
    out->stats = std::move(*stats);
  } catch (const nlohmann::json::exception& e) {
    return absl::DataLossError(absl::StrCat(job.record_abs, ": ", e.what()));
  }
  return absl::OkStatus();
}

// Removes tmp files a killed run left beside an output.
void RemoveStaleTmpFiles(const ShardJob& job) {
  const fs::path dir = fs::path(job.output_abs).parent_path();
  const std::string base = fs::path(job.output_abs).filename().string();
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind(base + ".tmp.", 0) == 0 || name.rfind(base + ".json.tmp.", 0) == 0) {
      fs::remove(it->path(), ec);
    }
  }
}

struct Progress {
  std::atomic<int64_t> shards_done{0}, resumed{0}, docs{0}, tokens{0}, bytes{0};
};

absl::Status TokenizeOne(const ShardJob& job, const Tokenizer& tok, const TokenizeShardsOptions& o,
                         const nlohmann::json& reader_settings, Progress* progress, ShardOutcome* out) {
  RemoveStaleTmpFiles(job);
  const SourceId id = StatSource(job.source);
  ShardReader reader({job.source}, o.reader);
  TokenFileWriter writer;
  absl::Status st = writer.Open(job.output_abs, tok.vocab_size(), tok.name());
  if (!st.ok()) return st;
  const int32_t eos = tok.eos_id();
  ShardDocument doc;
  int64_t bytes_seen = 0;
  while (reader.Next(&doc)) {
    std::vector<int32_t> ids = tok.Encode(doc.text);
    ids.push_back(eos);
    st = writer.AddDocument(ids);
    if (!st.ok()) {
      return absl::Status(st.code(), absl::StrCat(job.source, ":", doc.line, ": ", st.message()));
    }
    progress->docs.fetch_add(1, std::memory_order_relaxed);
    progress->tokens.fetch_add(static_cast<int64_t>(ids.size()), std::memory_order_relaxed);
    const int64_t b = reader.stats().uncompressed_bytes;
    progress->bytes.fetch_add(b - bytes_seen, std::memory_order_relaxed);
    bytes_seen = b;
  }
  progress->bytes.fetch_add(reader.stats().uncompressed_bytes - bytes_seen, std::memory_order_relaxed);
  if (reader.stats().files_failed > 0) {
    const std::string why = reader.problems().empty() ? std::string("I/O error") : reader.problems().back().detail;
    return absl::DataLossError(absl::StrCat("reading shard ", job.source, ": ", why));
  }
  st = writer.Finish();
  if (!st.ok()) return st;
  absl::StatusOr<uint64_t> sum = ReadTokenFileChecksum(job.output_abs);
  if (!sum.ok()) return sum.status();
  out->docs = writer.n_docs();
  out->tokens = writer.n_tokens();
  out->checksum = *sum;
  out->stats = reader.stats();
  const nlohmann::json rec = {{"source", job.source},
                              {"source_bytes", id.size},
                              {"source_mtime_ns", id.mtime_ns},
                              {"output", job.output},
                              {"tokenizer", tok.name()},
                              {"vocab_size", tok.vocab_size()},
                              {"reader", reader_settings},
                              {"docs", out->docs},
                              {"tokens", out->tokens},
                              {"checksum", Hex64(*sum)},
                              {"stats", out->stats.ToJson()}};
  return WriteFileAtomically(job.record_abs, rec.dump(1) + "\n");
}

std::string Human(double v) {
  if (v >= 1e9) return absl::StrFormat("%.2fG", v / 1e9);
  if (v >= 1e6) return absl::StrFormat("%.2fM", v / 1e6);
  if (v >= 1e3) return absl::StrFormat("%.1fk", v / 1e3);
  return absl::StrFormat("%.0f", v);
}

}  // namespace

absl::StatusOr<TokenizeShardsResult> TokenizeShards(const TokenizeShardsOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  if (o.out_dir.empty()) return absl::InvalidArgumentError("tokenize: no output directory");
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok0 = MakeTokenizer(o.tokenizer);
  if (!tok0.ok()) return tok0.status();
  const std::string tok_name = (*tok0)->name();
  const int64_t vocab = (*tok0)->vocab_size();
  const int32_t eos_id = (*tok0)->eos_id();
  absl::StatusOr<std::vector<ShardJob>> jobs = PlanJobs(o);
  if (!jobs.ok()) return jobs.status();
  const size_t n = jobs->size();
  std::error_code ec;
  for (const ShardJob& j : *jobs) {
    fs::create_directories(fs::path(j.output_abs).parent_path(), ec);
    if (ec) return absl::InternalError(absl::StrCat("creating ", fs::path(j.output_abs).parent_path().string(),
                                                    ": ", ec.message()));
  }
  // A manifest from an earlier run describes outputs this run may replace.
  const std::string manifest_path = (fs::path(o.out_dir) / kTokenizeManifestName).string();
  fs::remove(manifest_path, ec);

  const nlohmann::json reader_settings = ReaderSettingsJson(o.reader);
  std::vector<ShardOutcome> outcomes(n);
  std::vector<absl::Status> statuses(n);
  Progress progress;
  std::atomic<size_t> next{0};
  const int threads = static_cast<int>(std::clamp<size_t>(
      o.threads > 0 ? static_cast<size_t>(o.threads) : std::max(1u, std::thread::hardware_concurrency()), 1, n));

  auto worker = [&](Tokenizer* tok) {
    for (size_t i = next.fetch_add(1); i < n; i = next.fetch_add(1)) {
      const ShardJob& job = (*jobs)[i];
      ShardOutcome& out = outcomes[i];
      out.source = job.source;
      out.output = job.output;
      absl::Status r = CheckResumable(job, tok_name, vocab, reader_settings, &out);
      if (r.ok()) {
        out.resumed = true;
        progress.resumed.fetch_add(1);
        progress.docs.fetch_add(out.docs);
        progress.tokens.fetch_add(out.tokens);
      } else {
        if (!absl::IsNotFound(r)) LOG(INFO) << "tokenize: redoing " << job.output << ": " << r.message();
        statuses[i] = TokenizeOne(job, *tok, o, reader_settings, &progress, &out);
      }
      progress.shards_done.fetch_add(1);
    }
  };

  // Progress line: redrawn in place on a terminal, a line every 10 s otherwise.
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  const bool tty = ::isatty(2) != 0;
  auto print_progress = [&](bool final) {
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    // ETA: the shards left at this run's mean seconds per tokenized (not resumed) shard.
    const int64_t done_now = progress.shards_done.load(), fresh = done_now - progress.resumed.load();
    const std::string eta = done_now >= static_cast<int64_t>(n) ? "done"
                            : fresh > 0 ? absl::StrFormat("%.0fs", secs / fresh * (static_cast<int64_t>(n) - done_now))
                                        : "?";
    const std::string line = absl::StrFormat(
        "tokenize: %d/%d shards (%d resumed) | %s docs | %s tokens | %.1f MB/s | %.0fs elapsed | ETA %s",
        done_now, n, progress.resumed.load(), Human(progress.docs.load()),
        Human(progress.tokens.load()), secs > 0 ? progress.bytes.load() / 1e6 / secs : 0.0, secs, eta);
    std::fprintf(stderr, tty ? "\r%s\033[K%s" : "%s%s", line.c_str(), final || !tty ? "\n" : "");
    std::fflush(stderr);
  };
  std::thread monitor;
  if (o.progress) {
    monitor = std::thread([&] {
      std::unique_lock<std::mutex> lock(mu);
      while (!cv.wait_for(lock, std::chrono::milliseconds(tty ? 250 : 10000), [&] { return done; })) {
        print_progress(false);
      }
    });
  }

  {
    std::vector<std::unique_ptr<Tokenizer>> toks;
    toks.push_back(std::move(*tok0));
    for (int t = 1; t < threads; ++t) {
      absl::StatusOr<std::unique_ptr<Tokenizer>> tk = MakeTokenizer(o.tokenizer);
      if (!tk.ok()) return tk.status();
      toks.push_back(std::move(*tk));
    }
    std::vector<std::thread> pool;
    for (int t = 1; t < threads; ++t) pool.emplace_back(worker, toks[t].get());
    worker(toks[0].get());
    for (std::thread& th : pool) th.join();
  }
  if (monitor.joinable()) {
    {
      std::lock_guard<std::mutex> lock(mu);
      done = true;
    }
    cv.notify_all();
    monitor.join();
    print_progress(true);
  }

  std::string failures;
  int n_failed = 0;
  for (size_t i = 0; i < n; ++i) {
    if (statuses[i].ok()) continue;
    if (++n_failed <= 5) absl::StrAppend(&failures, "\n  ", statuses[i].message());
  }
  if (n_failed > 0) {
    return absl::DataLossError(absl::StrCat("tokenize: ", n_failed, " of ", n,
                                            " shards failed (completed shards are kept; re-run to resume):",
                                            failures));
  }

  TokenizeShardsResult result;
  nlohmann::json shards = nlohmann::json::array();
  for (ShardOutcome& s : outcomes) {
    result.totals.Add(s.stats);
    result.docs += s.docs;
    result.tokens += s.tokens;
    result.resumed += s.resumed ? 1 : 0;
    shards.push_back({{"source", s.source},
                      {"output", s.output},
                      {"docs", s.docs},
                      {"tokens", s.tokens},
                      {"checksum", Hex64(s.checksum)},
                      {"stats", s.stats.ToJson()}});
  }
  const nlohmann::json manifest = {
      {"format", "longctx tokenized shards 1"},
      {"tokenizer", tok_name},
      {"vocab_size", vocab},
      {"eos_id", eos_id},
      {"reader", reader_settings},
      {"shards", std::move(shards)},
      {"totals",
       {{"shards", n}, {"docs", result.docs}, {"tokens", result.tokens}, {"stats", result.totals.ToJson()}}}};
  absl::Status st = WriteFileAtomically(manifest_path, manifest.dump(1) + "\n");
  if (!st.ok()) return st;
  result.shards = std::move(outcomes);
  result.manifest_path = manifest_path;
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return result;
}

}  // namespace longctx
