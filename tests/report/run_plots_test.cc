// Why: the main job probes 16 times; the pass-rate plot has 10 palette colours,
// so it draws a subset of probe steps, which must keep the first and last probe
// and the step where retrieval appears (and the one before it), and draw every
// step when there are few.
#include "train/report/run_plots.h"

#include <cstdint>
#include <map>
#include <set>

#include "gtest/gtest.h"

namespace longctx {
namespace {

std::map<int64_t, std::map<int64_t, double>> Probes(int n, int first_passing) {
  std::map<int64_t, std::map<int64_t, double>> p;
  for (int i = 1; i <= n; ++i)
    p[25 * i] = {{128, i >= first_passing ? 0.75 : 0.0}, {256, i >= first_passing ? 0.5 : 0.0}};
  return p;
}

TEST(RunPlotsTest, FewProbesAreAllDrawn) {
  EXPECT_EQ(PassRateStepsToPlot(Probes(10, 4)).size(), 10u);
  EXPECT_EQ(PassRateStepsToPlot(Probes(3, 99)), (std::set<int64_t>{25, 50, 75}));
}

TEST(RunPlotsTest, ManyProbesKeepEndsAndTheStepRetrievalAppears) {
  // 16 probes at 25..400; retrieval first at probe 6 (step 150): evenly spaced
  // indices 0, 2, 5, 7, 10, 12, 15 -> steps 25, 75, 150, 200, 275, 325, 400, plus
  // 150 and 125 (the probe before it).
  const std::set<int64_t> s = PassRateStepsToPlot(Probes(16, 6));
  EXPECT_EQ(s, (std::set<int64_t>{25, 75, 125, 150, 200, 275, 325, 400}));
  // Retrieval at probe 10 (step 250): 225 and 250 are added.
  const std::set<int64_t> t = PassRateStepsToPlot(Probes(16, 10));
  EXPECT_EQ(t, (std::set<int64_t>{25, 75, 150, 200, 225, 250, 275, 325, 400}));
  // Never: only the evenly spaced 7.
  EXPECT_EQ(PassRateStepsToPlot(Probes(16, 99)).size(), 7u);
}

}  // namespace
}  // namespace longctx
