// Why: see scratch_token_files.h.
#include "tests/support/scratch_token_files.h"

#include <unistd.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace longctx::testing {

namespace fs = std::filesystem;

ScratchTokenFiles::ScratchTokenFiles(const std::string& prefix) {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  dir_ = fs::temp_directory_path() /
         absl::StrCat(prefix, "_", ::getpid(), "_", info != nullptr ? info->name() : "no_test");
  fs::remove_all(dir_);
  fs::create_directories(dir_);
}

ScratchTokenFiles::~ScratchTokenFiles() {
  files_.clear();
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

const TokenFileReader& ScratchTokenFiles::Add(const std::vector<std::vector<int32_t>>& documents, int64_t vocab) {
  const std::string path = (dir_ / absl::StrCat("f", files_.size(), ".ltok")).string();
  TokenFileWriter w;
  EXPECT_TRUE(w.Open(path, vocab, "test").ok());
  for (const std::vector<int32_t>& ids : documents) EXPECT_TRUE(w.AddDocument(ids).ok());
  EXPECT_TRUE(w.Finish().ok());
  absl::StatusOr<TokenFileReader> r = TokenFileReader::Open(path);
  EXPECT_TRUE(r.ok()) << r.status();
  files_.push_back(std::make_unique<TokenFileReader>(std::move(*r)));
  return *files_.back();
}

std::vector<std::vector<int32_t>> DocumentsOfLengths(const std::vector<int>& lengths,
                                                     const std::function<int32_t(size_t, int)>& token) {
  std::vector<std::vector<int32_t>> docs(lengths.size());
  for (size_t d = 0; d < lengths.size(); ++d) {
    docs[d].resize(lengths[d]);
    for (int p = 0; p < lengths[d]; ++p) docs[d][p] = token(d, p);
  }
  return docs;
}

}  // namespace longctx::testing
