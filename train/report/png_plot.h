// Why: longctx reports need pictures (the position-frequency curves of the
// STRING paper's Figure 1, the needle-in-a-haystack accuracy heatmaps of its
// Figure 4) produced by the same binary that computed the numbers, on machines
// without Python. cairo (libcairo2-dev) draws them: antialiased lines, text in
// DejaVu Sans (fonts-dejavu-core, through fontconfig) and the PNG encoding;
// this file adds the layout of two chart types on top of a small canvas.
//
// Nothing depends on the clock or the locale and cairo's rasterizer is
// deterministic, so the same input gives the same PNG bytes on one machine.
// Rectangles and axis-aligned lines of whole-pixel width land exactly on
// pixels (no antialiasing blur), so tests can check exact pixels through the
// frames that Render() returns.
#ifndef LONGCTX_TRAIN_PNG_PLOT_H_
#define LONGCTX_TRAIN_PNG_PLOT_H_

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

// cairo.h's cairo_t and cairo_surface_t, declared here so only png_plot.cc includes cairo.
struct _cairo;
struct _cairo_surface;

namespace longctx {

struct Rgb {
  uint8_t r = 0, g = 0, b = 0;
  bool operator==(const Rgb&) const = default;
};
inline constexpr Rgb kWhite{255, 255, 255};
inline constexpr Rgb kBlack{0, 0, 0};
inline constexpr Rgb kGridGrey{225, 225, 225};
inline constexpr Rgb kMissingGrey{200, 200, 200};  // heatmap cells without data

// The series palette (Tableau 10), cycling: index 0 blue, 1 orange, 2 green, ...
Rgb PaletteColor(int index);

// An axis label for v on ticks `step` apart: fixed-point with the fewest
// decimals that write the step exactly ("256", "0.25", "0.5"), or compact
// scientific ("1e-5", "2.5e6") for magnitudes >= 1e6 or < 1e-3.
std::string FormatTickLabel(double v, double step);

enum class HAlign { kLeft, kCenter, kRight };

// Text is DejaVu Sans at `px` pixels per em (cairo's font size).
struct Font {
  double px = 12;
  bool bold = false;
};
inline constexpr Font kLabelFont{12, false};  // tick labels, axis titles, legend, markers
inline constexpr Font kTitleFont{16, true};   // plot titles

// The advance width of one line of text in whole pixels (rounded up); 0 for "".
int TextWidth(std::string_view text, Font font = kLabelFont);
// The face cairo resolved for the font through fontconfig, as "family style"
// ("DejaVu Sans Book", "DejaVu Sans Bold"); "" when it is not a FreeType face.
// Without fonts-dejavu-core fontconfig silently substitutes another family.
std::string FontInUse(Font font = kLabelFont);
// The height of a line of text: the font's ascent plus descent, rounded up.
// Text(x, y, ...) draws into rows [y, y + TextHeight(font)).
int TextHeight(Font font = kLabelFont);

// An RGB image drawn with cairo. Pixel (x, y) is the unit square
// [x, x + 1) × [y, y + 1); line endpoints are pixel centres, so Line(2, 5,
// 9, 5) colours pixels 2..9 of row 5. Drawing clips to the canvas and to the
// clip rectangle (the whole canvas unless SetClip narrowed it).
class Canvas {
 public:
  Canvas(int width, int height, Rgb background = kWhite);  // sizes >= 1 (CHECKed)
  ~Canvas();
  Canvas(Canvas&& other) noexcept;
  Canvas& operator=(Canvas&& other) noexcept;
  Canvas(const Canvas&) = delete;
  Canvas& operator=(const Canvas&) = delete;

  int width() const { return width_; }
  int height() const { return height_; }
  Rgb Get(int x, int y) const;  // (x, y) inside the canvas (CHECKed)
  // Pixels [x0, x1] × [y0, y1] (inclusive) stay drawable; others are clipped.
  void SetClip(int x0, int y0, int x1, int y1);
  void ResetClip();

  // Pixels [x, x + w) × [y, y + h), exactly.
  void FillRect(int x, int y, int w, int h, Rgb color);
  // The border of [x, x + w) × [y, y + h), `thickness` pixels inside it, exactly.
  void StrokeRect(int x, int y, int w, int h, Rgb color, int thickness = 1);
  // A straight line `width` pixels wide between two pixel centres, square
  // caps (so it covers both endpoint pixels). Axis-aligned lines of odd whole
  // width are exact; others are antialiased. Endpoints may be far outside the canvas.
  void Line(double x0, double y0, double x1, double y1, Rgb color, double width = 1);
  // Same, drawing `dash` pixels then skipping `gap` pixels (exact when axis-aligned and 1 pixel wide).
  void DashedLine(double x0, double y0, double x1, double y1, Rgb color, int dash, int gap, double width = 1);
  // A connected line through pixel centres with round joins and caps; one
  // point draws a dot of that diameter. Points may be far outside the canvas.
  void Polyline(const std::vector<std::pair<double, double>>& points, Rgb color, double width);
  // One line of text; y is the top of its TextHeight box, x its left edge / centre / right edge per align.
  void Text(int x, int y, std::string_view text, Rgb color, Font font = kLabelFont, HAlign align = HAlign::kLeft);
  // Text rotated 90° counter-clockwise (reads bottom to top), as y-axis titles
  // are; (x, y_center) is the left edge and the vertical centre of the rotated box.
  void TextVertical(int x, int y_center, std::string_view text, Rgb color, Font font = kLabelFont);

  // width·height·3 bytes, row-major, R G B.
  std::vector<uint8_t> pixels() const;

 private:
  friend absl::StatusOr<std::string> EncodePng(const Canvas& canvas);
  void Release();

  int width_ = 0, height_ = 0;
  _cairo_surface* surface_ = nullptr;
  _cairo* cr_ = nullptr;
};

// PNG (8-bit RGB, cairo's encoder) of a canvas.
absl::StatusOr<std::string> EncodePng(const Canvas& canvas);
// Encodes and writes path (via path.tmp and a rename); errors name the path.
absl::Status WritePng(const Canvas& canvas, const std::string& path);

// ---------------------------------------------------------------- LinePlot

struct PlotSeries {
  std::string name;
  std::vector<double> x, y;  // same length; non-finite points (and y <= 0 on a log axis) break the line
  Rgb color{0, 0, 0};
  bool auto_color = true;  // true: PaletteColor(series index) instead of color
  int thickness = 2;       // line width in pixels
  // Optional error bars: empty, or one [y_low, y_high] per point (drawn as a
  // capped vertical bar in the series' colour; non-finite ends skip the bar).
  std::vector<double> y_low, y_high;
};

struct PlotMarker {
  double x = 0;
  std::string label;  // drawn at the top of the plot area, right of the line
  Rgb color{110, 110, 110};
};

enum class LegendCorner { kTopRight, kTopLeft, kBottomRight, kBottomLeft };

struct LinePlotOptions {
  int width = 960, height = 600;
  std::string title, x_label, y_label;
  bool log_y = false;  // log10 y axis with decade ticks
  // Axis ranges; NaN = from the data (x: its min..max; linear y: widened to
  // whole tick steps; log y: the decades enclosing the positive values).
  double x_min = std::numeric_limits<double>::quiet_NaN();
  double x_max = std::numeric_limits<double>::quiet_NaN();
  double y_min = std::numeric_limits<double>::quiet_NaN();
  double y_max = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> x_ticks;  // empty: automatic 1-2-5 steps
  bool legend = true;
  LegendCorner legend_corner = LegendCorner::kTopRight;
};

// Where the plot area lies and how data maps to it. The area spans pixel
// columns [left, right] and rows [top, bottom] (inclusive); x_min maps to
// left, x_max to right, y_min to bottom, y_max to top.
struct PlotFrame {
  int left = 0, top = 0, right = 0, bottom = 0;
  double x_min = 0, x_max = 1, y_min = 0, y_max = 1;
  bool log_y = false;
  double PixelX(double x) const;
  double PixelY(double y) const;
};

struct RenderedPlot {
  Canvas canvas;
  PlotFrame frame;
};

class LinePlot {
 public:
  explicit LinePlot(LinePlotOptions options = {}) : options_(std::move(options)) {}

  void AddSeries(PlotSeries series) { series_.push_back(std::move(series)); }
  void AddSeries(std::string name, std::vector<double> x, std::vector<double> y);
  void AddMarker(double x, std::string label);
  const LinePlotOptions& options() const { return options_; }

  // Errors: no series, mismatched x/y sizes, no drawable point, an empty or
  // non-finite axis range, a canvas too small for the layout.
  absl::StatusOr<RenderedPlot> Render() const;
  absl::Status WritePng(const std::string& path) const;

 private:
  LinePlotOptions options_;
  std::vector<PlotSeries> series_;
  std::vector<PlotMarker> markers_;
};

// ---------------------------------------------------------------- Heatmap

// The heatmap colour scale of the STRING paper's Figure 4 (the usual
// needle-in-a-haystack palette): t = 0 red #F0496E, 0.5 amber #EBB839, 1 green
// #0CD79F, linear in between; t is clamped to [0, 1]; NaN gives kMissingGrey.
Rgb HeatmapColor(double t);

struct HeatmapOptions {
  int width = 960, height = 600;
  std::string title, x_label, y_label, colorbar_label;
  // One label per column / row (e.g. test lengths, depth percents); empty:
  // the indices. Labels are thinned out where they would overlap.
  std::vector<std::string> col_labels, row_labels;
  double v_min = 0, v_max = 1;  // values map to t = (v − v_min) / (v_max − v_min)
};

struct PixelRect {
  int x = 0, y = 0, w = 0, h = 0;  // [x, x + w) × [y, y + h)
};

struct RenderedHeatmap {
  Canvas canvas;
  int rows = 0, cols = 0;
  PixelRect grid;      // all cells; row 0 at the top, column 0 at the left
  PixelRect colorbar;  // v_max at the top, v_min at the bottom
  // The filled pixels of cell (row, col): a 1-pixel white gap separates cells.
  PixelRect Cell(int row, int col) const;
};

class Heatmap {
 public:
  Heatmap(int rows, int cols, HeatmapOptions options = {});  // rows, cols >= 1 (CHECKed)

  int rows() const { return rows_; }
  int cols() const { return cols_; }
  void Set(int row, int col, double value);  // NaN = no data (CHECKed indices)
  double Get(int row, int col) const;

  // Errors: mismatched label counts, v_max <= v_min, a canvas too small for the grid.
  absl::StatusOr<RenderedHeatmap> Render() const;
  absl::Status WritePng(const std::string& path) const;

 private:
  int rows_, cols_;
  HeatmapOptions options_;
  std::vector<double> values_;  // row-major
};

}  // namespace longctx

#endif  // LONGCTX_TRAIN_PNG_PLOT_H_
