// Why: plots are read by people, not by code, so a broken plotter goes
// unnoticed until a report is wrong. These tests decode the written PNGs with
// libpng (independently of cairo's encoder) and check pixels: the background,
// a line where the data says it is, a heatmap cell in the colour of its value,
// the colour bar, the axes and their ticks, text ink inside the box of each
// title, tick label and legend entry, the DejaVu face; plus byte-for-byte
// determinism and errors that name the path. Rectangles and axis-aligned
// lines are exact; antialiased lines are checked for their fully covered
// pixels. The line plot and the heatmap stay in
// build/test_output/png_plot/ for a person to look at.
#include "train/report/png_plot.h"

#include <png.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <utility>
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
  int w = 0, h = 0;
  std::vector<uint8_t> rgb;
  int width() const { return w; }
  int height() const { return h; }
  Rgb At(int x, int y) const {
    const size_t i = (static_cast<size_t>(y) * w + x) * 3;
    return Rgb{rgb[i], rgb[i + 1], rgb[i + 2]};
  }
  Rgb Get(int x, int y) const { return At(x, y); }
};

// Where the figures of these tests stay for a person to look at.
std::string KeptPath(const std::string& name) {
  const std::string dir = std::string(LONGCTX_BINARY_DIR) + "/test_output/png_plot";
  std::filesystem::create_directories(dir);
  return dir + "/" + name;
}

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
  d.w = static_cast<int>(image.width);
  d.h = static_cast<int>(image.height);
  d.rgb.resize(PNG_IMAGE_SIZE(image));
  if (!png_image_finish_read(&image, nullptr, d.rgb.data(), 0, nullptr)) {
    ADD_FAILURE() << "cannot decode " << path << ": " << image.message;
    d = Decoded{};
  }
  png_image_free(&image);
  return d;
}

int Round(double v) { return static_cast<int>(std::lround(v)); }

// Whether colours agree to `tol` per channel (a pixel an antialiased line
// covers fully, up to rounding).
bool Close(Rgb a, Rgb b, int tol) {
  return std::abs(a.r - b.r) <= tol && std::abs(a.g - b.g) <= tol && std::abs(a.b - b.b) <= tol;
}

// Whether any pixel within `radius` of (x, y) has the colour, to `tol` per
// channel (for points of a line whose rounding may move it by a pixel).
template <class Image>
bool NearColor(const Image& c, int x, int y, Rgb color, int radius = 1, int tol = 6) {
  for (int dy = -radius; dy <= radius; ++dy)
    for (int dx = -radius; dx <= radius; ++dx)
      if (Close(c.Get(x + dx, y + dy), color, tol)) return true;
  return false;
}

// Whether any pixel of [x0, x1) × [y0, y1) differs from white.
template <class Image>
bool AnyInk(const Image& c, int x0, int y0, int x1, int y1) {
  for (int y = std::max(0, y0); y < std::min(c.height(), y1); ++y)
    for (int x = std::max(0, x0); x < std::min(c.width(), x1); ++x)
      if (!(c.Get(x, y) == kWhite)) return true;
  return false;
}

// Black text on white antialiases to greys (r = g = b); the series colours
// and the heatmap scale are not grey.
bool TextInk(Rgb c) { return c.r == c.g && c.g == c.b && c.r < 200; }

// The columns [first, last] of text ink in [x0, x1) × [y0, y1); {-1, -1} when none.
template <class Image>
std::pair<int, int> TextInkColumns(const Image& c, int x0, int y0, int x1, int y1) {
  std::pair<int, int> span{-1, -1};
  for (int y = std::max(0, y0); y < std::min(c.height(), y1); ++y)
    for (int x = std::max(0, x0); x < std::min(c.width(), x1); ++x)
      if (TextInk(c.Get(x, y))) {
        if (span.first < 0 || x < span.first) span.first = x;
        span.second = std::max(span.second, x);
      }
  return span;
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

  const std::string path = KeptPath("line_plot.png");
  ASSERT_TRUE(plot.WritePng(path).ok());
  const Decoded d = ReadPng(path);
  ASSERT_EQ(d.width(), 400);
  ASSERT_EQ(d.height(), 300);
  EXPECT_EQ(d.rgb, r->canvas.pixels());  // lossless, same layout

  EXPECT_EQ(d.At(0, 0), kWhite);
  EXPECT_EQ(d.At(399, 299), kWhite);
  // Series 0 passes through (5, 5), series 1 through (7, 1).
  EXPECT_TRUE(NearColor(d, Round(f.PixelX(5)), Round(f.PixelY(5)), PaletteColor(0)));
  EXPECT_TRUE(NearColor(d, Round(f.PixelX(7)), Round(f.PixelY(1)), PaletteColor(1)));
  EXPECT_FALSE(NearColor(d, Round(f.PixelX(5)), Round(f.PixelY(3)), PaletteColor(0), 2, 60));
  // Empty plot area (lower right, away from both lines and grid lines) is white.
  EXPECT_EQ(d.At(Round(f.PixelX(9.1)), Round(f.PixelY(4.3))), kWhite);
  // The frame is black; the dashed marker at x = 2 starts with a dash at the top.
  EXPECT_EQ(d.At(f.left, (f.top + f.bottom) / 2), kBlack);
  EXPECT_EQ(d.At(f.right, (f.top + f.bottom) / 2), kBlack);
  EXPECT_EQ(d.At(Round(f.PixelX(2)), f.top + 2), (PlotMarker{}.color));
  // The title, centred above the plot area: ink across its whole width (all
  // of its glyphs drawn), solid black in the strokes, nothing beyond its box.
  const int title_w = TextWidth("Test plot", kTitleFont), title_h = TextHeight(kTitleFont);
  const auto [t0, t1] = TextInkColumns(d, 0, 0, 400, f.top - TextHeight() / 2);
  EXPECT_GE(t0, 200 - title_w / 2 - 1);
  EXPECT_LE(t1, 200 + title_w / 2 + 1);
  EXPECT_GT(t1 - t0, title_w * 8 / 10) << t0 << ".." << t1 << " of " << title_w;
  bool title_black = false;
  for (int y = 0; y < f.top; ++y)
    for (int x = 0; x < 400; ++x) title_black |= d.At(x, y) == kBlack;
  EXPECT_TRUE(title_black);
  EXPECT_FALSE(AnyInk(d, 0, 12 + title_h + 1, 400, f.top - TextHeight() / 2 - 1));  // below the title's box
  // x axis: ticks at 0, 2, ..., 10 (black, below the frame), each with its
  // label under it and nothing under the odd values between them.
  const int th = TextHeight();
  for (int v = 0; v <= 10; v += 2) {
    const int px = Round(f.PixelX(v));
    EXPECT_EQ(d.At(px, f.bottom + 3), kBlack) << v;
    const int lw = TextWidth(std::to_string(v));
    const auto [c0, c1] = TextInkColumns(d, px - lw, f.bottom + 6, px + lw + 1, f.bottom + 6 + th + 4);
    EXPECT_TRUE(c0 >= px - lw / 2 - 1 && c1 <= px + lw / 2 + 1 && c1 - c0 + 1 >= lw / 2) << v << ": " << c0 << ".." << c1;
    if (v < 10) {
      const int odd = Round(f.PixelX(v + 1));
      EXPECT_FALSE(AnyInk(d, odd - 3, f.bottom + 1, odd + 4, f.bottom + 6 + th)) << v + 1;
    }
  }
  // y axis: labels 0, 2, ..., 10 right-aligned left of the ticks, beside their ticks.
  for (int v = 0; v <= 10; v += 2) {
    const int py = Round(f.PixelY(v));
    EXPECT_EQ(d.At(f.left - 3, py), kBlack) << v;
    const int x0 = 12 + th + 1;  // right of the y title
    const auto [c0, c1] = TextInkColumns(d, x0, py - th / 2, f.left - 5, py + th / 2 + 1);
    EXPECT_GE(c0, x0) << v;
    EXPECT_GE(c1, f.left - 13) << v;  // right-aligned a few pixels left of the 5-pixel ticks
    EXPECT_GT(c1 - c0 + 1, TextWidth(std::to_string(v)) / 2) << v;
    if (v > 0) {
      EXPECT_FALSE(AnyInk(d, x0, py + th, f.left - 5, py + th + 2)) << v;  // labels are apart
    }
  }
  // The y axis title, rotated, at the left margin; the x axis title under the labels.
  EXPECT_TRUE(TextInkColumns(d, 0, (f.top + f.bottom) / 2 - 10, 12 + th, (f.top + f.bottom) / 2 + 10).first >= 12);
  EXPECT_FALSE(AnyInk(d, 0, 0, 11, 300));
  EXPECT_TRUE(AnyInk(d, (f.left + f.right) / 2 - 5, f.bottom + 6 + th, (f.left + f.right) / 2 + 6, 300));
  // The legend (top left, grey frame): one row per series, its line sample in
  // the series colour, its name in text ink beside it.
  int lx0 = 400, ly0 = 300, lx1 = -1, ly1 = -1;
  for (int y = f.top; y <= f.bottom; ++y)
    for (int x = f.left; x <= f.right; ++x)
      if (d.At(x, y) == (Rgb{150, 150, 150})) {
        lx0 = std::min(lx0, x), ly0 = std::min(ly0, y), lx1 = std::max(lx1, x), ly1 = std::max(ly1, y);
      }
  ASSERT_GT(lx1, lx0 + 40);
  ASSERT_GT(ly1, ly0 + 2 * th);
  EXPECT_LT(lx0, Round(f.PixelX(5)));  // top left
  EXPECT_LT(ly1, Round(f.PixelY(5)));
  const int mid_y = (ly0 + ly1) / 2;
  for (int k = 0; k < 2; ++k) {
    const int y0 = k == 0 ? ly0 + 1 : mid_y, y1 = k == 0 ? mid_y : ly1;
    bool sample = false;
    for (int y = y0; y < y1; ++y)
      for (int x = lx0 + 1; x < lx0 + 40; ++x) sample |= Close(d.At(x, y), PaletteColor(k), 6);
    EXPECT_TRUE(sample) << "legend row " << k;
    const int name_w = TextWidth(k == 0 ? "diagonal" : "flat");
    const auto [c0, c1] = TextInkColumns(d, lx0 + 1, y0, lx1, y1);
    EXPECT_GT(c1 - c0 + 1, name_w * 8 / 10) << "legend row " << k;
    EXPECT_LE(c1 - c0 + 1, name_w + 2) << "legend row " << k;
  }
}

TEST(PngPlotTest, TextIsDejaVuSans) {
  EXPECT_EQ(FontInUse(kLabelFont), "DejaVu Sans Book") << "fontconfig resolved another face: install fonts-dejavu-core";
  EXPECT_EQ(FontInUse(kTitleFont), "DejaVu Sans Bold");
}

TEST(PngPlotTest, InvalidUtf8TextDoesNotStopDrawing) {
  // cairo refuses invalid UTF-8 by putting its context into an error state
  // that ignores every later call; the canvas hands it valid UTF-8 instead.
  const Rgb k{10, 20, 30};
  const std::string bad = "a\xff\xfe" "b";
  EXPECT_EQ(TextWidth(bad), TextWidth("a\xEF\xBF\xBD\xEF\xBF\xBD" "b"));
  Canvas c(80, 40);
  c.Text(2, 2, bad, kBlack);
  c.TextVertical(60, 20, bad, kBlack);
  c.FillRect(30, 30, 5, 5, k);
  EXPECT_TRUE(AnyInk(c, 2, 2, 2 + TextWidth(bad), 2 + TextHeight()));
  EXPECT_TRUE(AnyInk(c, 60, 0, 80, 40));
  EXPECT_EQ(c.Get(32, 32), k);
  EXPECT_TRUE(EncodePng(c).ok());
  // A series name from a file: the plot is still whole.
  LinePlot plot = MakeLinePlot();
  plot.AddSeries(bad, {0, 10}, {10, 0});
  absl::StatusOr<RenderedPlot> r = plot.Render();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->canvas.Get(r->frame.right, (r->frame.top + r->frame.bottom) / 2), kBlack);
  EXPECT_TRUE(NearColor(r->canvas, Round(r->frame.PixelX(5)), Round(r->frame.PixelY(5)), PaletteColor(2)));
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
  // The heatmap too: two renders, the same bytes.
  HeatmapOptions ho;
  ho.title = "same";
  Heatmap h(2, 3, ho);
  h.Set(0, 1, 0.25);
  h.Set(1, 2, 1);
  absl::StatusOr<RenderedHeatmap> h1 = h.Render(), h2 = h.Render();
  ASSERT_TRUE(h1.ok() && h2.ok());
  absl::StatusOr<std::string> b1 = EncodePng(h1->canvas), b2 = EncodePng(h2->canvas);
  ASSERT_TRUE(b1.ok() && b2.ok());
  EXPECT_EQ(*b1, *b2);
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
  EXPECT_TRUE(NearColor(r->canvas, Round(f.PixelX(1)), Round(f.PixelY(0.05)), PaletteColor(0)));
  EXPECT_TRUE(NearColor(r->canvas, Round(f.PixelX(3.5)), Round(f.PixelY(std::sqrt(0.002 * 0.01))), PaletteColor(0)));
  // y = 0 at x = 2 breaks the line: nothing drawn halfway between x = 1.5 and
  // x = 2.5 on the straight segment from (1, 0.05) to (3, 0.002).
  const double mid_y = std::pow(10.0, (std::log10(0.05) + std::log10(0.002)) / 2);
  EXPECT_FALSE(NearColor(r->canvas, Round(f.PixelX(2)), Round(f.PixelY(mid_y)), PaletteColor(0), 3, 100));
  // Only non-positive values: an error, not an empty picture.
  LinePlot bad(o);
  bad.AddSeries("zeros", {0, 1}, {0, -1});
  EXPECT_FALSE(bad.Render().ok());
}

TEST(PngPlotTest, ErrorBarsSpanTheirIntervalInTheSeriesColour) {
  LinePlotOptions o;
  o.width = 500;
  o.height = 400;
  o.y_min = 0;
  o.y_max = 1;
  o.x_min = 0;
  o.x_max = 4;
  LinePlot plot(o);
  plot.AddSeries(PlotSeries{.name = "s", .x = {1, 2, 3}, .y = {0.5, 0.5, 0.5},
                            .y_low = {0.1, NAN, 0.4}, .y_high = {0.9, 0.7, 0.6}});
  absl::StatusOr<RenderedPlot> r = plot.Render();
  ASSERT_TRUE(r.ok()) << r.status();
  const PlotFrame& f = r->frame;
  const Rgb c = PaletteColor(0);
  // Inside the first point's bar (x = 1, from 0.1 to 0.9) and at its caps; none past them.
  EXPECT_TRUE(NearColor(r->canvas, Round(f.PixelX(1)), Round(f.PixelY(0.2)), c, 1));
  // (a 1-pixel cap between pixel rows is anti-aliased: ink, not the exact colour)
  const int cx = Round(f.PixelX(1)), cy = Round(f.PixelY(0.9));
  EXPECT_TRUE(AnyInk(r->canvas, cx + 2, cy - 1, cx + 5, cy + 2));
  EXPECT_FALSE(AnyInk(r->canvas, cx + 6, cy - 1, cx + 9, cy + 2));
  EXPECT_FALSE(NearColor(r->canvas, Round(f.PixelX(1)), Round(f.PixelY(0.05)), c, 1, 60));
  // The second has a non-finite end: no bar at all.
  EXPECT_FALSE(NearColor(r->canvas, Round(f.PixelX(2)), Round(f.PixelY(0.65)), c, 1, 60));
  EXPECT_TRUE(NearColor(r->canvas, Round(f.PixelX(3)), Round(f.PixelY(0.42)), c, 1));
  // One y_low / y_high per point, or none.
  LinePlot bad(o);
  bad.AddSeries(PlotSeries{.name = "b", .x = {0, 1}, .y = {0.5, 0.5}, .y_low = {0.1}, .y_high = {0.9, 0.9}});
  absl::StatusOr<RenderedPlot> e = bad.Render();
  ASSERT_FALSE(e.ok());
  EXPECT_NE(std::string(e.status().message()).find("error bars"), std::string::npos) << e.status();
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

  const std::string path = KeptPath("heatmap.png");
  ASSERT_TRUE(h.WritePng(path).ok());
  const Decoded d = ReadPng(path);
  ASSERT_EQ(d.width(), 520);
  ASSERT_EQ(d.height(), 360);
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

  // Text: a label under each column, left of each row, beside each of the
  // colour bar's five ticks; the title above the grid.
  const int th = TextHeight();
  for (int j = 0; j < 4; ++j) {
    const PixelRect cell = r->Cell(2, j);
    const int cx = cell.x + cell.w / 2, lw = TextWidth(o.col_labels[j]);
    const auto [c0, c1] = TextInkColumns(d, cell.x, cell.y + cell.h + 2, cell.x + cell.w, cell.y + cell.h + 6 + th);
    EXPECT_TRUE(c0 >= cx - lw / 2 - 1 && c1 <= cx + lw / 2 + 1 && c1 - c0 + 1 >= lw * 7 / 10) << j << ": " << c0 << ".." << c1;
  }
  for (int i = 0; i < 3; ++i) {
    const PixelRect cell = r->Cell(i, 0);
    const int lw = TextWidth(o.row_labels[i]);
    const auto [c0, c1] = TextInkColumns(d, 12 + th + 2, cell.y, r->grid.x, cell.y + cell.h);  // right of the y title
    EXPECT_TRUE(c1 < r->grid.x - 2 && c1 - c0 + 1 >= lw * 7 / 10 && c1 - c0 + 1 <= lw + 2) << i << ": " << c0 << ".." << c1;
  }
  for (int k = 0; k <= 4; ++k) {
    const int py = b.y + Round((1.0 - k / 4.0) * (b.h - 1));
    EXPECT_EQ(d.At(b.x + b.w + 2, py), kBlack) << k;
    EXPECT_TRUE(AnyInk(d, b.x + b.w + 5, py - th / 2, 520, py + th / 2 + 1)) << k;
  }
  const int title_w = TextWidth(o.title, kTitleFont);
  const auto [t0, t1] = TextInkColumns(d, 0, 0, 520, r->grid.y - th / 2);
  EXPECT_TRUE(t0 >= 260 - title_w / 2 - 1 && t1 <= 260 + title_w / 2 + 1 && t1 - t0 > title_w * 8 / 10) << t0 << ".." << t1;

  // Label count mismatch and a grid that cannot fit are errors.
  HeatmapOptions bad = o;
  bad.col_labels.pop_back();
  EXPECT_FALSE(Heatmap(3, 4, bad).Render().ok());
  HeatmapOptions small = o;
  small.width = 120;
  EXPECT_FALSE(Heatmap(3, 40, small).Render().ok());
}

TEST(PngPlotTest, TextMetricsAndPlacement) {
  // Widths grow with the text and the size; a title is wider than a label.
  EXPECT_EQ(TextWidth(""), 0);
  const int ab = TextWidth("ab");
  EXPECT_GT(ab, 6);
  EXPECT_LT(ab, 30);
  EXPECT_GT(TextWidth("abab"), ab + ab / 2);
  EXPECT_GT(TextWidth("ab", kTitleFont), ab);
  EXPECT_GT(TextHeight(), 8);
  EXPECT_LT(TextHeight(), 24);
  EXPECT_GT(TextHeight(kTitleFont), TextHeight());

  // Text lands inside its box [x, x + width) × [y, y + height) and inks it.
  const Rgb red{255, 0, 0};
  const int w = TextWidth("Tg"), h = TextHeight();
  Canvas c(60, 40);
  c.Text(10, 8, "Tg", red);
  EXPECT_TRUE(AnyInk(c, 10, 8, 10 + w, 8 + h));
  EXPECT_FALSE(AnyInk(c, 0, 0, 60, 8));
  EXPECT_FALSE(AnyInk(c, 0, 8 + h + 1, 60, 40));
  EXPECT_FALSE(AnyInk(c, 0, 0, 9, 40));
  EXPECT_FALSE(AnyInk(c, 10 + w + 1, 0, 60, 40));
  // The 'T' bar: fully covered pixels in the text colour, not only blends.
  bool solid = false;
  for (int y = 8; y < 8 + h; ++y)
    for (int x = 10; x < 10 + w; ++x) solid |= Close(c.Get(x, y), red, 8);
  EXPECT_TRUE(solid);
  // Right alignment ends at x; centring straddles it.
  Canvas r(60, 40);
  r.Text(50, 8, "Tg", red, kLabelFont, HAlign::kRight);
  EXPECT_TRUE(AnyInk(r, 50 - w, 8, 50, 8 + h));
  EXPECT_FALSE(AnyInk(r, 51, 0, 60, 40));
  EXPECT_FALSE(AnyInk(r, 0, 0, 50 - w - 1, 40));
  Canvas m(60, 40);
  m.Text(30, 8, "Tg", red, kLabelFont, HAlign::kCenter);
  EXPECT_TRUE(AnyInk(m, 30 - w / 2 - 1, 8, 30, 8 + h));
  EXPECT_TRUE(AnyInk(m, 30, 8, 30 + w / 2 + 1, 8 + h));
  // Rotated text (reads upwards) fills the rotated box: x .. x + height,
  // centred on y_center.
  const int lw = TextWidth("Label");
  Canvas v(40, 80);
  v.TextVertical(5, 40, "Label", red);
  EXPECT_TRUE(AnyInk(v, 5, 40 - lw / 2 - 1, 5 + h, 40 + lw / 2 + 1));
  EXPECT_FALSE(AnyInk(v, 0, 0, 4, 80));
  EXPECT_FALSE(AnyInk(v, 5 + h + 1, 0, 40, 80));
  EXPECT_FALSE(AnyInk(v, 0, 0, 40, 40 - lw / 2 - 2));
  EXPECT_FALSE(AnyInk(v, 0, 40 + lw / 2 + 2, 40, 80));
  // The first letter ('L') is at the bottom: its ink sits below the centre's.
  int lowest = -1;
  for (int y = 0; y < 80; ++y)
    for (int x = 0; x < 40; ++x)
      if (!(v.Get(x, y) == kWhite)) lowest = y;
  EXPECT_GT(lowest, 40 + lw / 2 - 4);
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
  // Axis-aligned lines between pixel centres cover exactly their pixels.
  Canvas c(20, 20);
  c.Line(2, 3, 12, 3, k);
  c.Line(15, 2, 15, 9, k);
  int drawn = 0;
  for (int y = 0; y < 20; ++y)
    for (int x = 0; x < 20; ++x) {
      const bool on = (y == 3 && x >= 2 && x <= 12) || (x == 15 && y >= 2 && y <= 9);
      EXPECT_EQ(c.Get(x, y), on ? k : kWhite) << x << "," << y;
      drawn += c.Get(x, y) == k;
    }
  EXPECT_EQ(drawn, 11 + 8);
  // A diagonal is antialiased: dark on the ideal line, nothing two pixels off it.
  Canvas g(20, 20);
  g.Line(2, 2, 14, 14, k, 2);
  for (int t = 3; t <= 13; ++t) {
    EXPECT_TRUE(Close(g.Get(t, t), k, 6)) << t;
    EXPECT_EQ(g.Get(t + 3, t), kWhite) << t;
    EXPECT_EQ(g.Get(t, t + 3), kWhite) << t;
  }

  // Far-away endpoints are clipped cheaply, leaving the visible row drawn.
  Canvas far(50, 10);
  const auto start = std::chrono::steady_clock::now();
  far.Line(-1e12, 4, 1e12, 4, k);
  far.Polyline({{-1e12, 7}, {25, 7}, {1e12, 7}}, k, 1);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 1.0);
  for (int x = 0; x < 50; ++x) ASSERT_EQ(far.Get(x, 4), k) << x;
  for (int x = 0; x < 50; ++x) ASSERT_EQ(far.Get(x, 7), k) << x;
  EXPECT_EQ(far.Get(0, 3), kWhite);
  EXPECT_EQ(far.Get(10, 6), kWhite);

  // Dashes: 3 on, 2 off, from the start.
  Canvas d(20, 3);
  d.DashedLine(0, 1, 19, 1, k, 3, 2);
  const std::string want = "###..###..###..###..";
  for (int x = 0; x < 20; ++x) EXPECT_EQ(d.Get(x, 1) == k, want[x] == '#') << x;
  // A polyline of one point is a dot; nothing at all for no points.
  Canvas dot(9, 9);
  dot.Polyline({}, k, 3);
  EXPECT_FALSE(AnyInk(dot, 0, 0, 9, 9));
  dot.Polyline({{4, 4}}, k, 3);
  EXPECT_EQ(dot.Get(4, 4), k);
  EXPECT_EQ(dot.Get(1, 4), kWhite);

  // Width 3 covers the neighbours; rectangles; clip rectangle.
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

  // A moved-from canvas hands over its pixels.
  Canvas moved = std::move(t);
  EXPECT_EQ(moved.Get(9, 15), k);
  EXPECT_EQ(moved.pixels().size(), 20u * 20u * 3u);
}

}  // namespace
}  // namespace longctx
