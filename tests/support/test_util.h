// Why: helpers shared by integration tests: fresh temp dirs, running the
// longctx binary as a subprocess, a small real-text corpus.
#ifndef LONGCTX_TESTS_SUPPORT_TEST_UTIL_H_
#define LONGCTX_TESTS_SUPPORT_TEST_UTIL_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"

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

// The records of one kind ("train", "eval", "probe", "posfreq", ...) of a
// run's metrics.jsonl, in file order.
std::vector<nlohmann::json> MetricsEvents(const std::string& metrics_path, const std::string& kind);
// step -> loss of the "train" records (the last record of a step wins).
std::map<int, double> TrainLosses(const std::string& metrics_path);

std::string ReadFile(const std::string& path);
void WriteFile(const std::string& path, const std::string& contents);

}  // namespace longctx::testing

#endif  // LONGCTX_TESTS_SUPPORT_TEST_UTIL_H_
