// Why: plots need labels, and a 5×7 bitmap font for printable ASCII is a few
// hundred bytes of data: smaller and more predictable (byte-identical PNGs) than
// depending on a font library. Used by train/png_plot.
#ifndef LONGCTX_TRAIN_BITMAP_FONT_H_
#define LONGCTX_TRAIN_BITMAP_FONT_H_

#include <string_view>

namespace longctx {

// Built-in font: 5×7 glyphs for ASCII 32..126 (anything else draws as '?'),
// advanced 6 pixels per character (one blank column), times an integer scale.
inline constexpr int kGlyphWidth = 5;
inline constexpr int kGlyphHeight = 7;
inline constexpr int kGlyphAdvance = 6;
// Whether font pixel (column, row) of ch is set; column in [0,5), row in [0,7) from the top.
bool GlyphPixel(char ch, int column, int row);
// Size in pixels of a one-line text at a scale (no trailing blank column).
int TextWidth(std::string_view text, int scale = 1);
constexpr int TextHeight(int scale = 1) { return kGlyphHeight * scale; }

}  // namespace longctx

#endif  // LONGCTX_TRAIN_BITMAP_FONT_H_
