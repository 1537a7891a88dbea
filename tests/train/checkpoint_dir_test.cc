// Why: resuming trusts whatever FindLatestCheckpoint returns, so these tests
// pin the protocol: only a committed directory (with its COMPLETE marker) ever
// appears under its step name, an abandoned writer leaves nothing behind,
// re-committing a step replaces it whole, and pruning keeps the newest N while
// clearing the debris of dead processes.
#include "train/checkpoint/checkpoint_dir.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/support/test_util.h"

namespace longctx {
namespace {

namespace fs = std::filesystem;

class CheckpointDirTest : public ::testing::Test {
 protected:

  std::set<std::string> Listing(const std::string& dir) const {
    std::set<std::string> names;
    if (!fs::exists(dir)) return names;
    for (const auto& e : fs::directory_iterator(dir)) names.insert(e.path().filename().string());
    return names;
  }
  static void WriteText(const std::string& path, const std::string& text) {
    std::ofstream(path) << text;
  }
  static std::string ReadText(const std::string& path) {
    absl::StatusOr<std::string> s = ReadFileToString(path);
    if (s.ok()) return *s;
    return absl::StrCat("<", s.status().message(), ">");
  }
  // A committed checkpoint at `step` holding one file "w" with `text`.
  void Commit(int64_t step, const std::string& text = "w") {
    absl::StatusOr<CheckpointDirWriter> w = CheckpointDirWriter::Begin(out_, step);
    ASSERT_TRUE(w.ok()) << w.status();
    WriteText(w->path("w"), text);
    ASSERT_TRUE(w->Commit().ok());
  }
  // A pid that certainly belonged to a process that has exited.
  static pid_t DeadPid() {
    const pid_t pid = fork();
    if (pid == 0) _exit(0);
    int status;
    waitpid(pid, &status, 0);
    return pid;
  }

  ::longctx::testing::TempDir tmp_;
  std::string root_ = tmp_.path();
  std::string out_ = root_ + "/run";
};

TEST(CheckpointDirNameTest, NamesAndSteps) {
  EXPECT_EQ(CheckpointDirName(120), "step-00000120");
  EXPECT_EQ(CheckpointDirName(0), "step-00000000");
  EXPECT_EQ(CheckpointDirName(123456789), "step-123456789");
  EXPECT_EQ(StepOfCheckpointDir("step-00000120"), 120);
  EXPECT_EQ(StepOfCheckpointDir("/a/b/step-00000120"), 120);
  EXPECT_EQ(StepOfCheckpointDir("/a/b/step-00000120/"), 120);
  EXPECT_EQ(StepOfCheckpointDir("step-00000000"), 0);
  EXPECT_EQ(StepOfCheckpointDir("step-123456789"), 123456789);
  EXPECT_EQ(StepOfCheckpointDir("step-120"), -1);
  EXPECT_EQ(StepOfCheckpointDir("step-000000120"), -1);  // non-canonical alias
  EXPECT_EQ(StepOfCheckpointDir(".tmp-step-00000120-77"), -1);
  EXPECT_EQ(StepOfCheckpointDir("step-0000012x"), -1);
  EXPECT_EQ(StepOfCheckpointDir("step--0000120"), -1);
  EXPECT_EQ(StepOfCheckpointDir("Step-00000120"), -1);
  EXPECT_EQ(StepOfCheckpointDir("step-00000120.bak"), -1);
  EXPECT_EQ(StepOfCheckpointDir(""), -1);
  EXPECT_EQ(StepOfCheckpointDir("/"), -1);
  EXPECT_EQ(StepOfCheckpointDir("step-9999999999999999999999"), -1);
}

TEST_F(CheckpointDirTest, BeginCommitCreatesStepDirWithMarker) {
  absl::StatusOr<CheckpointDirWriter> w = CheckpointDirWriter::Begin(out_, 120);
  ASSERT_TRUE(w.ok()) << w.status();
  const std::string tmp_name = absl::StrCat(".tmp-step-00000120-", getpid());
  EXPECT_EQ(w->tmp_dir(), out_ + "/" + tmp_name);
  EXPECT_EQ(w->final_dir(), out_ + "/step-00000120");
  EXPECT_EQ(w->path("model.safetensors"), w->tmp_dir() + "/model.safetensors");
  EXPECT_EQ(Listing(out_), std::set<std::string>{tmp_name});
  WriteText(w->path("model.safetensors"), "weights");
  ASSERT_EQ(mkdir(w->path("sub").c_str(), 0755), 0);
  WriteText(w->path("sub/state.json"), "{}");
  // Not visible before Commit.
  absl::StatusOr<std::optional<std::string>> latest = FindLatestCheckpoint(out_);
  ASSERT_TRUE(latest.ok());
  EXPECT_FALSE(latest->has_value());

  ASSERT_TRUE(w->Commit().ok());
  EXPECT_TRUE(w->committed());
  EXPECT_EQ(Listing(out_), std::set<std::string>{"step-00000120"});
  EXPECT_EQ(Listing(out_ + "/step-00000120"),
            (std::set<std::string>{"COMPLETE", "model.safetensors", "sub"}));
  EXPECT_EQ(ReadText(out_ + "/step-00000120/model.safetensors"), "weights");
  EXPECT_EQ(ReadText(out_ + "/step-00000120/sub/state.json"), "{}");
  EXPECT_EQ(ReadText(out_ + "/step-00000120/COMPLETE"), "step 120\n");
  EXPECT_EQ(w->path("x"), out_ + "/step-00000120/x");

  latest = FindLatestCheckpoint(out_);
  ASSERT_TRUE(latest.ok());
  ASSERT_TRUE(latest->has_value());
  EXPECT_EQ(**latest, out_ + "/step-00000120");
  EXPECT_EQ(StepOfCheckpointDir(**latest), 120);

  absl::Status again = w->Commit();
  EXPECT_EQ(again.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(fs::exists(out_ + "/step-00000120/COMPLETE"));  // untouched by the refusal
}

TEST_F(CheckpointDirTest, UncommittedWriterLeavesNothing) {
  {
    absl::StatusOr<CheckpointDirWriter> w = CheckpointDirWriter::Begin(out_, 7);
    ASSERT_TRUE(w.ok());
    WriteText(w->path("model.safetensors"), "half written");
    EXPECT_TRUE(fs::exists(w->tmp_dir()));
  }
  EXPECT_TRUE(fs::is_directory(out_));
  EXPECT_TRUE(Listing(out_).empty());
  absl::StatusOr<std::optional<std::string>> latest = FindLatestCheckpoint(out_);
  ASSERT_TRUE(latest.ok());
  EXPECT_FALSE(latest->has_value());
}

TEST_F(CheckpointDirTest, MovedWriterCleansUpOnceAndCommits) {
  absl::StatusOr<CheckpointDirWriter> w = CheckpointDirWriter::Begin(out_, 3);
  ASSERT_TRUE(w.ok());
  CheckpointDirWriter a = std::move(*w);
  CheckpointDirWriter b = std::move(a);
  EXPECT_TRUE(fs::exists(b.tmp_dir()));  // the moved-from writers removed nothing
  EXPECT_FALSE(a.Commit().ok());          // moved-from: refused
  WriteText(b.path("w"), "x");
  ASSERT_TRUE(b.Commit().ok());
  EXPECT_EQ(Listing(out_), std::set<std::string>{"step-00000003"});
}

TEST_F(CheckpointDirTest, BeginReplacesStaleTmpOfSameName) {
  const std::string stale = out_ + absl::StrCat("/.tmp-step-00000005-", getpid());
  fs::create_directories(stale);
  WriteText(stale + "/junk", "old");
  absl::StatusOr<CheckpointDirWriter> w = CheckpointDirWriter::Begin(out_, 5);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->tmp_dir(), stale);
  EXPECT_TRUE(Listing(stale).empty());
}

TEST_F(CheckpointDirTest, BeginAndCommitErrorsNamePaths) {
  WriteText(root_ + "/file", "not a dir");
  absl::StatusOr<CheckpointDirWriter> w = CheckpointDirWriter::Begin(root_ + "/file", 1);
  ASSERT_FALSE(w.ok());
  EXPECT_HAS(w.status().message(), root_ + "/file");
  EXPECT_FALSE(CheckpointDirWriter::Begin(out_, -1).ok());

  w = CheckpointDirWriter::Begin(out_, 9);
  ASSERT_TRUE(w.ok());
  fs::remove_all(w->tmp_dir());  // someone pulled the rug
  absl::Status st = w->Commit();
  ASSERT_FALSE(st.ok());
  EXPECT_HAS(st.message(), w->tmp_dir());
  EXPECT_HAS(st.message(), "No such file or directory");
  EXPECT_FALSE(fs::exists(out_ + "/step-00000009"));
}

TEST_F(CheckpointDirTest, FindLatestIgnoresIncompleteTmpAndJunk) {
  absl::StatusOr<std::optional<std::string>> latest = FindLatestCheckpoint(root_ + "/missing");
  ASSERT_TRUE(latest.ok());
  EXPECT_FALSE(latest->has_value());

  Commit(10);
  Commit(30);
  fs::create_directories(out_ + "/step-00000050");  // no marker: a crash, or not ours
  WriteText(out_ + "/step-00000050/w", "x");
  fs::create_directories(out_ + "/.tmp-step-00000090-1");
  WriteText(out_ + "/.tmp-step-00000090-1/COMPLETE", "");
  fs::create_directories(out_ + "/step-000000070");  // non-canonical alias
  WriteText(out_ + "/step-000000070/COMPLETE", "");
  fs::create_directories(out_ + "/step-40");
  WriteText(out_ + "/step-40/COMPLETE", "");
  WriteText(out_ + "/step-00000080", "a file, not a directory");
  fs::create_directories(out_ + "/step-00000060/COMPLETE");  // marker is a directory
  WriteText(out_ + "/notes.txt", "hello");

  latest = FindLatestCheckpoint(out_);
  ASSERT_TRUE(latest.ok()) << latest.status();
  ASSERT_TRUE(latest->has_value());
  EXPECT_EQ(**latest, out_ + "/step-00000030");
}

TEST_F(CheckpointDirTest, FindLatestComparesStepsNumerically) {
  Commit(99999999);
  Commit(100000000);  // 9 digits: sorts before 99999999 as a string
  absl::StatusOr<std::optional<std::string>> latest = FindLatestCheckpoint(out_);
  ASSERT_TRUE(latest.ok());
  ASSERT_TRUE(latest->has_value());
  EXPECT_EQ(**latest, out_ + "/step-100000000");
}

TEST_F(CheckpointDirTest, PruneKeepsNewestAndClearsDeadTmps) {
  for (int s : {1, 2, 3, 4, 5}) Commit(s * 100);
  fs::create_directories(out_ + "/step-00000050");  // incomplete: left alone
  const std::string dead = out_ + absl::StrCat("/.tmp-step-00000600-", DeadPid());
  const std::string dead_replaced =
      out_ + absl::StrCat("/.tmp-replaced-step-00000100-", DeadPid());
  const std::string alive = out_ + absl::StrCat("/.tmp-step-00000700-", getppid());
  // Our pid but no live writer: an earlier run's leftovers.
  const std::string mine_stale = out_ + absl::StrCat("/.tmp-step-00000800-", getpid());
  const std::string odd = out_ + "/.tmp-something";
  for (const std::string& d : {dead, dead_replaced, alive, mine_stale, odd}) {
    fs::create_directories(d);
    WriteText(d + "/f", "x");
  }

  // A writer in flight in this process: its tmp dir must survive pruning.
  absl::StatusOr<CheckpointDirWriter> active = CheckpointDirWriter::Begin(out_, 900);
  ASSERT_TRUE(active.ok());
  WriteText(active->path("w"), "in flight");

  ASSERT_TRUE(PruneCheckpoints(out_, 0).ok());  // keep <= 0: all checkpoints stay
  std::set<std::string> names = Listing(out_);
  for (const char* s : {"step-00000100", "step-00000200", "step-00000300", "step-00000400",
                        "step-00000500"}) {
    EXPECT_TRUE(names.count(s)) << s;
  }
  EXPECT_FALSE(fs::exists(dead));  // but dead tmps go
  EXPECT_FALSE(fs::exists(dead_replaced));
  EXPECT_FALSE(fs::exists(mine_stale));
  EXPECT_TRUE(fs::exists(active->path("w")));

  ASSERT_TRUE(PruneCheckpoints(out_, 2).ok());
  const std::set<std::string> want = {
      "step-00000400", "step-00000500", "step-00000050", fs::path(alive).filename().string(),
      fs::path(active->tmp_dir()).filename().string(), ".tmp-something"};
  EXPECT_EQ(Listing(out_), want);
  EXPECT_EQ(ReadText(out_ + "/step-00000500/w"), "w");

  ASSERT_TRUE(PruneCheckpoints(out_, 5).ok());  // fewer than keep: nothing removed
  EXPECT_EQ(Listing(out_), want);
  ASSERT_TRUE(PruneCheckpoints(root_ + "/missing", 1).ok());

  // Once committed, the writer's step counts like any other checkpoint.
  ASSERT_TRUE(active->Commit().ok());
  ASSERT_TRUE(PruneCheckpoints(out_, 1).ok());
  EXPECT_EQ(Listing(out_), (std::set<std::string>{"step-00000900", "step-00000050",
                                                  fs::path(alive).filename().string(),
                                                  ".tmp-something"}));
}

TEST_F(CheckpointDirTest, RecommitSameStepReplacesIt) {
  absl::StatusOr<CheckpointDirWriter> w = CheckpointDirWriter::Begin(out_, 5);
  ASSERT_TRUE(w.ok());
  WriteText(w->path("w"), "old");
  WriteText(w->path("only_in_old"), "x");
  ASSERT_TRUE(w->Commit().ok());

  absl::StatusOr<CheckpointDirWriter> w2 = CheckpointDirWriter::Begin(out_, 5);
  ASSERT_TRUE(w2.ok());
  WriteText(w2->path("w"), "new");
  ASSERT_TRUE(w2->Commit().ok());

  EXPECT_EQ(Listing(out_), std::set<std::string>{"step-00000005"});  // no aside/tmp debris
  EXPECT_EQ(Listing(out_ + "/step-00000005"), (std::set<std::string>{"COMPLETE", "w"}));
  EXPECT_EQ(ReadText(out_ + "/step-00000005/w"), "new");
}

TEST_F(CheckpointDirTest, ReplaceDirectoryFallbackProtocol) {
  for (bool exchange : {false, true}) {
    SCOPED_TRACE(exchange ? "exchange" : "rename aside");
    const std::string from = root_ + "/from", to = root_ + "/to";
    fs::remove_all(from);
    fs::remove_all(to);
    fs::create_directories(from);
    WriteText(from + "/new", "1");
    // Target missing.
    ASSERT_TRUE(checkpoint_internal::ReplaceDirectory(from, to, exchange).ok());
    EXPECT_FALSE(fs::exists(from));
    EXPECT_EQ(Listing(to), std::set<std::string>{"new"});
    // Target present and non-empty.
    fs::create_directories(from);
    WriteText(from + "/newer", "2");
    ASSERT_TRUE(checkpoint_internal::ReplaceDirectory(from, to, exchange).ok());
    EXPECT_FALSE(fs::exists(from));
    EXPECT_EQ(Listing(to), std::set<std::string>{"newer"});
    EXPECT_EQ(Listing(root_), (std::set<std::string>{"to"}));  // nothing left aside
    // Source missing: an error naming both, and the target survives.
    absl::Status st = checkpoint_internal::ReplaceDirectory(from, to, exchange);
    ASSERT_FALSE(st.ok());
    EXPECT_HAS(st.message(), from);
    EXPECT_EQ(Listing(to), std::set<std::string>{"newer"});
  }
}

TEST_F(CheckpointDirTest, WriteFileAtomicAndReadFileToString) {
  const std::string p = root_ + "/state.json";
  ASSERT_TRUE(WriteFileAtomic(p, "first").ok());
  EXPECT_EQ(ReadText(p), "first");
  std::string big(200000, 'z');
  big[12345] = '\0';
  ASSERT_TRUE(WriteFileAtomic(p, big).ok());
  absl::StatusOr<std::string> got = ReadFileToString(p);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, big);
  EXPECT_EQ(Listing(root_), std::set<std::string>{"state.json"});  // no tmp left behind
  ASSERT_TRUE(WriteFileAtomic(p, "").ok());
  EXPECT_EQ(ReadText(p), "");

  absl::Status st = WriteFileAtomic(root_ + "/no/such/dir/x", "y");
  ASSERT_FALSE(st.ok());
  EXPECT_HAS(st.message(), root_ + "/no/such/dir/x");
  EXPECT_HAS(st.message(), "No such file or directory");

  got = ReadFileToString(root_ + "/absent");
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), absl::StatusCode::kNotFound);
  EXPECT_HAS(got.status().message(), root_ + "/absent");
}

// RLIMIT_FSIZE turns a large write into EFBIG, like a full disk: the old
// contents must survive and the tmp file must be gone.
TEST_F(CheckpointDirTest, WriteFileAtomicFailureKeepsOldFile) {
  const std::string p = root_ + "/state.json";
  ASSERT_TRUE(WriteFileAtomic(p, "first").ok());
  absl::Status st;
  {
    ::longctx::testing::FileSizeLimit limit(64 * 1024);
    ASSERT_TRUE(limit.ok());
    st = WriteFileAtomic(p, std::string(1 << 20, 'x'));
  }
  ASSERT_FALSE(st.ok());
  EXPECT_HAS(st.message(), p);
  EXPECT_HAS(st.message(), "File too large");
  EXPECT_EQ(ReadText(p), "first");
  EXPECT_EQ(Listing(root_), std::set<std::string>{"state.json"});

  // A parent that is not a directory.
  st = WriteFileAtomic("/dev/null/x", "y");
  ASSERT_FALSE(st.ok());
  EXPECT_HAS(st.message(), "/dev/null/x");
  EXPECT_HAS(st.message(), "Not a directory");
}

}  // namespace
}  // namespace longctx
