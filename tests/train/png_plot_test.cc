// Why: plots are read by people, not by code, so a broken plotter goes
// unnoticed until a report is wrong. These tests decode the written PNGs with
// libpng (independently of our encoder) and check exact pixels: the
// background, a line where the data says it is, a heatmap cell in the colour of
// its value, the colour bar, glyph pixels; plus byte-for-byte determinism and
// errors that name the path.
#include "train/report/png_plot.h"

#include <png.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/support/test_util.h"

namespace longctx {

// Readable colours in gtest failure messages (found by argument-dependent lookup).
void PrintTo(const Rgb& c, std::ostream* os) {
  *os << "rgb(" << int{c.r} << ", " << int{c.g} << ", " << int{c.b} << ")";
}

namespace {

struct Decoded {
  int width = 0, height = 0;
  std::vector<uint8_t> rgb;
  Rgb At(int x, int y) const {
    const size_t i = (static_cast<size_t>(y) * width + x) * 3;
    return Rgb{rgb[i], rgb[i + 1], rgb[i + 2]};
  }
};

// Reads a PNG file with libpng's simplified API as 8-bit RGB.
Decoded ReadPng(const std::string& path) {
  png_image image;
  std::memset(&image, 0, sizeof(image));
  image.version = PNG_IMAGE_VERSION;
  Decoded d;
  if (!png_image_begin_read_from_file(&image, path.c_str())) {
    ADD_FAILURE() << "cannot read " << path << ": " << image.message;
    return d;
  }
  image.format = PNG_FORMAT_RGB;
  d.width = static_cast<int>(image.width);
  d.height = static_cast<int>(image.height);
  d.rgb.resize(PNG_IMAGE_SIZE(image));
  if (!png_image_finish_read(&image, nullptr, d.rgb.data(), 0, nullptr)) {
    ADD_FAILURE() << "cannot decode " << path << ": " << image.message;
    d = Decoded{};
  }
  png_image_free(&image);
  return d;
}

int Round(double v) { return static_cast<int>(std::lround(v)); }

// Whether any pixel within `radius` of (x, y) has the colour (for points of a
// thick line whose rounding may move it by a pixel).
bool NearColor(const Canvas& c, int x, int y, Rgb color, int radius = 1) {
  for (int dy = -radius; dy <= radius; ++dy)
    for (int dx = -radius; dx <= radius; ++dx)
      if (c.Get(x + dx, y + dy) == color) return true;
  return false;
}

LinePlot MakeLinePlot() {
  LinePlotOptions o;
  o.width = 400;
  o.height = 300;
  o.title = "Test plot";
  o.x_label = "x";
  o.y_label = "y";
  o.x_min = 0;
  o.x_max = 10;
  o.legend_corner = LegendCorner::kTopLeft;  // the diagonal leaves the top left empty
  LinePlot plot(o);
  std::vector<double> x, diag, flat;
  for (int i = 0; i <= 10; ++i) {
    x.push_back(i);
    diag.push_back(i);
    flat.push_back(1);
  }
  plot.AddSeries("diagonal", x, diag);
  plot.AddSeries("flat", x, flat);
  plot.AddMarker(2, "m");
  return plot;
}

TEST(PngPlotTest, LinePlotPixelsSurviveEncoding) {
  testing::TempDir dir;
  const LinePlot plot = MakeLinePlot();
  absl::StatusOr<RenderedPlot> r = plot.Render();
  ASSERT_TRUE(r.ok()) << r.status();
  const PlotFrame& f = r->frame;
  EXPECT_EQ(f.x_min, 0);
  EXPECT_EQ(f.x_max, 10);
  EXPECT_LE(f.y_min, 0);
  EXPECT_GE(f.y_max, 10);
  EXPECT_TRUE(f.left > 0 && f.right < 399 && f.top > 0 && f.bottom < 299 && f.left < f.right && f.top < f.bottom);

  const std::string path = dir / "plot.png";
  ASSERT_TRUE(plot.WritePng(path).ok());
  const Decoded d = ReadPng(path);
  ASSERT_EQ(d.width, 400);
  ASSERT_EQ(d.height, 300);
  EXPECT_EQ(d.rgb, r->canvas.pixels());  // lossless, same layout

  EXPECT_EQ(d.At(0, 0), kWhite);
  EXPECT_EQ(d.At(399, 299), kWhite);
  // Series 0 passes through (5, 5), series 1 through (7, 1).
  EXPECT_EQ(d.At(Round(f.PixelX(5)), Round(f.PixelY(5))), PaletteColor(0));
  EXPECT_EQ(d.At(Round(f.PixelX(7)), Round(f.PixelY(1))), PaletteColor(1));
  // Empty plot area (lower right, away from both lines and grid lines) is white.
  EXPECT_EQ(d.At(Round(f.PixelX(9.1)), Round(f.PixelY(4.3))), kWhite);
  // The frame is black; the dashed marker at x = 2 starts with a dash at the top.
  EXPECT_EQ(d.At(f.left, (f.top + f.bottom) / 2), kBlack);
  EXPECT_EQ(d.At(f.right, (f.top + f.bottom) / 2), kBlack);
  EXPECT_EQ(d.At(Round(f.PixelX(2)), f.top + 2), (PlotMarker{}.color));
  // Title text lies above the plot area and is black somewhere.
  bool title_ink = false;
  for (int y = 0; y < f.top; ++y)
    for (int x = 0; x < 400; ++x) title_ink |= d.At(x, y) == kBlack;
  EXPECT_TRUE(title_ink);
}

TEST(PngPlotTest, OutputIsDeterministic) {
  testing::TempDir dir;
  ASSERT_TRUE(MakeLinePlot().WritePng(dir / "a.png").ok());
  ASSERT_TRUE(MakeLinePlot().WritePng(dir / "b.png").ok());
  const std::string a = testing::ReadFile(dir / "a.png");
  EXPECT_EQ(a.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  EXPECT_EQ(a, testing::ReadFile(dir / "b.png"));
  absl::StatusOr<RenderedPlot> r = MakeLinePlot().Render();
  ASSERT_TRUE(r.ok());
  absl::StatusOr<std::string> bytes = EncodePng(r->canvas);
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(*bytes, a);
  // A different plot gives different bytes.
  LinePlot other = MakeLinePlot();
  other.AddMarker(7, "n");
  ASSERT_TRUE(other.WritePng(dir / "c.png").ok());
  EXPECT_NE(testing::ReadFile(dir / "c.png"), a);
}

TEST(PngPlotTest, LogAxisUsesEnclosingDecadesAndSkipsNonPositive) {
  LinePlotOptions o;
  o.width = 500;
  o.height = 400;
  o.log_y = true;
  LinePlot plot(o);
  plot.AddSeries("s", {0, 1, 2, 3, 4}, {0.9, 0.05, 0.0, 0.002, 0.01});
  absl::StatusOr<RenderedPlot> r = plot.Render();
  ASSERT_TRUE(r.ok()) << r.status();
  const PlotFrame& f = r->frame;
  EXPECT_DOUBLE_EQ(f.y_min, 1e-3);
  EXPECT_DOUBLE_EQ(f.y_max, 1.0);
  // 1e-2 sits a third of the way up (three decades).
  EXPECT_NEAR(f.PixelY(1e-2), f.bottom - (f.bottom - f.top) / 3.0, 1e-9);
  EXPECT_EQ(r->canvas.Get(Round(f.PixelX(1)), Round(f.PixelY(0.05))), PaletteColor(0));
  EXPECT_TRUE(NearColor(r->canvas, Round(f.PixelX(3.5)), Round(f.PixelY(std::sqrt(0.002 * 0.01))), PaletteColor(0)));
  // y = 0 at x = 2 breaks the line: nothing drawn halfway between x = 1.5 and
  // x = 2.5 on the straight segment from (1, 0.05) to (3, 0.002).
  const double mid_y = std::pow(10.0, (std::log10(0.05) + std::log10(0.002)) / 2);
  EXPECT_FALSE(NearColor(r->canvas, Round(f.PixelX(2)), Round(f.PixelY(mid_y)), PaletteColor(0), 3));
  // Only non-positive values: an error, not an empty picture.
  LinePlot bad(o);
  bad.AddSeries("zeros", {0, 1}, {0, -1});
  EXPECT_FALSE(bad.Render().ok());
}

TEST(PngPlotTest, RenderErrors) {
  EXPECT_FALSE(LinePlot().Render().ok());  // no series
  LinePlot mismatched;
  mismatched.AddSeries("s", {1, 2, 3}, {1, 2});
  absl::StatusOr<RenderedPlot> r = mismatched.Render();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.status().message()).find("'s'"), std::string::npos);
  LinePlotOptions tiny;
  tiny.width = 40;
  tiny.height = 30;
  LinePlot small(tiny);
  small.AddSeries("s", {1, 2}, {1, 2});
  EXPECT_FALSE(small.Render().ok());
}

TEST(PngPlotTest, WriteErrorNamesThePath) {
  const std::string path = "/nonexistent-longctx-dir/sub/plot.png";
  absl::Status st = MakeLinePlot().WritePng(path);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(std::string(st.message()).find(path), std::string::npos) << st;
  Heatmap h(2, 2);
  st = h.WritePng(path);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(std::string(st.message()).find(path), std::string::npos) << st;
}

TEST(PngPlotTest, HeatmapCellsAndColourBar) {
  EXPECT_EQ(HeatmapColor(0), (Rgb{240, 73, 110}));
  EXPECT_EQ(HeatmapColor(0.5), (Rgb{235, 184, 57}));
  EXPECT_EQ(HeatmapColor(1), (Rgb{12, 215, 159}));
  EXPECT_EQ(HeatmapColor(-3), HeatmapColor(0));
  EXPECT_EQ(HeatmapColor(7), HeatmapColor(1));
  EXPECT_EQ(HeatmapColor(NAN), kMissingGrey);
  EXPECT_EQ(HeatmapColor(0.25), (Rgb{238, 129, 84}));  // halfway red → amber, rounded

  HeatmapOptions o;
  o.width = 520;
  o.height = 360;
  o.title = "NIAH accuracy";
  o.x_label = "test length";
  o.y_label = "depth";
  o.colorbar_label = "accuracy";
  o.col_labels = {"1k", "2k", "3k", "4k"};
  o.row_labels = {"0%", "50%", "100%"};
  Heatmap h(3, 4, o);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) h.Set(i, j, (i * 4 + j) / 11.0);
  h.Set(2, 3, NAN);
  EXPECT_DOUBLE_EQ(h.Get(1, 2), 6 / 11.0);
  absl::StatusOr<RenderedHeatmap> r = h.Render();
  ASSERT_TRUE(r.ok()) << r.status();

  testing::TempDir dir;
  const std::string path = dir / "heat.png";
  ASSERT_TRUE(h.WritePng(path).ok());
  const Decoded d = ReadPng(path);
  ASSERT_EQ(d.width, 520);
  ASSERT_EQ(d.height, 360);
  EXPECT_EQ(d.rgb, r->canvas.pixels());
  EXPECT_EQ(d.At(0, 0), kWhite);

  // Cells tile the grid in order, each filled edge to edge with its colour.
  const PixelRect c12 = r->Cell(1, 2);
  EXPECT_GT(c12.w, 10);
  EXPECT_GT(c12.h, 10);
  for (int y : {c12.y, c12.y + c12.h / 2, c12.y + c12.h - 1})
    for (int x : {c12.x, c12.x + c12.w / 2, c12.x + c12.w - 1})
      EXPECT_EQ(d.At(x, y), HeatmapColor(6 / 11.0)) << x << "," << y;
  EXPECT_EQ(d.At(c12.x + c12.w, c12.y + 1), kWhite);  // the gap to the next column
  EXPECT_GT(r->Cell(1, 3).x, c12.x + c12.w);
  EXPECT_GT(r->Cell(2, 2).y, c12.y + c12.h);
  const PixelRect c00 = r->Cell(0, 0);
  EXPECT_EQ(d.At(c00.x + 1, c00.y + 1), HeatmapColor(0));
  const PixelRect c23 = r->Cell(2, 3);
  EXPECT_EQ(d.At(c23.x + c23.w / 2, c23.y + c23.h / 2), kMissingGrey);
  EXPECT_EQ(c23.x + c23.w + 1, r->grid.x + r->grid.w);
  EXPECT_EQ(c23.y + c23.h + 1, r->grid.y + r->grid.h);

  // Colour bar: v_max (green) at the top, v_min (red) at the bottom, black frame.
  const PixelRect& b = r->colorbar;
  EXPECT_GT(b.x, r->grid.x + r->grid.w);
  EXPECT_EQ(d.At(b.x + b.w / 2, b.y), HeatmapColor(1));
  EXPECT_EQ(d.At(b.x + b.w / 2, b.y + b.h - 1), HeatmapColor(0));
  EXPECT_EQ(d.At(b.x + b.w / 2, b.y - 1), kBlack);

  // Label count mismatch and a grid that cannot fit are errors.
  HeatmapOptions bad = o;
  bad.col_labels.pop_back();
  EXPECT_FALSE(Heatmap(3, 4, bad).Render().ok());
  HeatmapOptions small = o;
  small.width = 120;
  EXPECT_FALSE(Heatmap(3, 40, small).Render().ok());
}

TEST(PngPlotTest, FontGlyphsAndText) {
  // Every printable glyph but the space has ink, and no two glyphs are equal.
  std::set<std::vector<bool>> seen;
  for (int ch = 33; ch <= 126; ++ch) {
    std::vector<bool> bits;
    for (int c = 0; c < kGlyphWidth; ++c)
      for (int r = 0; r < kGlyphHeight; ++r) bits.push_back(GlyphPixel(static_cast<char>(ch), c, r));
    EXPECT_NE(std::count(bits.begin(), bits.end(), true), 0) << "glyph '" << static_cast<char>(ch) << "'";
    EXPECT_TRUE(seen.insert(bits).second) << "glyph '" << static_cast<char>(ch) << "' duplicates another";
  }
  EXPECT_EQ(TextWidth("ab"), 11);
  EXPECT_EQ(TextWidth("ab", 2), 22);
  EXPECT_EQ(TextWidth(""), 0);

  // 'T': top row fully set, stem in column 2.
  const Rgb red{255, 0, 0};
  Canvas c(40, 30);
  c.Text(3, 4, "T", red);
  for (int x = 3; x < 8; ++x) EXPECT_EQ(c.Get(x, 4), red) << x;
  EXPECT_EQ(c.Get(5, 10), red);
  EXPECT_EQ(c.Get(4, 10), kWhite);
  EXPECT_EQ(c.Get(3, 5), kWhite);
  // Scale 2 doubles every font pixel; right alignment ends at x.
  Canvas s(40, 30);
  s.Text(20, 2, "T", red, 2, HAlign::kRight);
  EXPECT_EQ(s.Get(10, 2), red);  // x − width = 20 − 10
  EXPECT_EQ(s.Get(19, 3), red);
  EXPECT_EQ(s.Get(20, 2), kWhite);
  EXPECT_EQ(s.Get(9, 2), kWhite);
  // Rotated 'T' (reads upwards): its top row becomes the left column.
  Canvas v(30, 30);
  v.TextVertical(5, 15, "T", red);  // rotated box: x 5..11, y 13..17
  for (int y = 13; y <= 17; ++y) EXPECT_EQ(v.Get(5, y), red) << y;
  EXPECT_EQ(v.Get(8, 15), red);  // the stem
  EXPECT_EQ(v.Get(8, 14), kWhite);
  EXPECT_EQ(v.Get(5, 12), kWhite);
}

TEST(PngPlotTest, TickLabels) {
  EXPECT_EQ(FormatTickLabel(1536, 256), "1536");
  EXPECT_EQ(FormatTickLabel(0.75, 0.25), "0.75");  // not "0.8"
  EXPECT_EQ(FormatTickLabel(0.5, 0.25), "0.50");
  EXPECT_EQ(FormatTickLabel(0.4, 0.2), "0.4");
  EXPECT_EQ(FormatTickLabel(-1e-17, 0.2), "0.0");  // no "-0.0"
  EXPECT_EQ(FormatTickLabel(2.5e6, 5e5), "2.5e6");
  EXPECT_EQ(FormatTickLabel(1e-5, 1e-5), "1e-5");
}

TEST(PngPlotTest, CanvasLinesRectsAndClipping) {
  const Rgb k{10, 20, 30};
  Canvas c(20, 20);
  c.Line(2, 3, 12, 8, k);
  EXPECT_EQ(c.Get(2, 3), k);
  EXPECT_EQ(c.Get(12, 8), k);
  EXPECT_EQ(c.Get(4, 4), k);  // on the ideal line
  EXPECT_EQ(c.Get(10, 7), k);
  EXPECT_EQ(c.Get(4, 5), kWhite);
  int drawn = 0;
  for (int y = 0; y < 20; ++y)
    for (int x = 0; x < 20; ++x) drawn += c.Get(x, y) == k;
  EXPECT_EQ(drawn, 11);  // one pixel per column of an x-major line

  // Far-away endpoints are clipped cheaply, leaving the visible row drawn.
  Canvas far(50, 10);
  const auto start = std::chrono::steady_clock::now();
  far.Line(-1e12, 4, 1e12, 4, k);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 1.0);
  for (int x = 0; x < 50; ++x) ASSERT_EQ(far.Get(x, 4), k) << x;
  EXPECT_EQ(far.Get(0, 3), kWhite);

  // Dashes: 3 on, 2 off, from the start.
  Canvas d(20, 3);
  d.DashedLine(0, 1, 19, 1, k, 3, 2);
  const std::string want = "###..###..###..###..";
  for (int x = 0; x < 20; ++x) EXPECT_EQ(d.Get(x, 1) == k, want[x] == '#') << x;

  // Thickness 3 brush covers the neighbours; rectangles; clip rectangle.
  Canvas t(20, 20);
  t.Line(5, 10, 15, 10, k, 3);
  EXPECT_EQ(t.Get(10, 9), k);
  EXPECT_EQ(t.Get(10, 11), k);
  EXPECT_EQ(t.Get(10, 12), kWhite);
  t.StrokeRect(0, 0, 4, 4, k);
  EXPECT_EQ(t.Get(3, 3), k);
  EXPECT_EQ(t.Get(1, 1), kWhite);
  t.SetClip(0, 0, 9, 19);
  t.FillRect(0, 15, 20, 2, k);
  t.ResetClip();
  EXPECT_EQ(t.Get(9, 15), k);
  EXPECT_EQ(t.Get(10, 15), kWhite);
}

}  // namespace
}  // namespace longctx
