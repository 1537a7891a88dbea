// Why: progress lines must say how far, how fast and how long is left, print
// one line per event in logs (no carriage-return redraws), and erase a live
// line so the command's own output stays clean.
#include "train/report/progress.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "gtest/gtest.h"

namespace longctx {
namespace {

std::string ReadAll(FILE* f) {
  std::fflush(f);
  std::rewind(f);
  std::string s;
  char buf[512];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) s.append(buf, n);
  return s;
}

TEST(ProgressTest, FormatDuration) {
  EXPECT_EQ(FormatDuration(0), "0 s");
  EXPECT_EQ(FormatDuration(42.4), "42 s");
  EXPECT_EQ(FormatDuration(185), "3 min 05 s");
  EXPECT_EQ(FormatDuration(3720), "1 h 02 min");
  EXPECT_EQ(FormatDuration(-5), "0 s");
}

TEST(ProgressTest, LineHasRateAndEta) {
  FILE* f = std::tmpfile();
  Progress p("probe", 40, "trials", f, Progress::Mode::kLines);
  // 10 of 40 in 20 s: 0.5/s, 30 left -> 60 s.
  EXPECT_EQ(p.Line(10, 20, "length 256"), "probe 10/40 trials | 0.50 trials/s | 20 s elapsed | ETA 1 min 00 s | length 256");
  EXPECT_EQ(p.Line(0, 1, ""), "probe 0/40 trials | 0.00 trials/s | 1 s elapsed | ETA ?");
  EXPECT_EQ(p.Line(40, 80, ""), "probe 40/40 trials | 0.50 trials/s | 1 min 20 s elapsed | ETA done");
  std::fclose(f);
}

TEST(ProgressTest, LinesModePrintsEventsOnlyLiveModeRedrawsAndErases) {
  FILE* f = std::tmpfile();
  {
    Progress p("tok", 3, "shards", f, Progress::Mode::kLines);
    p.Update(1);  // nothing in logs
    p.Event(2, "a.jsonl");
  }
  const std::string lines = ReadAll(f);
  EXPECT_EQ(lines.find('\r'), std::string::npos) << lines;
  EXPECT_EQ(std::count(lines.begin(), lines.end(), '\n'), 1) << lines;
  EXPECT_NE(lines.find("tok 2/3 shards"), std::string::npos) << lines;
  EXPECT_NE(lines.find("| a.jsonl"), std::string::npos) << lines;
  std::fclose(f);

  FILE* g = std::tmpfile();
  {
    Progress p("probe", 4, "trials", g, Progress::Mode::kLive);
    p.Update(1);
  }
  const std::string live = ReadAll(g);
  EXPECT_EQ(live.find('\n'), std::string::npos) << live;
  EXPECT_NE(live.find("\r\033[Kprobe 1/4 trials"), std::string::npos) << live;
  EXPECT_EQ(live.substr(live.size() - 4), "\r\033[K");  // erased at the end
  std::fclose(g);
}

TEST(ProgressTest, TickPrintsAtMostFourLinesInLogs) {
  FILE* f = std::tmpfile();
  {
    Progress p("analyze attention", 10, "samples", f, Progress::Mode::kLines);
    for (int i = 1; i <= 10; ++i) p.Tick(i);
  }
  const std::string lines = ReadAll(f);
  EXPECT_EQ(lines.find('\r'), std::string::npos) << lines;
  // Quarters entered at 3 (30 %), 5 (50 %), 8 (80 %) and 10 (the total).
  EXPECT_EQ(std::count(lines.begin(), lines.end(), '\n'), 4) << lines;
  EXPECT_NE(lines.find("analyze attention 3/10 samples"), std::string::npos) << lines;
  EXPECT_NE(lines.find("analyze attention 5/10 samples"), std::string::npos) << lines;
  EXPECT_NE(lines.find("analyze attention 8/10 samples"), std::string::npos) << lines;
  EXPECT_NE(lines.find("analyze attention 10/10 samples"), std::string::npos) << lines;
  EXPECT_NE(lines.find("ETA done"), std::string::npos) << lines;
  EXPECT_EQ(lines.find("2/10"), std::string::npos) << lines;
  std::fclose(f);

  FILE* g = std::tmpfile();
  {
    Progress p("corpus: man pages", 3, "pages", g, Progress::Mode::kLive);
    p.Tick(1);
    p.Tick(3, "last");  // drawn although inside the 0.2 s throttle: the final count
  }
  const std::string live = ReadAll(g);
  EXPECT_EQ(live.find('\n'), std::string::npos) << live;
  EXPECT_NE(live.find("corpus: man pages 3/3 pages"), std::string::npos) << live;
  EXPECT_NE(live.find("| last"), std::string::npos) << live;
  std::fclose(g);
}

}  // namespace
}  // namespace longctx
