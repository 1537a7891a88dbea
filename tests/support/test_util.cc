// Why: see test_util.h.
#include "tests/support/test_util.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "data/text_corpus.h"
#include "data/byte_tokenizer.h"

namespace longctx::testing {

TempDir::TempDir() {
  char tmpl[] = "/tmp/longctx-test-XXXXXX";
  char* p = mkdtemp(tmpl);
  if (p == nullptr) std::abort();
  path_ = p;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

FileSizeLimit::FileSizeLimit(int64_t bytes) {
  if (getrlimit(RLIMIT_FSIZE, &old_limit_) != 0) return;
  struct sigaction ign {};
  ign.sa_handler = SIG_IGN;
  if (sigaction(SIGXFSZ, &ign, &old_sigxfsz_) != 0) return;
  signal_set_ = true;
  struct rlimit lim = old_limit_;
  lim.rlim_cur = static_cast<rlim_t>(bytes);
  limit_set_ = setrlimit(RLIMIT_FSIZE, &lim) == 0;
}

FileSizeLimit::~FileSizeLimit() {
  if (limit_set_) setrlimit(RLIMIT_FSIZE, &old_limit_);
  if (signal_set_) sigaction(SIGXFSZ, &old_sigxfsz_, nullptr);
}

CommandResult RunCommand(const std::string& command) {
  CommandResult r;
  FILE* f = popen((command + " 2>&1").c_str(), "r");
  if (f == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), f)) > 0) r.output.append(buf, n);
  int status = pclose(f);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string LongctxBinary() { return std::string(LONGCTX_BINARY_DIR) + "/bin/longctx"; }
std::string SourcePath(const std::string& relative) { return std::string(LONGCTX_SOURCE_DIR) + "/" + relative; }

void WriteTextCorpus(const std::string& dir, int docs, int seed) {
  static const char* kWords[] = {
      "the",    "jury",   "said",     "that",   "city",   "election", "was",    "conducted", "with",  "care",
      "report", "county", "of",       "a",      "new",    "law",      "and",    "it",        "is",    "in",
      "house",  "river",  "morning",  "people", "found",  "money",    "school", "water",     "year",  "long",
      "short",  "they",   "would",    "not",    "agree",  "because",  "evening", "music",    "road",  "north"};
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> word(0, sizeof(kWords) / sizeof(kWords[0]) - 1);
  std::uniform_int_distribution<int> sentence_len(4, 14);
  std::geometric_distribution<int> doc_sentences(0.08);
  std::filesystem::create_directories(dir);
  for (int d = 0; d < docs; ++d) {
    std::ostringstream os;
    const int sentences = 1 + doc_sentences(rng);
    for (int s = 0; s < sentences; ++s) {
      const int len = sentence_len(rng);
      for (int w = 0; w < len; ++w) {
        std::string t = kWords[word(rng)];
        if (w == 0) t[0] = static_cast<char>(std::toupper(t[0]));
        os << t << (w + 1 < len ? " " : ". ");
      }
      if (s % 5 == 4) os << "\n\n";
    }
    WriteFile(dir + "/doc" + std::to_string(d) + ".txt", os.str() + "\n");
  }
}

namespace {

// The words of s, split on runs of spaces.
std::vector<std::string> Words(const std::string& s) {
  std::vector<std::string> words;
  for (absl::string_view w : absl::StrSplit(s, ' ', absl::SkipEmpty())) words.emplace_back(w);
  return words;
}

// "--name" of a flag word ("--name=value" or "--name"), or "" for a value.
std::string FlagName(const std::string& word) {
  if (word.rfind("-", 0) != 0 || word == "-" || word == "--") return "";
  return word.substr(0, word.find('='));
}

}  // namespace

std::string WithFlags(const std::string& command, const std::string& flags) {
  std::vector<std::string> out = Words(command);
  const std::vector<std::string> add = Words(flags);
  for (size_t i = 0; i < add.size(); ++i) {
    std::vector<std::string> flag = {add[i]};
    if (add[i].find('=') == std::string::npos && i + 1 < add.size() && FlagName(add[i + 1]).empty())
      flag.push_back(add[++i]);  // --name value
    const std::string name = FlagName(flag[0]);
    size_t at = out.size();
    for (size_t j = 0; j < out.size() && !name.empty(); ++j)
      if (FlagName(out[j]) == name) at = j;
    if (at == out.size()) {
      out.insert(out.end(), flag.begin(), flag.end());
      continue;
    }
    size_t n = 1;  // the old flag's words: "--name value" is two
    if (out[at].find('=') == std::string::npos && at + 1 < out.size() && FlagName(out[at + 1]).empty()) n = 2;
    out.erase(out.begin() + at, out.begin() + at + n);
    out.insert(out.begin() + at, flag.begin(), flag.end());
  }
  return absl::StrJoin(out, " ");
}

std::string TinyTrainCommand(const std::string& data, const std::string& out_dir, const std::string& extra) {
  return WithFlags(absl::StrCat(LongctxBinary(), " train --config ", SourcePath("configs/tiny-test.textproto"),
                                " --data.path=", data, " --out_dir=", out_dir, " --threads=1"),
                   extra);
}

void TinyCorpusTest::SetUp() { ASSERT_TRUE(WriteByteTokenCorpus(tmp_ / "text", data_, docs_, seed_).ok()); }

absl::Status WriteByteTokenCorpus(const std::string& text_dir, const std::string& token_path, int docs, int seed) {
  WriteTextCorpus(text_dir, docs, seed);
  ByteTokenizer tok;
  TextCorpusOptions opts;
  opts.log_summary = false;
  return BuildTokenFileFromText({text_dir}, tok, token_path, opts);
}

std::vector<nlohmann::json> MetricsEvents(const std::string& metrics_path, const std::string& kind) {
  std::vector<nlohmann::json> out;
  for (absl::string_view line : absl::StrSplit(ReadFile(metrics_path), '\n', absl::SkipEmpty())) {
    nlohmann::json j = nlohmann::json::parse(line);
    if (j["kind"] == kind) out.push_back(std::move(j));
  }
  return out;
}

std::map<int, double> TrainLosses(const std::string& metrics_path) {
  std::map<int, double> out;
  for (const nlohmann::json& j : MetricsEvents(metrics_path, "train")) out[j["step"].get<int>()] = j["loss"].get<double>();
  return out;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteFile(const std::string& path, const std::string& contents) {
  std::ofstream out(path, std::ios::binary);
  out << contents;
}

}  // namespace longctx::testing
