// Why: the plain C++ implementation of the attention tile kernels
// (attention_tiles.h): the reference the vector paths are tested against, the
// path of CPUs without AVX2, and (as a template) the F64 path of the
// finite-difference tests. It also owns the run-time choice of ISA. The float
// exp here is the one the vector paths compute lane by lane (same Cephes
// polynomial, same fused multiply-adds, same rounding to an integer exponent),
// so all three paths give the same bits.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/cpu/attention_tiles.h"
#include "base/log.h"
#include "kernels/math/online_softmax.h"

namespace longctx::cpu {
namespace {

// exp(x) for softmax arguments: 0 below -87.33654 (and for -inf), NaN stays
// NaN, arguments above 88 are clamped to 88. Relative error < 3e-7.
float ExpF32(float x) {
  if (std::isnan(x)) return x;
  if (x < -87.33654f) return 0.f;
  x = std::min(x, 88.f);
  const float fx = std::nearbyint(x * 1.44269504088896341f);
  float r = std::fma(-fx, 0.693359375f, x);
  r = std::fma(-fx, -2.12194440e-4f, r);
  const float z = r * r;
  float y = 1.9875691500e-4f;
  y = std::fma(y, r, 1.3981999507e-3f);
  y = std::fma(y, r, 8.3334519073e-3f);
  y = std::fma(y, r, 4.1665795894e-2f);
  y = std::fma(y, r, 1.6666665459e-1f);
  y = std::fma(y, r, 5.0000001201e-1f);
  y = std::fma(y, z, r);
  y = y + 1.f;
  return std::ldexp(y, static_cast<int>(fx));
}
double ExpOf(double x) { return std::exp(x); }
float ExpOf(float x) { return ExpF32(x); }

template <class T>
void Gemm(int m, int n, int k, const T* a, ptrdiff_t a_rs, ptrdiff_t a_cs, const T* b, ptrdiff_t ldb, T* c,
          ptrdiff_t ldc, bool accumulate) {
  for (int i = 0; i < m; ++i) {
    T* crow = c + i * ldc;
    if (!accumulate) std::fill(crow, crow + n, T(0));
    for (int kk = 0; kk < k; ++kk) {
      const T av = a[i * a_rs + kk * a_cs];
      const T* brow = b + kk * ldb;
      for (int x = 0; x < n; ++x) crow[x] = std::fma(av, brow[x], crow[x]);
    }
  }
}

template <class T>
void TileMax(const T* s, int rows, int ld, const int* ra, const int* rb, T* mn) {
  for (int j = 0; j < rows; ++j)
    for (int x = ra[j]; x < rb[j]; ++x) mn[x] = std::max(mn[x], s[j * ld + x]);
}

template <class T>
void TileExpSum(T* s, int rows, int ld, int len, const int* ra, const int* rb, const T* msafe, T* l) {
  for (int j = 0; j < rows; ++j) {
    T* row = s + j * ld;
    for (int x = 0; x < ra[j]; ++x) row[x] = T(0);
    for (int x = ra[j]; x < rb[j]; ++x) {
      const T p = ExpOf(row[x] - msafe[x]);
      row[x] = p;
      l[x] += p;
    }
    for (int x = std::max(ra[j], rb[j]); x < len; ++x) row[x] = T(0);
  }
}

template <class T>
void TileBackward(T* p, T* ds, int rows, int ld, int len, const int* ra, const int* rb, const T* lse,
                  const T* drow) {
  for (int i = 0; i < rows; ++i) {
    T* prow = p + i * ld;
    T* dsrow = ds + i * ld;
    for (int x = 0; x < ra[i]; ++x) prow[x] = dsrow[x] = T(0);
    for (int x = ra[i]; x < rb[i]; ++x) {
      const T px = ExpOf(prow[x] - lse[i]);
      prow[x] = px;
      dsrow[x] = px * (dsrow[x] - drow[i]);
    }
    for (int x = std::max(ra[i], rb[i]); x < len; ++x) prow[x] = dsrow[x] = T(0);
  }
}

template <class T>
const AttentionTileKernels<T> kScalarTiles = {"scalar", Gemm<T>, TileMax<T>, TileExpSum<T>, TileBackward<T>};

}  // namespace

const char* AttentionIsaName(AttentionIsa isa) {
  switch (isa) {
    case AttentionIsa::kAuto: return "auto";
    case AttentionIsa::kAvx512: return "avx512";
    case AttentionIsa::kAvx2: return "avx2";
    case AttentionIsa::kScalar: return "scalar";
  }
  return "?";
}

bool AttentionIsaSupported(AttentionIsa isa) {
  switch (isa) {
    case AttentionIsa::kAuto:
    case AttentionIsa::kScalar: return true;
#if defined(__x86_64__)
    case AttentionIsa::kAvx512:
      return AttentionTilesAvx512() != nullptr && __builtin_cpu_supports("avx512f") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("fma");
    case AttentionIsa::kAvx2:
      return AttentionTilesAvx2() != nullptr && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    default: return false;
#endif
  }
  return false;
}

AttentionIsa BestAttentionIsa() {
  static const AttentionIsa best = AttentionIsaSupported(AttentionIsa::kAvx512) ? AttentionIsa::kAvx512
                                   : AttentionIsaSupported(AttentionIsa::kAvx2) ? AttentionIsa::kAvx2
                                                                                : AttentionIsa::kScalar;
  return best;
}

const AttentionTileKernels<float>& AttentionTilesScalarF32() { return kScalarTiles<float>; }

const AttentionTileKernels<float>* AttentionTileKernelsBf16(bool allow_amx) {
#if defined(__x86_64__)
  static const bool ok = AttentionIsaSupported(AttentionIsa::kAvx512) && __builtin_cpu_supports("avx512bf16");
  if (!ok) return nullptr;
  static const AttentionTileKernels<float>* amx = AttentionTilesAmxBf16();
  return allow_amx && amx != nullptr ? amx : AttentionTilesAvx512Bf16();
#else
  return nullptr;
#endif
}
const AttentionTileKernels<double>& AttentionTileKernelsF64() { return kScalarTiles<double>; }

const AttentionTileKernels<float>& AttentionTileKernelsF32(AttentionIsa isa) {
  if (isa == AttentionIsa::kAuto) isa = BestAttentionIsa();
  CHECK(AttentionIsaSupported(isa)) << "attention tile kernels: ISA " << AttentionIsaName(isa)
                                    << " requested, but this CPU or build cannot run it";
  switch (isa) {
    case AttentionIsa::kAvx512: return *AttentionTilesAvx512();
    case AttentionIsa::kAvx2: return *AttentionTilesAvx2();
    default: return kScalarTiles<float>;
  }
}

}  // namespace longctx::cpu
