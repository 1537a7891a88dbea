// Why: `longctx plot --series` draws docs/BENCHMARKS.md's figures from JSONL
// points; the parser must keep series and point order, reject a bad line with
// its file and line number, and the rendered plot must put each series' line
// through its own points (checked on pixels, like png_plot_test).
#include "train/report/series_plot.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "tests/support/test_util.h"

namespace longctx {
namespace {

int Round(double v) { return static_cast<int>(std::lround(v)); }

TEST(SeriesPlotTest, ParsesSeriesInFirstSeenOrderAndPointsInFileOrder) {
  const std::string text =
      "{\"series\": \"full\", \"x\": 2048, \"y\": 105.4}\n"
      "\n"
      "{\"series\": \"swa\", \"x\": 2048, \"y\": 86.2}\n"
      "{\"series\": \"full\", \"x\": 4096, \"y\": 225.6}\n"
      "{\"series\": \"swa\", \"x\": 4096, \"y\": 86.5, \"note\": \"extra keys are ignored\"}\n";
  absl::StatusOr<std::vector<PlotSeries>> s = ParseSeriesJsonl(text, "pts.jsonl");
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->size(), 2u);
  EXPECT_EQ((*s)[0].name, "full");
  EXPECT_EQ((*s)[1].name, "swa");
  EXPECT_EQ((*s)[0].x, (std::vector<double>{2048, 4096}));
  EXPECT_EQ((*s)[0].y, (std::vector<double>{105.4, 225.6}));
  EXPECT_EQ((*s)[1].y, (std::vector<double>{86.2, 86.5}));
}

TEST(SeriesPlotTest, BadLinesNameFileAndLine) {
  auto err = [](const std::string& text) {
    absl::StatusOr<std::vector<PlotSeries>> s = ParseSeriesJsonl(text, "pts.jsonl");
    EXPECT_FALSE(s.ok());
    return std::string(s.status().message());
  };
  EXPECT_EQ(err("{\"series\": \"a\", \"x\": 1, \"y\": 2}\n{\"series\": \"a\", \"x\": 2}\n"),
            "pts.jsonl:2: \"y\" must be a finite number");
  EXPECT_EQ(err("{\"series\": 3, \"x\": 1, \"y\": 2}\n"), "pts.jsonl:1: \"series\" must be a string");
  EXPECT_EQ(err("not json\n"), "pts.jsonl:1: not a JSON object");
  EXPECT_EQ(err("{\"series\": \"a\", \"x\": \"1\", \"y\": 2}\n"), "pts.jsonl:1: \"x\" must be a finite number");
  EXPECT_EQ(err("\n\n"), "pts.jsonl: no points");
  EXPECT_FALSE(RenderSeriesPlot("/nonexistent/pts.jsonl", {}).ok());
}

TEST(SeriesPlotTest, EachSeriesLinePassesThroughItsPoints) {
  const std::string text =
      "{\"series\": \"a\", \"x\": 0, \"y\": 1}\n{\"series\": \"a\", \"x\": 10, \"y\": 5}\n"
      "{\"series\": \"b\", \"x\": 0, \"y\": 7.3}\n{\"series\": \"b\", \"x\": 10, \"y\": 7.3}\n";
  absl::StatusOr<std::vector<PlotSeries>> s = ParseSeriesJsonl(text, "t");
  ASSERT_TRUE(s.ok()) << s.status();
  LinePlotOptions o;
  o.legend = false;
  LinePlot plot(o);
  for (PlotSeries& p : *s) plot.AddSeries(std::move(p));
  absl::StatusOr<RenderedPlot> r = plot.Render();
  ASSERT_TRUE(r.ok()) << r.status();
  const PlotFrame& f = r->frame;
  EXPECT_EQ(r->canvas.Get(Round(f.PixelX(5)), Round(f.PixelY(3))), PaletteColor(0));  // midpoint of a
  EXPECT_EQ(r->canvas.Get(Round(f.PixelX(5)), Round(f.PixelY(7.3))), PaletteColor(1));  // b is flat at 7.3
  EXPECT_EQ(r->canvas.Get(Round(f.PixelX(5)), Round(f.PixelY(6.5))), kWhite);  // between the lines, off the grid

  // The file path: the same plot as PNG bytes.
  const std::string path = (std::filesystem::temp_directory_path() / "series_plot_test.jsonl").string();
  { std::ofstream(path) << text; }
  absl::StatusOr<std::string> png = RenderSeriesPlot(path, o);
  std::remove(path.c_str());
  ASSERT_TRUE(png.ok()) << png.status();
  ASSERT_GT(png->size(), 8u);
  EXPECT_EQ(png->substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
}

}  // namespace
}  // namespace longctx
