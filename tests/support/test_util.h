// Why: helpers shared by integration tests: fresh temp dirs, running the
// longctx binary as a subprocess, a small real-text corpus, and the fixture
// and command line of the tests that train the tiny model on it, so that
// setup is written once (it was copied into every such test).
#ifndef LONGCTX_TESTS_SUPPORT_TEST_UTIL_H_
#define LONGCTX_TESTS_SUPPORT_TEST_UTIL_H_

#include <signal.h>
#include <sys/resource.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

// Substring check that prints the whole message on failure.
#define EXPECT_HAS(msg, sub)                                              \
  EXPECT_NE(std::string(msg).find(std::string(sub)), std::string::npos) \
      << "message: " << (msg) << "\nwanted: " << (sub)

namespace longctx::testing {

// A new empty directory under /tmp, removed by the destructor.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// For its lifetime a write past `bytes` of any file fails with EFBIG, like a
// full disk: RLIMIT_FSIZE's soft limit, with SIGXFSZ ignored so the write fails
// instead of killing the process. The destructor restores both. ok(): both set.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(int64_t bytes);
  ~FileSizeLimit();
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;
  bool ok() const { return limit_set_; }

 private:
  bool signal_set_ = false;
  bool limit_set_ = false;
  struct rlimit old_limit_ {};
  struct sigaction old_sigxfsz_ {};
};

struct CommandResult {
  int exit_code = -1;  // -1 when killed by a signal
  std::string output;  // stdout and stderr together
};
// Runs `command` with /bin/sh, capturing stdout+stderr.
CommandResult RunCommand(const std::string& command);

// Path of the built longctx binary.
std::string LongctxBinary();
std::string SourcePath(const std::string& relative);

// Writes `docs` text files of varied English-like prose into dir (deterministic).
void WriteTextCorpus(const std::string& dir, int docs, int seed);

// WriteTextCorpus into text_dir, then tokenizes it with the byte tokenizer into
// the token file token_path (what the integration tests train on).
absl::Status WriteByteTokenCorpus(const std::string& text_dir, const std::string& token_path, int docs, int seed);

// `command` with `flags` (space-separated --name=value or --name value words)
// put in: one that the command already has replaces it in place, the others
// are appended. longctx refuses a flag given twice, so a test that varies a
// base command goes through this instead of appending. No quoting: paths
// must not hold spaces.
std::string WithFlags(const std::string& command, const std::string& flags);

// `longctx train` of configs/tiny-test.textproto (the integration tests'
// model) on the token file `data` into out_dir with one thread, then `extra`
// (more flags; one of the above given again replaces it: WithFlags).
std::string TinyTrainCommand(const std::string& data, const std::string& out_dir, const std::string& extra);

// Fixture of the tests that train the tiny model: a fresh temp dir tmp_ and in
// it the byte-token corpus data_ (WriteByteTokenCorpus of `docs` documents
// from `seed`), written by SetUp; a derived SetUp calls this one first.
class TinyCorpusTest : public ::testing::Test {
 protected:
  explicit TinyCorpusTest(int docs = 120, int seed = 11) : docs_(docs), seed_(seed) {}
  void SetUp() override;

  TempDir tmp_;
  std::string data_ = tmp_ / "corpus.ltok";

 private:
  int docs_;
  int seed_;
};

// The records of one kind ("train", "eval", "probe", "posfreq", ...) of a
// run's metrics.jsonl, in file order.
std::vector<nlohmann::json> MetricsEvents(const std::string& metrics_path, const std::string& kind);
// step -> loss of the "train" records (the last record of a step wins).
std::map<int, double> TrainLosses(const std::string& metrics_path);

std::string ReadFile(const std::string& path);
void WriteFile(const std::string& path, const std::string& contents);

}  // namespace longctx::testing

#endif  // LONGCTX_TESTS_SUPPORT_TEST_UTIL_H_
