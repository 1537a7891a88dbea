// Why: the default corpus replaces a Python de-tagger and feeds the demo; it
// must de-tag the Brown corpus exactly as the old script did (expected strings
// below were produced by scripts/brown_to_text.py before it was removed), turn
// man pages and package docs into clean text, say what it left out, and write
// SlimPajama-layout shards that the shard reader reads back in full and that
// are byte-identical when rebuilt.
#include "data/corpus_builder.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/shard_reader.h"
#include "gtest/gtest.h"
#include "tests/support/test_util.h"

namespace longctx {
namespace {
namespace fs = std::filesystem;
using ::longctx::testing::ReadFile;
using ::longctx::testing::RunCommand;
using ::longctx::testing::TempDir;
using ::longctx::testing::WriteFile;

TEST(BrownDetagTest, MatchesThePythonScript) {
  EXPECT_EQ(DetagBrownLine("The/at Fulton/np-tl County/nn-tl said/vbd ``/`` no/at evidence/nn ''/'' ./."),
            "The Fulton County said \"no evidence\".");
  EXPECT_EQ(DetagBrownLine("\tHe/pps said/vbd (/( and/cc I/ppss quote/vb )/) it/pps's/bez 1/2/cd ;/. yes/rb !/. "
                           "what/wdt ?/. no/rb :/: the/at boy/nn 's/$ end/nn '/' x"),
            "He said (and I quote) it/pps's 1/2; yes! what? no: the boy's end' x");
  EXPECT_EQ(DetagBrownLine("plain words without tags , and/cc a/at slash/ at/in end/nn"),
            "plain words without tags, and a slash at end");
  EXPECT_EQ(DetagBrownLine("   \t "), "");
  EXPECT_EQ(DetagBrownSample("\n\n\tA/at b/nn ./.\n\n\n\tC/np d/vb ./.\n   \n"), "A b.\n\nC d.\n");
  EXPECT_EQ(DetagBrownSample("x/nn \xff/nn"), "x \xEF\xBF\xBD\n");
}

TEST(CleanRenderedManPageTest, RemovesOverstrikesAndSqueezesBlankLines) {
  EXPECT_EQ(CleanRenderedManPage("\n\nN\bNA\bAM\bME\bE  \n\n\n\n       _\bl_\bs - list   \n\n"),
            "NAME\n\n       ls - list\n");
  EXPECT_EQ(CleanRenderedManPage("\xC3\xA9\bx\n"), "x\n");  // a backspace removes a whole UTF-8 character
}

TEST(BrownCorpusTest, ReadsSamplesInNameOrder) {
  TempDir tmp;
  WriteFile(tmp / "cb02", "\tSecond/od sample/nn ./.\n");
  WriteFile(tmp / "ca01", "\tFirst/od sample/nn ./.\n\n\tMore/ap ./.\n");
  WriteFile(tmp / "README", "not a sample");
  WriteFile(tmp / "cats.txt", "ca01 news");
  absl::StatusOr<std::vector<CorpusDocument>> docs = ReadBrownCorpus(tmp.path());
  ASSERT_TRUE(docs.ok()) << docs.status();
  ASSERT_EQ(docs->size(), 2u);
  EXPECT_EQ((*docs)[0].source, "brown/ca01");
  EXPECT_EQ((*docs)[0].text, "First sample.\n\nMore.\n");
  EXPECT_EQ((*docs)[1].set, kBrownSetName);
  EXPECT_TRUE(absl::IsNotFound(ReadBrownCorpus(tmp / "none").status()));
}

// Real Debian files, listed by a fake dpkg info directory.
constexpr char kCopyright[] = "/usr/share/doc/coreutils/copyright";
constexpr char kChangelog[] = "/usr/share/doc/coreutils/changelog.Debian.gz";
constexpr char kReadme[] = "/usr/share/doc/grep/README";
constexpr char kLsPage[] = "/usr/share/man/man1/ls.1.gz";
constexpr char kCatPage[] = "/usr/share/man/man1/cat.1.gz";

class CorpusBuildTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* f : {kCopyright, kChangelog, kReadme, kLsPage, kCatPage}) {
      if (!fs::is_regular_file(f)) GTEST_SKIP() << f << " is not installed here";
    }
    if (RunCommand("groff -v").exit_code != 0) GTEST_SKIP() << "groff is not installed";
    fs::create_directories(tmp_ / "info");
    WriteFile(tmp_ / "info/fakea.list", std::string("/.\n/usr/share/doc/coreutils\n") + kCopyright + "\n" +
                                            kChangelog + "\n/usr/share/doc/coreutils/NEWS.gz\n" + kLsPage + "\n" +
                                            kCatPage + "\n");
    WriteFile(tmp_ / "info/fakeb:amd64.list", std::string(kReadme) + "\n" + kCopyright + "\n");
    fs::create_directories(tmp_ / "brown");
    WriteFile(tmp_ / "brown/ca01", "\tFirst/od sample/nn ./.\n");
    WriteFile(tmp_ / "brown/ca02", "\tSecond/od sample/nn ./.\n");
    WriteFile(tmp_ / "brown/cr09", "\tThird/od sample/nn ./.\n");
  }
  CorpusBuildOptions Options(const std::string& out) const {
    CorpusBuildOptions o;
    o.out_dir = out;
    o.brown_dir = tmp_ / "brown";
    o.packages = {"fakea", "nosuchpkg", "fakeb"};
    o.dpkg_info_dir = tmp_ / "info";
    o.man_budget_bytes = 1 << 20;
    o.docs_budget_bytes = 8 << 20;
    o.shard_bytes = 8 << 10;
    o.chunks = 2;
    o.threads = 2;
    return o;
  }
  TempDir tmp_;
};

TEST_F(CorpusBuildTest, WritesSlimPajamaLayoutThatReadsBackCompletely) {
  ::testing::internal::CaptureStderr();
  absl::StatusOr<CorpusBuildSummary> s = BuildDefaultCorpus(Options(tmp_ / "out"));
  const std::string log = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(s.ok()) << s.status() << "\n" << log;
  EXPECT_EQ(s->missing_packages, std::vector<std::string>{"nosuchpkg"});
  EXPECT_NE(log.find("nosuchpkg"), std::string::npos);
  EXPECT_EQ(s->sets.at(kBrownSetName).docs, 3);
  EXPECT_EQ(s->sets.at(kManPagesSetName).docs, 2);
  EXPECT_EQ(s->sets.at(kDebianDocsSetName).docs, 3);  // copyright once, changelog, README; NEWS not taken
  EXPECT_EQ(s->docs, 8);
  EXPECT_GE(s->shards.size(), 2u);
  EXPECT_EQ(s->shards[0], "train/chunk1/example_train_0.jsonl.zst");
  EXPECT_EQ(s->shards[1], "train/chunk2/example_train_0.jsonl.zst");
  EXPECT_TRUE(fs::exists(tmp_ / "out/corpus.json"));

  absl::StatusOr<std::vector<std::string>> files = ListShardFiles({tmp_ / "out/train"});
  ASSERT_TRUE(files.ok());
  EXPECT_EQ(files->size(), s->shards.size());
  ShardReader reader(*files);
  std::map<std::string, std::string> by_source;
  std::map<std::string, int> per_set;
  ShardDocument d;
  while (reader.Next(&d)) {
    ++per_set[std::string(d.set_name)];
    by_source[std::string(d.path) + "#" + std::to_string(d.line)] = std::string(d.text);
    if (d.text.find("ls - list directory contents") != std::string_view::npos) {
      EXPECT_EQ(d.set_name, kManPagesSetName);
      EXPECT_EQ(d.text.find('\b'), std::string_view::npos);
      EXPECT_EQ(d.text.find("\n\n\n"), std::string_view::npos);
      EXPECT_NE(d.text.find("\n       -a, --all\n"), std::string_view::npos) << d.text.substr(0, 600);
    }
    if (d.set_name == kDebianDocsSetName && d.text.rfind("coreutils (", 0) == 0) {
      EXPECT_NE(d.text.find(" -- "), std::string_view::npos);  // a gunzipped Debian changelog
    }
  }
  EXPECT_EQ(reader.stats().problems(), 0);
  EXPECT_EQ(reader.stats().docs, 8);
  EXPECT_EQ(per_set[kBrownSetName], 3);
  EXPECT_EQ(per_set[kManPagesSetName], 2);
  EXPECT_EQ(per_set[kDebianDocsSetName], 3);
  bool found_copyright = false;
  for (const auto& [k, text] : by_source) found_copyright |= text == ReadFile(kCopyright);
  EXPECT_TRUE(found_copyright);

  // Rebuilding gives identical bytes; building over a corpus is refused.
  ::testing::internal::CaptureStderr();
  absl::StatusOr<CorpusBuildSummary> again = BuildDefaultCorpus(Options(tmp_ / "out2"));
  absl::StatusOr<CorpusBuildSummary> over = BuildDefaultCorpus(Options(tmp_ / "out"));
  ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(again.ok());
  for (const std::string& rel : s->shards) {
    EXPECT_EQ(ReadFile(tmp_ / "out/" + rel), ReadFile(tmp_ / "out2/" + rel)) << rel;
  }
  EXPECT_EQ(ReadFile(tmp_ / "out/corpus.json"), ReadFile(tmp_ / "out2/corpus.json"));
  EXPECT_TRUE(absl::IsFailedPrecondition(over.status())) << over.status();
}

TEST_F(CorpusBuildTest, BudgetsBoundTheSelectionAndAnEmptySourceFails) {
  CorpusBuildOptions o = Options(tmp_ / "small");
  // The budget counts roff source bytes: room for the larger page alone, so
  // whichever comes first in hash order is taken and the other is not.
  const int64_t ls = std::stoll(RunCommand(std::string("zcat ") + kLsPage + " | wc -c").output);
  const int64_t cat = std::stoll(RunCommand(std::string("zcat ") + kCatPage + " | wc -c").output);
  o.man_budget_bytes = std::max(ls, cat);
  ::testing::internal::CaptureStderr();
  absl::StatusOr<CorpusBuildSummary> s = BuildDefaultCorpus(o);
  ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->sets.at(kManPagesSetName).candidates, 2);
  EXPECT_EQ(s->sets.at(kManPagesSetName).docs, 1);
  EXPECT_EQ(s->sets.at(kManPagesSetName).over_budget, 1);

  CorpusBuildOptions none = Options(tmp_ / "none");
  none.docs_budget_bytes = 10;  // smaller than any document
  ::testing::internal::CaptureStderr();
  absl::StatusOr<CorpusBuildSummary> empty = BuildDefaultCorpus(none);
  ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(absl::IsNotFound(empty.status())) << empty.status();
  EXPECT_NE(empty.status().message().find(kDebianDocsSetName), std::string_view::npos);
}

}  // namespace
}  // namespace longctx
