// Why: helpers shared by integration tests: fresh temp dirs, running the
// longctx binary as a subprocess, a small real-text corpus.
#ifndef LONGCTX_TESTS_SUPPORT_TEST_UTIL_H_
#define LONGCTX_TESTS_SUPPORT_TEST_UTIL_H_

#include <string>
#include <vector>

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

std::string ReadFile(const std::string& path);
void WriteFile(const std::string& path, const std::string& contents);

}  // namespace longctx::testing

#endif  // LONGCTX_TESTS_SUPPORT_TEST_UTIL_H_
