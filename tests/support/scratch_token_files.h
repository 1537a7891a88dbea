// Why: the packer tests each need a scratch directory of small token files
// whose every token says where it came from, opened as readers the packer
// reads; one fixture writes them (and removes the directory), so each test
// only says which tokens its documents hold.
#ifndef LONGCTX_TESTS_SUPPORT_SCRATCH_TOKEN_FILES_H_
#define LONGCTX_TESTS_SUPPORT_SCRATCH_TOKEN_FILES_H_

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "data/token_file.h"

namespace longctx::testing {

// A fresh directory under the system temp dir, named after `prefix`, the
// process and the running GoogleTest test; removed with the object.
class ScratchTokenFiles {
 public:
  explicit ScratchTokenFiles(const std::string& prefix);
  ~ScratchTokenFiles();
  ScratchTokenFiles(const ScratchTokenFiles&) = delete;
  ScratchTokenFiles& operator=(const ScratchTokenFiles&) = delete;

  // Writes one token file of documents (vocabulary `vocab`), opens it and
  // keeps the reader for the object's lifetime. Failures are test failures.
  const TokenFileReader& Add(const std::vector<std::vector<int32_t>>& documents, int64_t vocab);
  const std::filesystem::path& dir() const { return dir_; }

 private:
  std::filesystem::path dir_;
  std::vector<std::unique_ptr<TokenFileReader>> files_;
};

// Documents of the given lengths whose token p of document d is token(d, p).
std::vector<std::vector<int32_t>> DocumentsOfLengths(const std::vector<int>& lengths,
                                                     const std::function<int32_t(size_t, int)>& token);

}  // namespace longctx::testing

#endif  // LONGCTX_TESTS_SUPPORT_SCRATCH_TOKEN_FILES_H_
