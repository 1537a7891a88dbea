// Why: the memory-bound ops of the CPU backend (fill/copy/axpy/scale, the
// gradient-norm and finiteness reductions, embedding, SwiGLU, AdamW). They all
// walk a tensor as rows x contiguous columns, so one tiling serves every op:
// fixed-size tiles (independent of the thread count) spread over OpenMP
// threads, each tile an inner loop over a contiguous span that GCC vectorizes.
// Because tiles do not depend on the thread count, SumSquares (per-tile partial
// sums combined in tile order) is bitwise reproducible for any thread count.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/cpu/bf16_output.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/dispatch.h"
#include "base/log.h"
#include "kernels/math/adamw.h"
#include "kernels/math/bf16.h"
#include "kernels/math/swiglu.h"
#include "kernels/tensor_layout.h"

namespace longctx::cpu {
namespace {

// Elements per tile: large enough that a tile amortises its scheduling, small
// enough that a few MB tensor still spreads over all threads.
constexpr int64_t kTileElems = 1 << 14;
// Below this many elements the work runs on the calling thread.
constexpr int64_t kParallelMinElems = 1 << 15;

bool SameShape(const Tensor& a, const Tensor& b) {
  if (a.ndim != b.ndim) return false;
  for (int i = 0; i < a.ndim; ++i)
    if (a.shape[i] != b.shape[i]) return false;
  return true;
}

// Fixed tiles over a layout: a long row is cut into kTileElems spans; short
// rows are grouped kTileElems / cols to a tile.
struct Tiling {
  int64_t rows, cols, col_tiles, rows_per_tile, tiles;

  explicit Tiling(const Layout& l) : rows(l.rows), cols(l.cols) {
    if (rows == 0 || cols == 0) {
      col_tiles = rows_per_tile = 1;
      tiles = 0;
    } else if (cols >= kTileElems) {
      col_tiles = (cols + kTileElems - 1) / kTileElems;
      rows_per_tile = 1;
      tiles = rows * col_tiles;
    } else {
      col_tiles = 1;
      rows_per_tile = std::max<int64_t>(1, kTileElems / cols);
      tiles = (rows + rows_per_tile - 1) / rows_per_tile;
    }
  }
  // Rows [r0, r1) x columns [c0, c1) of tile t.
  void Get(int64_t t, int64_t& r0, int64_t& r1, int64_t& c0, int64_t& c1) const {
    if (col_tiles > 1) {
      r0 = t / col_tiles;
      r1 = r0 + 1;
      c0 = (t % col_tiles) * kTileElems;
      c1 = std::min(cols, c0 + kTileElems);
    } else {
      r0 = t * rows_per_tile;
      r1 = std::min(rows, r0 + rows_per_tile);
      c0 = 0;
      c1 = cols;
    }
  }
  bool parallel() const { return rows * cols >= kParallelMinElems && tiles > 1; }
};

// f(tile_index, row, c0, c1) for every (row, span) of every tile; tiles spread
// over threads, the rows of one tile in order on one thread.
template <class F>
void ForEachSpan(const Layout& l, F&& f) {
  const Tiling tiling(l);
#pragma omp parallel for schedule(static) if (tiling.parallel())
  for (int64_t t = 0; t < tiling.tiles; ++t) {
    int64_t r0, r1, c0, c1;
    tiling.Get(t, r0, r1, c0, c1);
    for (int64_t r = r0; r < r1; ++r) f(t, r, c0, c1);
  }
}

template <class T>
T* Ptr(const Tensor& t, const Layout& l, int64_t r, int64_t c) {
  return t.as<T>() + r * l.Stride(t) + c;
}

template <class T>
bool SpanFinite(const T* x, int64_t n) {
  using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  constexpr Bits kExp = static_cast<Bits>(sizeof(T) == 4 ? 0x7f800000ull : 0x7ff0000000000000ull);
  int bad = 0;
#pragma omp simd reduction(| : bad)
  for (int64_t i = 0; i < n; ++i) {
    Bits b;
    std::memcpy(&b, x + i, sizeof(T));
    bad |= static_cast<int>((b & kExp) == kExp);
  }
  return bad == 0;
}

// F32 -> BF16, the scalar path: math::F32ToBf16Bits per element (branch-free,
// GCC vectorizes it).
void F32ToBf16Scalar(uint16_t* dst, const float* src, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) dst[i] = math::F32ToBf16Bits(src[i]);
}

// F32 -> BF16 with vcvtneps2bf16. The instruction rounds normal numbers, inf
// and NaN exactly as F32ToBf16Bits (bias 0x7fff + lsb; NaN: high half with the
// quiet bit), but flushes denormal inputs to a signed zero; lanes whose
// exponent is 0 therefore take the integer formula (which rounds denormals and
// keeps zeros), so the bits equal the scalar path for every input.
#define LONGCTX_AVX512BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))
// 16 floats to 16 bf16 (maskz forms: GCC 12 warns about the undefined
// pass-through of the unmasked shift and narrowing).
LONGCTX_AVX512BF16 inline __m256i F32ToBf16x16(__m512 v) {
  const __m256i cvt = (__m256i)_mm512_cvtneps_pbh(v);
  const __m512i u = _mm512_castps_si512(v);
  const __mmask16 tiny =
      _mm512_cmpeq_epi32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7f800000)), _mm512_setzero_si512());
  if (tiny == 0) return cvt;
  const __m512i lsb = _mm512_and_si512(_mm512_maskz_srli_epi32(0xffff, u, 16), _mm512_set1_epi32(1));
  const __m512i r =
      _mm512_maskz_srli_epi32(0xffff, _mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), lsb)), 16);
  return _mm256_mask_blend_epi16(tiny, cvt, _mm512_maskz_cvtepi32_epi16(0xffff, r));
}

LONGCTX_AVX512BF16 void F32ToBf16Avx512(uint16_t* dst, const float* src, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), F32ToBf16x16(_mm512_loadu_ps(src + i)));
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1u);
    _mm256_mask_storeu_epi16(dst + i, m, F32ToBf16x16(_mm512_maskz_loadu_ps(m, src + i)));
  }
}
#undef LONGCTX_AVX512BF16

void Bf16ToF32Span(float* dst, const uint16_t* src, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) dst[i] = math::Bf16BitsToF32(src[i]);
}

template <class D, class S>
void CopySpan(D* dst, const S* src, int64_t n) {
  if constexpr (std::is_same_v<D, S>) {
    std::memmove(dst, src, static_cast<size_t>(n) * sizeof(D));
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<D>(src[i]);
  }
}

}  // namespace

void Fill(const Tensor& x, double value) {
  DispatchFloat(x.dtype, "Fill", [&](auto tag) {
    using T = decltype(tag);
    const T v = static_cast<T>(value);
    const Layout l = MakeLayout({&x});
    ForEachSpan(l, [&](int64_t, int64_t r, int64_t c0, int64_t c1) {
      T* p = Ptr<T>(x, l, r, c0);
      const int64_t n = c1 - c0;
      for (int64_t i = 0; i < n; ++i) p[i] = v;
    });
  });
}

bool Avx512Bf16ConvertAvailable() {
  static const bool ok = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bf16");
  return ok;
}

void ConvertF32ToBf16(uint16_t* dst, const float* src, int64_t n, Bf16ConvertPath path) {
  if (path == Bf16ConvertPath::kAuto)
    path = Avx512Bf16ConvertAvailable() ? Bf16ConvertPath::kAvx512Bf16 : Bf16ConvertPath::kScalar;
  if (path == Bf16ConvertPath::kAvx512Bf16) {
    CHECK(Avx512Bf16ConvertAvailable()) << "ConvertF32ToBf16: this CPU has no AVX512-BF16";
    F32ToBf16Avx512(dst, src, n);
  } else {
    F32ToBf16Scalar(dst, src, n);
  }
}

// Same dtype: any dtype, bytewise. F32 <-> F64 and F32 <-> BF16: converted.
void Copy(const Tensor& dst, const Tensor& src) {
  CHECK(SameShape(dst, src)) << "Copy: " << dst.DebugString() << " vs " << src.DebugString();
  const Layout l = MakeLayout({&dst, &src});
  if (dst.dtype == src.dtype) {
    const size_t es = DTypeSize(dst.dtype);
    const int64_t ds = l.Stride(dst), ss = l.Stride(src);
    char* d = static_cast<char*>(dst.data);
    const char* s = static_cast<const char*>(src.data);
    ForEachSpan(l, [&](int64_t, int64_t r, int64_t c0, int64_t c1) {
      std::memmove(d + (r * ds + c0) * es, s + (r * ss + c0) * es, static_cast<size_t>(c1 - c0) * es);
    });
    return;
  }
  if (dst.dtype == DType::kBF16 || src.dtype == DType::kBF16) {
    const bool to_bf16 = dst.dtype == DType::kBF16;
    CHECK((to_bf16 ? src.dtype : dst.dtype) == DType::kF32)
        << "Copy: BF16 converts only to and from F32: " << dst.DebugString() << " vs " << src.DebugString();
    const Bf16ConvertPath path = Avx512Bf16ConvertAvailable() ? Bf16ConvertPath::kAvx512Bf16 : Bf16ConvertPath::kScalar;
    ForEachSpan(l, [&](int64_t, int64_t r, int64_t c0, int64_t c1) {
      if (to_bf16) {
        ConvertF32ToBf16(Ptr<uint16_t>(dst, l, r, c0), Ptr<const float>(src, l, r, c0), c1 - c0, path);
      } else {
        Bf16ToF32Span(Ptr<float>(dst, l, r, c0), Ptr<const uint16_t>(src, l, r, c0), c1 - c0);
      }
    });
    return;
  }
  DispatchFloat(dst.dtype, "Copy", [&](auto dtag) {
    using D = decltype(dtag);
    DispatchFloat(src.dtype, "Copy", [&](auto stag) {
      using S = decltype(stag);
      ForEachSpan(l, [&](int64_t, int64_t r, int64_t c0, int64_t c1) {
        CopySpan(Ptr<D>(dst, l, r, c0), Ptr<S>(src, l, r, c0), c1 - c0);
      });
    });
  });
}

void Axpy(const Tensor& y, double alpha, const Tensor& x) {
  CHECK(SameShape(y, x) && y.dtype == x.dtype) << "Axpy: " << y.DebugString() << " vs " << x.DebugString();
  DispatchFloat(y.dtype, "Axpy", [&](auto tag) {
    using T = decltype(tag);
    const T a = static_cast<T>(alpha);
    const Layout l = MakeLayout({&y, &x});
    ForEachSpan(l, [&](int64_t, int64_t r, int64_t c0, int64_t c1) {
      T* yp = Ptr<T>(y, l, r, c0);
      const T* xp = Ptr<T>(x, l, r, c0);
      const int64_t n = c1 - c0;
      for (int64_t i = 0; i < n; ++i) yp[i] += a * xp[i];
    });
  });
}

void Scale(const Tensor& x, double alpha) {
  DispatchFloat(x.dtype, "Scale", [&](auto tag) {
    using T = decltype(tag);
    const T a = static_cast<T>(alpha);
    const Layout l = MakeLayout({&x});
    ForEachSpan(l, [&](int64_t, int64_t r, int64_t c0, int64_t c1) {
      T* p = Ptr<T>(x, l, r, c0);
      const int64_t n = c1 - c0;
      for (int64_t i = 0; i < n; ++i) p[i] *= a;
    });
  });
}

// Sum of squares in double. Deterministic: one partial per fixed tile (rows of
// a tile in order, vectorized inner sums), partials added in tile order.
double SumSquares(const Tensor& x) {
  double total = 0;
  DispatchFloat(x.dtype, "SumSquares", [&](auto tag) {
    using T = decltype(tag);
    const Layout l = MakeLayout({&x});
    const Tiling tiling(l);
    std::vector<double> partial(static_cast<size_t>(tiling.tiles), 0.0);
    ForEachSpan(l, [&](int64_t t, int64_t r, int64_t c0, int64_t c1) {
      const T* p = Ptr<T>(x, l, r, c0);
      const int64_t n = c1 - c0;
      double s = 0;
#pragma omp simd reduction(+ : s)
      for (int64_t i = 0; i < n; ++i) {
        const double v = static_cast<double>(p[i]);
        s += v * v;
      }
      partial[t] += s;
    });
    for (double s : partial) total += s;
  });
  return total;
}

bool AllFinite(const Tensor& x) {
  bool ok = true;
  DispatchFloat(x.dtype, "AllFinite", [&](auto tag) {
    using T = decltype(tag);
    const Layout l = MakeLayout({&x});
    const Tiling tiling(l);
    bool all = true;
#pragma omp parallel for schedule(static) reduction(&& : all) if (tiling.parallel())
    for (int64_t t = 0; t < tiling.tiles; ++t) {
      int64_t r0, r1, c0, c1;
      tiling.Get(t, r0, r1, c0, c1);
      for (int64_t r = r0; r < r1; ++r) all = all && SpanFinite(Ptr<T>(x, l, r, c0), c1 - c0);
    }
    ok = all;
  });
  return ok;
}

void EmbeddingForward(const EmbeddingParams& p) {
  const int64_t n = p.out.shape[0], d = p.out.shape[1], v = p.table.shape[0];
  const int32_t* ids = p.ids.as<int32_t>();
  DispatchFloat(p.table.dtype, "EmbeddingForward", [&](auto tag) {
    using T = decltype(tag);
    const T* table = p.table.as<T>();
    T* out = p.out.as<T>();
    const int64_t ts = p.table.stride0(), os = p.out.stride0();
#pragma omp parallel for schedule(static) if (n * d >= kParallelMinElems)
    for (int64_t t = 0; t < n; ++t) {
      const int64_t id = ids[t];
      CHECK(id >= 0 && id < v) << "EmbeddingForward: id " << id << " at " << t << " outside [0, " << v << ")";
      std::memcpy(out + t * os, table + id * ts, static_cast<size_t>(d) * sizeof(T));
    }
  });
}

// d_table[ids[t]] += d_out[t]. Threads own column blocks and walk the tokens in
// order, so repeated ids never race and the sum order is fixed (deterministic).
void EmbeddingBackward(const EmbeddingParams& p) {
  const int64_t n = p.out.shape[0], d = p.out.shape[1], v = p.table.shape[0];
  const int32_t* ids = p.ids.as<int32_t>();
  for (int64_t t = 0; t < n; ++t)
    CHECK(ids[t] >= 0 && ids[t] < v) << "EmbeddingBackward: id " << ids[t] << " at " << t << " outside [0, " << v
                                     << ")";
  DispatchFloat(p.table.dtype, "EmbeddingBackward", [&](auto tag) {
    using T = decltype(tag);
    T* dtable = p.table.as<T>();
    const T* dout = p.out.as<T>();
    const int64_t ts = p.table.stride0(), os = p.out.stride0();
    constexpr int64_t kCols = 128;
    const int64_t blocks = (d + kCols - 1) / kCols;
#pragma omp parallel for schedule(static) if (n * d >= kParallelMinElems && blocks > 1)
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t c0 = b * kCols, c1 = std::min(d, c0 + kCols);
      for (int64_t t = 0; t < n; ++t) {
        T* dst = dtable + ids[t] * ts;
        const T* src = dout + t * os;
        for (int64_t c = c0; c < c1; ++c) dst[c] += src[c];
      }
    }
  });
}

void SwiGluForward(const SwiGluParams& p) {
  const int64_t f = p.h.shape[1];
  DispatchFloat(p.gate_up.dtype, "SwiGluForward", [&](auto tag) {
    using T = decltype(tag);
    Layout l;  // rows of F columns; gate/up/h each at its own stride
    l.rows = p.h.shape[0];
    l.cols = f;
    l.flat = false;
    const int64_t gs = p.gate_up.stride0(), hs = p.h.stride0();
    if constexpr (std::is_same_v<T, float>) {
      if (p.h.dtype == DType::kBF16) {  // F32 gate_up (SwiGluParams::Validate)
        ForEachSpan(l, [&](int64_t, int64_t r, int64_t c0, int64_t c1) {
          const float* g = p.gate_up.as<float>() + r * gs + c0;
          StoreAsBf16(p.h.as<uint16_t>() + r * hs + c0, c1 - c0,
                      [g, f](int64_t i) { return math::SwiGluForward(g[i], g[i + f]); });
        });
        return;
      }
    }
    ForEachSpan(l, [&](int64_t, int64_t r, int64_t c0, int64_t c1) {
      const T* g = p.gate_up.as<T>() + r * gs + c0;
      const T* u = g + f;
      T* h = p.h.as<T>() + r * hs + c0;
      const int64_t n = c1 - c0;
      for (int64_t i = 0; i < n; ++i) h[i] = math::SwiGluForward(g[i], u[i]);
    });
  });
}

void SwiGluBackward(const SwiGluParams& p) {
  const int64_t f = p.dh.shape[1];
  DispatchFloat(p.gate_up.dtype, "SwiGluBackward", [&](auto tag) {
    using T = decltype(tag);
    Layout l;
    l.rows = p.dh.shape[0];
    l.cols = f;
    l.flat = false;
    const int64_t gs = p.gate_up.stride0(), hs = p.dh.stride0(), ds = p.dgate_up.stride0();
    if constexpr (std::is_same_v<T, float>) {
      if (p.dgate_up.dtype == DType::kBF16) {  // F32 inputs; both halves from one evaluation, as StoreAsBf16
        ForEachSpan(l, [&](int64_t, int64_t r, int64_t c0, int64_t c1) {
          alignas(64) float a[kBf16OutputBlock], b[kBf16OutputBlock];
          for (int64_t i0 = c0; i0 < c1; i0 += kBf16OutputBlock) {
            const int64_t n = std::min(kBf16OutputBlock, c1 - i0);
            const float* g = p.gate_up.as<float>() + r * gs + i0;
            const float* dh = p.dh.as<float>() + r * hs + i0;
            for (int64_t i = 0; i < n; ++i) math::SwiGluBackward(g[i], g[i + f], dh[i], a[i], b[i]);
            uint16_t* dg = p.dgate_up.as<uint16_t>() + r * ds + i0;
            ConvertF32ToBf16(dg, a, n);
            ConvertF32ToBf16(dg + f, b, n);
          }
        });
        return;
      }
    }
    ForEachSpan(l, [&](int64_t, int64_t r, int64_t c0, int64_t c1) {
      const T* g = p.gate_up.as<T>() + r * gs + c0;
      const T* u = g + f;
      const T* dh = p.dh.as<T>() + r * hs + c0;
      T* dg = p.dgate_up.as<T>() + r * ds + c0;
      T* du = dg + f;
      const int64_t n = c1 - c0;
      for (int64_t i = 0; i < n; ++i) {
        T a, b;
        math::SwiGluBackward(g[i], u[i], dh[i], a, b);
        dg[i] = a;
        du[i] = b;
      }
    });
  });
}

void AdamW(const AdamWParams& p) {
  DispatchFloat(p.param.dtype, "AdamW", [&](auto tag) {
    using T = decltype(tag);
    const math::AdamWScalars<T> s = math::MakeAdamWScalars<T>(p.lr, p.beta1, p.beta2, p.eps, p.weight_decay,
                                                              p.grad_scale, p.step);
    Layout l;
    l.rows = p.param.numel() > 0 ? 1 : 0;
    l.cols = p.param.numel();
    T* param = p.param.as<T>();
    const T* grad = p.grad.as<T>();
    T* m = p.m.as<T>();
    T* v = p.v.as<T>();
    ForEachSpan(l, [&](int64_t, int64_t, int64_t c0, int64_t c1) {
      for (int64_t i = c0; i < c1; ++i) math::AdamWUpdate(param[i], grad[i], m[i], v[i], s);
    });
  });
}

}  // namespace longctx::cpu
