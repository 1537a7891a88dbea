// Why: see png_plot.h. Layout is computed in whole pixels from the font
// metrics; cairo rasterizes. Nothing depends on the locale or the clock, so
// output bytes are reproducible.
#include "train/report/png_plot.h"

#include <cairo-ft.h>
#include <cairo.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/log.h"
#include "data/text_corpus.h"

namespace longctx {
namespace {

constexpr int kPad = 12;     // outer margin
constexpr int kTickLen = 5;  // major tick length
constexpr int kTickGap = 4;  // tick to its label
constexpr char kFontFamily[] = "DejaVu Sans";

// Clips the segment (x0,y0)-(x1,y1) to [xmin,xmax]×[ymin,ymax] (Liang–Barsky).
// Returns false when nothing is left.
bool ClipSegment(double* x0, double* y0, double* x1, double* y1, double xmin, double ymin, double xmax,
                 double ymax) {
  const double dx = *x1 - *x0, dy = *y1 - *y0;
  double t0 = 0, t1 = 1;
  const double p[4] = {-dx, dx, -dy, dy};
  const double q[4] = {*x0 - xmin, xmax - *x0, *y0 - ymin, ymax - *y0};
  for (int k = 0; k < 4; ++k) {
    if (p[k] == 0) {
      if (q[k] < 0) return false;
      continue;
    }
    const double r = q[k] / p[k];
    if (p[k] < 0) {
      if (r > t1) return false;
      t0 = std::max(t0, r);
    } else {
      if (r < t0) return false;
      t1 = std::min(t1, r);
    }
  }
  const double ox = *x0, oy = *y0;
  *x0 = ox + t0 * dx;
  *y0 = oy + t0 * dy;
  *x1 = ox + t1 * dx;
  *y1 = oy + t1 * dy;
  return true;
}

// The 1-2-5 step nearest above raw (raw > 0).
double NiceStep(double raw) {
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  const double m = raw / p;
  return (m <= 1.0 ? 1.0 : m <= 2.0 ? 2.0 : m <= 5.0 ? 5.0 : 10.0) * p;
}

std::vector<double> LinearTicks(double lo, double hi, double step) {
  std::vector<double> ticks;
  const double first = std::ceil(lo / step - 1e-9);
  for (int64_t k = 0;; ++k) {
    const double v = (first + static_cast<double>(k)) * step;
    if (v > hi + step * 1e-9 || k > 1000) break;
    ticks.push_back(std::abs(v) < step * 1e-9 ? 0.0 : v);
  }
  return ticks;
}

// "1.5e+06" → "1.5e6", "1e-05" → "1e-5".
std::string CompactExponent(std::string s) {
  const size_t e = s.find('e');
  if (e == std::string::npos) return s;
  std::string mant = s.substr(0, e), exp = s.substr(e + 1);
  bool neg = false;
  if (!exp.empty() && (exp[0] == '+' || exp[0] == '-')) {
    neg = exp[0] == '-';
    exp = exp.substr(1);
  }
  while (exp.size() > 1 && exp[0] == '0') exp = exp.substr(1);
  return absl::StrCat(mant, "e", neg ? "-" : "", exp);
}

}  // namespace

std::string FormatTickLabel(double v, double step) {
  step = std::abs(step);
  if (!(step > 0) || !std::isfinite(step)) step = 1;
  if (std::abs(v) < step * 1e-9) v = 0;  // no "-0"
  const double a = std::abs(v);
  if (a >= 1e6 || (a > 0 && a < 1e-3)) {
    const int digits = std::clamp(static_cast<int>(std::floor(std::log10(a)) - std::floor(std::log10(step))), 0, 3);
    return CompactExponent(absl::StrFormat("%.*e", digits, v));
  }
  // The fewest decimals that write the step exactly (0.25 needs two).
  int decimals = 0;
  for (double scaled = step; decimals < 6; ++decimals, scaled *= 10)
    if (std::abs(scaled - std::round(scaled)) <= 1e-6 * scaled) break;
  return absl::StrFormat("%.*f", decimals, v);
}

namespace {

// The label of decade 10^e on a log axis.
std::string DecadeLabel(int e) {
  if (e >= 0 && e <= 4) return absl::StrFormat("%.0f", std::pow(10.0, e));
  if (e < 0 && e >= -3) return absl::StrFormat("%.*f", -e, std::pow(10.0, e));
  return absl::StrCat("1e", e);
}

Rgb Lerp(Rgb a, Rgb b, double t) {
  auto ch = [t](uint8_t x, uint8_t y) {
    return static_cast<uint8_t>(std::lround(static_cast<double>(x) + (static_cast<double>(y) - x) * t));
  };
  return Rgb{ch(a.r, b.r), ch(a.g, b.g), ch(a.b, b.b)};
}

// Selects the font with fixed rendering options: greyscale antialiasing (no
// subpixel colour fringes), slight hinting and hinted metrics, whatever the
// fontconfig defaults of the machine say, so measuring and drawing agree.
void SetFont(cairo_t* cr, Font font) {
  cairo_select_font_face(cr, kFontFamily, CAIRO_FONT_SLANT_NORMAL,
                         font.bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size(cr, font.px);
  cairo_font_options_t* options = cairo_font_options_create();
  cairo_font_options_set_antialias(options, CAIRO_ANTIALIAS_GRAY);
  cairo_font_options_set_subpixel_order(options, CAIRO_SUBPIXEL_ORDER_DEFAULT);
  cairo_font_options_set_hint_style(options, CAIRO_HINT_STYLE_SLIGHT);
  cairo_font_options_set_hint_metrics(options, CAIRO_HINT_METRICS_ON);
  cairo_set_font_options(cr, options);
  cairo_font_options_destroy(options);
}

void SetColor(cairo_t* cr, Rgb c) { cairo_set_source_rgb(cr, c.r / 255.0, c.g / 255.0, c.b / 255.0); }

// A scratch context for measuring text (cairo measures through a context).
class Measure {
 public:
  explicit Measure(Font font)
      : surface_(cairo_image_surface_create(CAIRO_FORMAT_RGB24, 1, 1)), cr_(cairo_create(surface_)) {
    SetFont(cr_, font);
  }
  ~Measure() {
    cairo_destroy(cr_);
    cairo_surface_destroy(surface_);
  }
  Measure(const Measure&) = delete;
  Measure& operator=(const Measure&) = delete;
  cairo_t* cr() const { return cr_; }

 private:
  cairo_surface_t* surface_;
  cairo_t* cr_;
};

// cairo wants NUL-terminated valid UTF-8: an invalid byte would put the
// context into an error state in which every later drawing call is ignored,
// so a series name from a file could blank the rest of the plot.
std::string CairoText(std::string_view text) { return ReplaceInvalidUtf8(text); }

double Advance(cairo_t* cr, std::string_view text) {
  if (text.empty()) return 0;
  const std::string s = CairoText(text);
  cairo_text_extents_t e;
  cairo_text_extents(cr, s.c_str(), &e);
  return e.x_advance;
}

cairo_status_t AppendToString(void* closure, const unsigned char* data, unsigned int length) {
  static_cast<std::string*>(closure)->append(reinterpret_cast<const char*>(data), length);
  return CAIRO_STATUS_SUCCESS;
}

std::string ErrnoText(int err) {
  char buf[256];
  return std::string(strerror_r(err, buf, sizeof(buf)));
}

}  // namespace

Rgb PaletteColor(int index) {
  static constexpr Rgb kPalette[10] = {{31, 119, 180}, {255, 127, 14}, {44, 160, 44},  {214, 39, 40},
                                       {148, 103, 189}, {140, 86, 75}, {227, 119, 194}, {127, 127, 127},
                                       {188, 189, 34},  {23, 190, 207}};
  return kPalette[((index % 10) + 10) % 10];
}

// ---------------------------------------------------------------- Text

int TextWidth(std::string_view text, Font font) {
  const Measure m(font);
  return static_cast<int>(std::ceil(Advance(m.cr(), text) - 1e-9));
}

std::string FontInUse(Font font) {
  const Measure m(font);
  cairo_scaled_font_t* scaled = cairo_get_scaled_font(m.cr());
  if (cairo_scaled_font_get_type(scaled) != CAIRO_FONT_TYPE_FT) return "";
  FT_Face face = cairo_ft_scaled_font_lock_face(scaled);
  if (face == nullptr) return "";
  std::string name = absl::StrCat(face->family_name != nullptr ? face->family_name : "", " ",
                                  face->style_name != nullptr ? face->style_name : "");
  cairo_ft_scaled_font_unlock_face(scaled);
  return name;
}

int TextHeight(Font font) {
  const Measure m(font);
  cairo_font_extents_t e;
  cairo_font_extents(m.cr(), &e);
  return static_cast<int>(std::ceil(e.ascent + e.descent - 1e-9));
}

// ---------------------------------------------------------------- Canvas

Canvas::Canvas(int width, int height, Rgb background) : width_(width), height_(height) {
  CHECK(width >= 1 && height >= 1) << "canvas " << width << "x" << height;
  surface_ = cairo_image_surface_create(CAIRO_FORMAT_RGB24, width, height);
  CHECK(cairo_surface_status(surface_) == CAIRO_STATUS_SUCCESS)
      << "cairo surface " << width << "x" << height << ": " << cairo_status_to_string(cairo_surface_status(surface_));
  cr_ = cairo_create(surface_);
  CHECK(cairo_status(cr_) == CAIRO_STATUS_SUCCESS) << "cairo_create: " << cairo_status_to_string(cairo_status(cr_));
  SetColor(cr_, background);
  cairo_paint(cr_);
}

Canvas::~Canvas() { Release(); }

void Canvas::Release() {
  if (cr_ != nullptr) cairo_destroy(cr_);
  if (surface_ != nullptr) cairo_surface_destroy(surface_);
  cr_ = nullptr;
  surface_ = nullptr;
}

Canvas::Canvas(Canvas&& other) noexcept
    : width_(other.width_),
      height_(other.height_),
      surface_(std::exchange(other.surface_, nullptr)),
      cr_(std::exchange(other.cr_, nullptr)) {}

Canvas& Canvas::operator=(Canvas&& other) noexcept {
  if (this != &other) {
    Release();
    width_ = other.width_;
    height_ = other.height_;
    surface_ = std::exchange(other.surface_, nullptr);
    cr_ = std::exchange(other.cr_, nullptr);
  }
  return *this;
}

Rgb Canvas::Get(int x, int y) const {
  CHECK(surface_ != nullptr) << "canvas used after a move";
  CHECK(x >= 0 && x < width_ && y >= 0 && y < height_) << "pixel (" << x << ", " << y << ")";
  cairo_surface_flush(surface_);
  const unsigned char* row = cairo_image_surface_get_data(surface_) + static_cast<size_t>(y) *
                                                                         cairo_image_surface_get_stride(surface_);
  uint32_t v;  // CAIRO_FORMAT_RGB24: one native-endian 0x00RRGGBB word per pixel
  std::memcpy(&v, row + static_cast<size_t>(x) * 4, 4);
  return Rgb{static_cast<uint8_t>(v >> 16), static_cast<uint8_t>(v >> 8), static_cast<uint8_t>(v)};
}

std::vector<uint8_t> Canvas::pixels() const {
  std::vector<uint8_t> out;
  out.reserve(static_cast<size_t>(width_) * height_ * 3);
  for (int y = 0; y < height_; ++y)
    for (int x = 0; x < width_; ++x) {
      const Rgb c = Get(x, y);
      out.insert(out.end(), {c.r, c.g, c.b});
    }
  return out;
}

void Canvas::SetClip(int x0, int y0, int x1, int y1) {
  x0 = std::max(0, x0);
  y0 = std::max(0, y0);
  x1 = std::min(width_ - 1, x1);
  y1 = std::min(height_ - 1, y1);
  cairo_reset_clip(cr_);
  cairo_rectangle(cr_, x0, y0, std::max(0, x1 - x0 + 1), std::max(0, y1 - y0 + 1));
  cairo_clip(cr_);
}

void Canvas::ResetClip() { cairo_reset_clip(cr_); }

void Canvas::FillRect(int x, int y, int w, int h, Rgb color) {
  if (w <= 0 || h <= 0) return;
  SetColor(cr_, color);
  cairo_rectangle(cr_, x, y, w, h);  // whole-pixel edges: every pixel fully in or out
  cairo_fill(cr_);
}

void Canvas::StrokeRect(int x, int y, int w, int h, Rgb color, int thickness) {
  const int t = std::max(1, std::min({thickness, (w + 1) / 2, (h + 1) / 2}));
  FillRect(x, y, w, t, color);
  FillRect(x, y + h - t, w, t, color);
  FillRect(x, y, t, h, color);
  FillRect(x + w - t, y, t, h, color);
}

void Canvas::Line(double x0, double y0, double x1, double y1, Rgb color, double width) {
  DashedLine(x0, y0, x1, y1, color, 0, 0, width);
}

void Canvas::DashedLine(double x0, double y0, double x1, double y1, Rgb color, int dash, int gap, double width) {
  if (!std::isfinite(x0) || !std::isfinite(y0) || !std::isfinite(x1) || !std::isfinite(y1) || !(width > 0)) return;
  // Cut away what lies far outside the canvas (cairo's fixed-point
  // coordinates overflow there), keeping the dash phase of the uncut start.
  const double m = width + 2.0;
  const double ox = x0, oy = y0;
  if (!ClipSegment(&x0, &y0, &x1, &y1, -m, -m, width_ - 1 + m, height_ - 1 + m)) return;
  SetColor(cr_, color);
  cairo_set_line_width(cr_, width);
  cairo_set_line_cap(cr_, CAIRO_LINE_CAP_SQUARE);
  if (dash > 0) {
    // Square caps add width/2 at each end of every dash: shorten the dash by
    // the width so a dash covers `dash` pixels.
    const double pattern[2] = {std::max(1e-3, dash - width), std::max(0.0, gap + width)};
    cairo_set_dash(cr_, pattern, 2, -std::hypot(x0 - ox, y0 - oy));
  }
  cairo_move_to(cr_, x0 + 0.5, y0 + 0.5);
  cairo_line_to(cr_, x1 + 0.5, y1 + 0.5);
  cairo_stroke(cr_);
  cairo_set_dash(cr_, nullptr, 0, 0);
}

void Canvas::Polyline(const std::vector<std::pair<double, double>>& points, Rgb color, double width) {
  if (points.empty() || !(width > 0)) return;
  SetColor(cr_, color);
  if (points.size() == 1) {
    const auto [x, y] = points[0];
    if (!std::isfinite(x) || !std::isfinite(y) || std::abs(x) > 1e6 || std::abs(y) > 1e6) return;
    cairo_arc(cr_, x + 0.5, y + 0.5, width / 2, 0, 2 * M_PI);
    cairo_fill(cr_);
    return;
  }
  cairo_set_line_width(cr_, width);
  cairo_set_line_cap(cr_, CAIRO_LINE_CAP_ROUND);
  cairo_set_line_join(cr_, CAIRO_LINE_JOIN_ROUND);
  // Each segment clipped to the canvas plus a margin: a clipped end lies
  // outside the visible area, so starting a new sub-path there shows no seam.
  const double m = width + 2.0;
  bool open = false;
  double last_x = 0, last_y = 0;
  for (size_t i = 1; i < points.size(); ++i) {
    double ax = points[i - 1].first, ay = points[i - 1].second, bx = points[i].first, by = points[i].second;
    if (!std::isfinite(ax) || !std::isfinite(ay) || !std::isfinite(bx) || !std::isfinite(by) ||
        !ClipSegment(&ax, &ay, &bx, &by, -m, -m, width_ - 1 + m, height_ - 1 + m)) {
      open = false;
      continue;
    }
    if (!open || ax != last_x || ay != last_y) cairo_move_to(cr_, ax + 0.5, ay + 0.5);
    cairo_line_to(cr_, bx + 0.5, by + 0.5);
    open = bx == points[i].first && by == points[i].second;  // a clipped end closes the sub-path
    last_x = bx;
    last_y = by;
  }
  cairo_stroke(cr_);
}

void Canvas::Text(int x, int y, std::string_view text, Rgb color, Font font, HAlign align) {
  if (text.empty()) return;
  SetFont(cr_, font);
  const std::string s = CairoText(text);
  const double w = Advance(cr_, text);
  double left = x;
  if (align == HAlign::kCenter) left = x - std::round(w / 2);
  if (align == HAlign::kRight) left = x - std::ceil(w - 1e-9);
  cairo_font_extents_t e;
  cairo_font_extents(cr_, &e);
  SetColor(cr_, color);
  cairo_move_to(cr_, left, y + std::round(e.ascent));
  cairo_show_text(cr_, s.c_str());
  cairo_new_path(cr_);
}

void Canvas::TextVertical(int x, int y_center, std::string_view text, Rgb color, Font font) {
  if (text.empty()) return;
  SetFont(cr_, font);
  const std::string s = CairoText(text);
  const double w = Advance(cr_, text);
  cairo_font_extents_t e;
  cairo_font_extents(cr_, &e);
  // Rotating by −90° turns the text direction upwards and the glyph tops to
  // the left: the baseline is the column ascent pixels right of x.
  cairo_save(cr_);
  cairo_translate(cr_, x + std::round(e.ascent), y_center + std::round(w / 2));
  cairo_rotate(cr_, -M_PI / 2);
  SetColor(cr_, color);
  cairo_move_to(cr_, 0, 0);
  cairo_show_text(cr_, s.c_str());
  cairo_new_path(cr_);
  cairo_restore(cr_);
}

// ---------------------------------------------------------------- PNG

absl::StatusOr<std::string> EncodePng(const Canvas& canvas) {
  if (canvas.surface_ == nullptr) return absl::FailedPreconditionError("PNG encoding: canvas used after a move");
  // A context in error has ignored every drawing call since: the picture is incomplete.
  if (const cairo_status_t st = cairo_status(canvas.cr_); st != CAIRO_STATUS_SUCCESS)
    return absl::InternalError(absl::StrCat("drawing the plot failed: ", cairo_status_to_string(st)));
  std::string out;
  cairo_surface_flush(canvas.surface_);
  const cairo_status_t st = cairo_surface_write_to_png_stream(canvas.surface_, AppendToString, &out);
  if (st != CAIRO_STATUS_SUCCESS)
    return absl::InternalError(absl::StrCat("PNG encoding failed: ", cairo_status_to_string(st)));
  return out;
}

absl::Status WritePng(const Canvas& canvas, const std::string& path) {
  absl::StatusOr<std::string> bytes = EncodePng(canvas);
  if (!bytes.ok()) return absl::InternalError(absl::StrCat("writing ", path, ": ", bytes.status().message()));
  const std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) return absl::InternalError(absl::StrCat("writing ", path, ": ", ErrnoText(errno)));
  const size_t n = std::fwrite(bytes->data(), 1, bytes->size(), f);
  const int write_err = n == bytes->size() ? 0 : errno;
  if (std::fclose(f) != 0 || write_err != 0) {
    const int err = write_err != 0 ? write_err : errno;
    std::remove(tmp.c_str());
    return absl::InternalError(absl::StrCat("writing ", path, ": ", ErrnoText(err)));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    return absl::InternalError(absl::StrCat("writing ", path, " (rename from ", tmp, "): ", ErrnoText(err)));
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------- LinePlot

double PlotFrame::PixelX(double x) const {
  return left + (x - x_min) / (x_max - x_min) * static_cast<double>(right - left);
}

double PlotFrame::PixelY(double y) const {
  const double t = log_y ? (std::log10(y) - std::log10(y_min)) / (std::log10(y_max) - std::log10(y_min))
                         : (y - y_min) / (y_max - y_min);
  return bottom - t * static_cast<double>(bottom - top);
}

void LinePlot::AddSeries(std::string name, std::vector<double> x, std::vector<double> y) {
  PlotSeries s;
  s.name = std::move(name);
  s.x = std::move(x);
  s.y = std::move(y);
  series_.push_back(std::move(s));
}

void LinePlot::AddMarker(double x, std::string label) {
  PlotMarker m;
  m.x = x;
  m.label = std::move(label);
  markers_.push_back(std::move(m));
}

absl::StatusOr<RenderedPlot> LinePlot::Render() const {
  const LinePlotOptions& o = options_;
  if (series_.empty()) return absl::InvalidArgumentError("line plot: no series");
  const bool log_y = o.log_y;
  auto usable = [log_y](double x, double y) { return std::isfinite(x) && std::isfinite(y) && (!log_y || y > 0); };
  double dx_min = INFINITY, dx_max = -INFINITY, dy_min = INFINITY, dy_max = -INFINITY;
  for (const PlotSeries& s : series_) {
    if (s.x.size() != s.y.size())
      return absl::InvalidArgumentError(
          absl::StrCat("line plot: series '", s.name, "' has ", s.x.size(), " x and ", s.y.size(), " y values"));
    if ((!s.y_low.empty() || !s.y_high.empty()) && (s.y_low.size() != s.x.size() || s.y_high.size() != s.x.size()))
      return absl::InvalidArgumentError(absl::StrCat("line plot: series '", s.name, "' has ", s.x.size(),
                                                     " points but ", s.y_low.size(), " y_low and ", s.y_high.size(),
                                                     " y_high values (error bars need one of each per point)"));
    for (size_t i = 0; i < s.x.size(); ++i) {
      if (!usable(s.x[i], s.y[i])) continue;
      dx_min = std::min(dx_min, s.x[i]);
      dx_max = std::max(dx_max, s.x[i]);
      dy_min = std::min(dy_min, s.y[i]);
      dy_max = std::max(dy_max, s.y[i]);
      for (const std::vector<double>* e : {&s.y_low, &s.y_high})
        if (!e->empty() && usable(s.x[i], (*e)[i])) dy_min = std::min(dy_min, (*e)[i]), dy_max = std::max(dy_max, (*e)[i]);
    }
  }
  if (!(dx_min <= dx_max)) return absl::InvalidArgumentError("line plot: no drawable point");

  PlotFrame f;
  f.log_y = log_y;
  f.x_min = std::isnan(o.x_min) ? dx_min : o.x_min;
  f.x_max = std::isnan(o.x_max) ? dx_max : o.x_max;
  if (f.x_min == f.x_max && std::isnan(o.x_min) && std::isnan(o.x_max)) f.x_min -= 0.5, f.x_max += 0.5;
  // y range and ticks.
  std::vector<double> y_major;                  // data values of labelled / gridded ticks
  std::vector<std::string> y_labels;            // "" = unlabelled major tick
  std::vector<double> y_minor;                  // short unlabelled ticks (log axes)
  if (log_y) {
    f.y_min = std::isnan(o.y_min) ? std::pow(10.0, std::floor(std::log10(dy_min))) : o.y_min;
    f.y_max = std::isnan(o.y_max) ? std::pow(10.0, std::ceil(std::log10(dy_max))) : o.y_max;
    if (f.y_min == f.y_max && std::isnan(o.y_max)) f.y_max *= 10;
    if (!(f.y_min > 0 && f.y_max > f.y_min && std::isfinite(f.y_max)))
      return absl::InvalidArgumentError(absl::StrFormat("line plot: bad log y range [%g, %g]", f.y_min, f.y_max));
    const int e0 = static_cast<int>(std::ceil(std::log10(f.y_min) - 1e-9));
    const int e1 = static_cast<int>(std::floor(std::log10(f.y_max) + 1e-9));
    const int n_decades = e1 - e0 + 1;
    const int label_every = std::max(1, (n_decades + 9) / 10);
    for (int e = e0; e <= e1; ++e) {
      y_major.push_back(std::pow(10.0, e));
      y_labels.push_back((e - e0) % label_every == 0 ? DecadeLabel(e) : "");
    }
    if (n_decades <= 6)
      for (int e = e0 - 1; e <= e1; ++e)
        for (int m = 2; m <= 9; ++m) {
          const double v = m * std::pow(10.0, e);
          if (v >= f.y_min && v <= f.y_max) y_minor.push_back(v);
        }
  } else {
    double lo = std::isnan(o.y_min) ? dy_min : o.y_min, hi = std::isnan(o.y_max) ? dy_max : o.y_max;
    if (lo == hi) {
      const double d = lo == 0 ? 1.0 : std::abs(lo) * 0.5;
      if (std::isnan(o.y_min)) lo -= d;
      if (std::isnan(o.y_max)) hi += d;
    }
    if (!(hi > lo) || !std::isfinite(lo) || !std::isfinite(hi))
      return absl::InvalidArgumentError(absl::StrFormat("line plot: bad y range [%g, %g]", lo, hi));
    const double step = NiceStep((hi - lo) / 6);
    if (std::isnan(o.y_min)) lo = std::floor(lo / step + 1e-9) * step;
    if (std::isnan(o.y_max)) hi = std::ceil(hi / step - 1e-9) * step;
    f.y_min = lo;
    f.y_max = hi;
    for (double v : LinearTicks(lo, hi, step)) {
      y_major.push_back(v);
      y_labels.push_back(FormatTickLabel(v, step));
    }
  }
  if (!(f.x_max > f.x_min) || !std::isfinite(f.x_min) || !std::isfinite(f.x_max))
    return absl::InvalidArgumentError(absl::StrFormat("line plot: bad x range [%g, %g]", f.x_min, f.x_max));
  std::vector<double> x_ticks;
  std::vector<std::string> x_labels;
  if (!o.x_ticks.empty()) {
    double min_gap = INFINITY;
    for (size_t i = 1; i < o.x_ticks.size(); ++i) min_gap = std::min(min_gap, std::abs(o.x_ticks[i] - o.x_ticks[i - 1]));
    for (double v : o.x_ticks)
      if (v >= f.x_min && v <= f.x_max) {
        x_ticks.push_back(v);
        x_labels.push_back(FormatTickLabel(v, std::isfinite(min_gap) && min_gap > 0 ? min_gap : std::max(1.0, std::abs(v))));
      }
  } else {
    const double step = NiceStep((f.x_max - f.x_min) / 8);
    for (double v : LinearTicks(f.x_min, f.x_max, step)) {
      x_ticks.push_back(v);
      x_labels.push_back(FormatTickLabel(v, step));
    }
  }

  // Layout.
  const int th = TextHeight(kLabelFont);
  int y_label_w = 0;
  for (const std::string& s : y_labels) y_label_w = std::max(y_label_w, TextWidth(s));
  const int title_h = o.title.empty() ? 0 : TextHeight(kTitleFont) + kPad;
  const int last_x_label_w = x_labels.empty() ? 0 : TextWidth(x_labels.back());
  const int margin_left = kPad + (o.y_label.empty() ? 0 : th + 2 * kTickGap) + y_label_w + kTickGap + kTickLen;
  const int margin_right = kPad + last_x_label_w / 2;
  const int margin_top = kPad + title_h + th / 2;  // room for the top y label
  const int margin_bottom = kTickLen + kTickGap + th + (o.x_label.empty() ? 0 : 2 * kTickGap + th) + kPad;
  f.left = margin_left;
  f.right = o.width - 1 - margin_right;
  f.top = margin_top;
  f.bottom = o.height - 1 - margin_bottom;
  if (o.width <= 0 || o.height <= 0 || f.right - f.left < 20 || f.bottom - f.top < 20)
    return absl::InvalidArgumentError(
        absl::StrCat("line plot: canvas ", o.width, "x", o.height, " is too small for its labels"));

  RenderedPlot out{Canvas(o.width, o.height, kWhite), f};
  Canvas& c = out.canvas;
  // Grid.
  for (double v : x_ticks) {
    const int px = static_cast<int>(std::lround(f.PixelX(v)));
    c.Line(px, f.top, px, f.bottom, kGridGrey);
  }
  for (double v : y_major) {
    const int py = static_cast<int>(std::lround(f.PixelY(v)));
    c.Line(f.left, py, f.right, py, kGridGrey);
  }
  // Markers, then series, clipped to the plot area.
  c.SetClip(f.left, f.top, f.right, f.bottom);
  for (const PlotMarker& m : markers_) {
    if (!(m.x >= f.x_min && m.x <= f.x_max)) continue;
    const int px = static_cast<int>(std::lround(f.PixelX(m.x)));
    c.DashedLine(px, f.top, px, f.bottom, m.color, 6, 4);
    c.Text(px + 4, f.top + 4, m.label, m.color);
  }
  for (size_t si = 0; si < series_.size(); ++si) {
    const PlotSeries& s = series_[si];
    const Rgb color = s.auto_color ? PaletteColor(static_cast<int>(si)) : s.color;
    // One polyline per run of drawable points; a lone point stays visible as a dot.
    std::vector<std::pair<double, double>> run;
    for (size_t i = 0; i <= s.x.size(); ++i) {
      if (i < s.x.size() && usable(s.x[i], s.y[i])) {
        run.emplace_back(f.PixelX(s.x[i]), f.PixelY(s.y[i]));
        continue;
      }
      c.Polyline(run, color, run.size() == 1 ? s.thickness + 2.0 : s.thickness);
      run.clear();
    }
    for (size_t i = 0; i < s.y_low.size(); ++i) {
      if (!usable(s.x[i], s.y_low[i]) || !usable(s.x[i], s.y_high[i])) continue;
      const double px = f.PixelX(s.x[i]), lo = f.PixelY(s.y_low[i]), hi = f.PixelY(s.y_high[i]);
      constexpr double kCap = 4;
      c.Line(px, lo, px, hi, color, 1);
      c.Line(px - kCap, lo, px + kCap, lo, color, 1);
      c.Line(px - kCap, hi, px + kCap, hi, color, 1);
    }
  }
  c.ResetClip();
  // Frame, ticks, labels.
  c.StrokeRect(f.left, f.top, f.right - f.left + 1, f.bottom - f.top + 1, kBlack);
  for (size_t i = 0; i < x_ticks.size(); ++i) {
    const int px = static_cast<int>(std::lround(f.PixelX(x_ticks[i])));
    c.Line(px, f.bottom + 1, px, f.bottom + kTickLen, kBlack);
    c.Text(px, f.bottom + kTickLen + kTickGap, x_labels[i], kBlack, kLabelFont, HAlign::kCenter);
  }
  for (size_t i = 0; i < y_major.size(); ++i) {
    const int py = static_cast<int>(std::lround(f.PixelY(y_major[i])));
    c.Line(f.left - kTickLen, py, f.left - 1, py, kBlack);
    c.Text(f.left - kTickLen - kTickGap, py - th / 2, y_labels[i], kBlack, kLabelFont, HAlign::kRight);
  }
  for (double v : y_minor) {
    const int py = static_cast<int>(std::lround(f.PixelY(v)));
    c.Line(f.left - 3, py, f.left - 1, py, kBlack);
  }
  if (!o.title.empty()) c.Text(o.width / 2, kPad, o.title, kBlack, kTitleFont, HAlign::kCenter);
  if (!o.x_label.empty())
    c.Text((f.left + f.right) / 2, f.bottom + kTickLen + kTickGap + th + 2 * kTickGap, o.x_label, kBlack, kLabelFont,
           HAlign::kCenter);
  if (!o.y_label.empty()) c.TextVertical(kPad, (f.top + f.bottom) / 2, o.y_label, kBlack);
  // Legend.
  std::vector<size_t> named;
  for (size_t i = 0; i < series_.size(); ++i)
    if (!series_[i].name.empty()) named.push_back(i);
  if (o.legend && !named.empty()) {
    constexpr int kSample = 24;
    const int row_h = th + 4;
    int name_w = 0;
    for (size_t i : named) name_w = std::max(name_w, TextWidth(series_[i].name));
    const int w = 8 + kSample + 6 + name_w + 8;
    const int h = 6 + static_cast<int>(named.size()) * row_h + 2;
    const bool right = o.legend_corner == LegendCorner::kTopRight || o.legend_corner == LegendCorner::kBottomRight;
    const bool top = o.legend_corner == LegendCorner::kTopRight || o.legend_corner == LegendCorner::kTopLeft;
    const int lx = right ? f.right - 8 - w : f.left + 8;
    const int ly = top ? f.top + 8 : f.bottom - 8 - h;
    c.FillRect(lx, ly, w, h, kWhite);
    c.StrokeRect(lx, ly, w, h, Rgb{150, 150, 150});
    for (size_t k = 0; k < named.size(); ++k) {
      const PlotSeries& s = series_[named[k]];
      const Rgb color = s.auto_color ? PaletteColor(static_cast<int>(named[k])) : s.color;
      const int row_y = ly + 6 + static_cast<int>(k) * row_h;
      const int mid = row_y + th / 2;
      c.Polyline({{lx + 8.0, mid}, {lx + 8.0 + kSample, mid}}, color, std::max(2, s.thickness));
      c.Text(lx + 8 + kSample + 6, row_y, s.name, kBlack);
    }
  }
  return out;
}

absl::Status LinePlot::WritePng(const std::string& path) const {
  absl::StatusOr<RenderedPlot> r = Render();
  if (!r.ok()) return absl::Status(r.status().code(), absl::StrCat("plot for ", path, ": ", r.status().message()));
  return longctx::WritePng(r->canvas, path);
}

// ---------------------------------------------------------------- Heatmap

Rgb HeatmapColor(double t) {
  if (std::isnan(t)) return kMissingGrey;
  static constexpr Rgb kLow{240, 73, 110}, kMid{235, 184, 57}, kHigh{12, 215, 159};
  t = std::clamp(t, 0.0, 1.0);
  return t <= 0.5 ? Lerp(kLow, kMid, t / 0.5) : Lerp(kMid, kHigh, (t - 0.5) / 0.5);
}

PixelRect RenderedHeatmap::Cell(int row, int col) const {
  CHECK(row >= 0 && row < rows && col >= 0 && col < cols) << "cell (" << row << ", " << col << ")";
  const int x0 = grid.x + col * grid.w / cols, x1 = grid.x + (col + 1) * grid.w / cols;
  const int y0 = grid.y + row * grid.h / rows, y1 = grid.y + (row + 1) * grid.h / rows;
  return PixelRect{x0, y0, x1 - x0 - 1, y1 - y0 - 1};
}

Heatmap::Heatmap(int rows, int cols, HeatmapOptions options)
    : rows_(rows), cols_(cols), options_(std::move(options)) {
  CHECK(rows >= 1 && cols >= 1) << "heatmap " << rows << "x" << cols;
  values_.assign(static_cast<size_t>(rows) * cols, std::numeric_limits<double>::quiet_NaN());
}

void Heatmap::Set(int row, int col, double value) {
  CHECK(row >= 0 && row < rows_ && col >= 0 && col < cols_) << "cell (" << row << ", " << col << ")";
  values_[static_cast<size_t>(row) * cols_ + col] = value;
}

double Heatmap::Get(int row, int col) const {
  CHECK(row >= 0 && row < rows_ && col >= 0 && col < cols_) << "cell (" << row << ", " << col << ")";
  return values_[static_cast<size_t>(row) * cols_ + col];
}

absl::StatusOr<RenderedHeatmap> Heatmap::Render() const {
  const HeatmapOptions& o = options_;
  if (!o.col_labels.empty() && static_cast<int>(o.col_labels.size()) != cols_)
    return absl::InvalidArgumentError(
        absl::StrCat("heatmap: ", o.col_labels.size(), " column labels for ", cols_, " columns"));
  if (!o.row_labels.empty() && static_cast<int>(o.row_labels.size()) != rows_)
    return absl::InvalidArgumentError(absl::StrCat("heatmap: ", o.row_labels.size(), " row labels for ", rows_, " rows"));
  if (!(o.v_max > o.v_min) || !std::isfinite(o.v_min) || !std::isfinite(o.v_max))
    return absl::InvalidArgumentError(absl::StrFormat("heatmap: bad value range [%g, %g]", o.v_min, o.v_max));
  std::vector<std::string> col_labels = o.col_labels, row_labels = o.row_labels;
  if (col_labels.empty())
    for (int j = 0; j < cols_; ++j) col_labels.push_back(absl::StrCat(j));
  if (row_labels.empty())
    for (int i = 0; i < rows_; ++i) row_labels.push_back(absl::StrCat(i));
  const double cb_step = (o.v_max - o.v_min) / 4;
  std::vector<std::string> cb_labels;
  for (int k = 0; k <= 4; ++k) cb_labels.push_back(FormatTickLabel(o.v_min + k * cb_step, cb_step));

  // Layout.
  constexpr int kBarGap = 14, kBarW = 18;
  const int th = TextHeight(kLabelFont);
  int row_label_w = 0, col_label_w = 0, cb_label_w = 0;
  for (const std::string& s : row_labels) row_label_w = std::max(row_label_w, TextWidth(s));
  for (const std::string& s : col_labels) col_label_w = std::max(col_label_w, TextWidth(s));
  for (const std::string& s : cb_labels) cb_label_w = std::max(cb_label_w, TextWidth(s));
  const int title_h = o.title.empty() ? 0 : TextHeight(kTitleFont) + kPad;
  const int margin_left = kPad + (o.y_label.empty() ? 0 : th + 2 * kTickGap) + row_label_w + 6;
  const int margin_right = kBarGap + kBarW + kTickGap + kTickGap + cb_label_w +
                           (o.colorbar_label.empty() ? 0 : 2 * kTickGap + th) + kPad;
  const int margin_top = kPad + title_h + th / 2;  // room for the colour bar's top label
  const int margin_bottom = 6 + th + (o.x_label.empty() ? 0 : 2 * kTickGap + th) + kPad;
  RenderedHeatmap out{Canvas(std::max(1, o.width), std::max(1, o.height), kWhite), rows_, cols_, {}, {}};
  out.grid = PixelRect{margin_left, margin_top, o.width - margin_left - margin_right,
                       o.height - margin_top - margin_bottom};
  if (o.width <= 0 || o.height <= 0 || out.grid.w < 2 * cols_ || out.grid.h < 2 * rows_ || out.grid.w < 20 ||
      out.grid.h < 20)
    return absl::InvalidArgumentError(absl::StrCat("heatmap: canvas ", o.width, "x", o.height, " is too small for ",
                                                   rows_, "x", cols_, " cells and their labels"));
  out.colorbar = PixelRect{out.grid.x + out.grid.w + kBarGap, out.grid.y, kBarW, out.grid.h};
  Canvas& c = out.canvas;

  // Cells.
  for (int i = 0; i < rows_; ++i)
    for (int j = 0; j < cols_; ++j) {
      const PixelRect r = out.Cell(i, j);
      const double v = Get(i, j);
      c.FillRect(r.x, r.y, r.w, r.h, HeatmapColor(std::isnan(v) ? v : (v - o.v_min) / (o.v_max - o.v_min)));
    }
  // Row labels (thinned so they do not overlap), centred on their rows.
  const double cell_h = static_cast<double>(out.grid.h) / rows_, cell_w = static_cast<double>(out.grid.w) / cols_;
  const int row_every = std::max(1, static_cast<int>(std::ceil((th + 1) / cell_h)));
  for (int i = 0; i < rows_; i += row_every) {
    const PixelRect r = out.Cell(i, 0);
    c.Text(out.grid.x - 6, r.y + r.h / 2 - th / 2, row_labels[i], kBlack, kLabelFont, HAlign::kRight);
  }
  const int col_every = std::max(1, static_cast<int>(std::ceil((col_label_w + 8) / cell_w)));
  for (int j = 0; j < cols_; j += col_every) {
    const PixelRect r = out.Cell(0, j);
    c.Text(r.x + r.w / 2, out.grid.y + out.grid.h + 6, col_labels[j], kBlack, kLabelFont, HAlign::kCenter);
  }
  // Colour bar: one colour per pixel row, v_max at the top; a frame just outside it.
  const PixelRect& b = out.colorbar;
  for (int py = 0; py < b.h; ++py)
    c.FillRect(b.x, b.y + py, b.w, 1, HeatmapColor(b.h == 1 ? 1.0 : 1.0 - static_cast<double>(py) / (b.h - 1)));
  c.StrokeRect(b.x - 1, b.y - 1, b.w + 2, b.h + 2, kBlack);
  for (int k = 0; k <= 4; ++k) {
    const int py = b.y + static_cast<int>(std::lround((1.0 - k / 4.0) * (b.h - 1)));
    c.Line(b.x + b.w + 1, py, b.x + b.w + kTickGap, py, kBlack);
    c.Text(b.x + b.w + 2 * kTickGap, py - th / 2, cb_labels[k], kBlack);
  }
  if (!o.colorbar_label.empty())
    c.TextVertical(b.x + b.w + 3 * kTickGap + cb_label_w, b.y + b.h / 2, o.colorbar_label, kBlack);
  if (!o.title.empty()) c.Text(o.width / 2, kPad, o.title, kBlack, kTitleFont, HAlign::kCenter);
  if (!o.x_label.empty())
    c.Text(out.grid.x + out.grid.w / 2, out.grid.y + out.grid.h + 6 + th + 2 * kTickGap, o.x_label, kBlack,
           kLabelFont, HAlign::kCenter);
  if (!o.y_label.empty()) c.TextVertical(kPad, out.grid.y + out.grid.h / 2, o.y_label, kBlack);
  return out;
}

absl::Status Heatmap::WritePng(const std::string& path) const {
  absl::StatusOr<RenderedHeatmap> r = Render();
  if (!r.ok()) return absl::Status(r.status().code(), absl::StrCat("heatmap for ", path, ": ", r.status().message()));
  return longctx::WritePng(r->canvas, path);
}

}  // namespace longctx
