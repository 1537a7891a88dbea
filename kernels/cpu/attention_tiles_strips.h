// Why: the tile products of the AVX2, AVX-512 and AVX512-BF16 tables
// (attention_tiles_avx2.cc, attention_tiles_avx512.cc,
// attention_tiles_avx512bf16.cc) are one register-blocked scheme — R rows of C
// by NV vectors of it in registers, per step of k one load of B per vector and
// one broadcast of A per row feeding R x NV multiply-adds, column tails through
// a lane mask, and the rows of C cut into strips of six — and differ only in
// the vector types, the lane count and the instructions that load, broadcast
// and multiply-add. The scheme is written once, here, over a traits struct
// that each ISA file defines for its own instructions (below), so a change to
// the blocking or to the tail handling is made in one place for every ISA.
//
// Include this header after the including file's `#pragma GCC target`: every
// template here is instantiated with the file's traits, a type of internal
// linkage (an anonymous namespace), so each instantiation is compiled for that
// file's target, inlined there as the hand-written copies were, and no copy is
// shared with code built for another target (as transpose16_avx512.h).
//
// Traits (static members; the functions inline):
//   Elem                 element of A and B (float; uint32_t bf16 pairs)
//   Acc                  a vector of fp32 lanes of C
//   Operand              a vector of A or B elements as the multiply-add takes them
//   Tail                 the lanes of the last vector of a strip
//   kLanes, kVectors     lanes per vector; vectors per full strip
//   AllLanes()           the Tail of a strip of whole vectors
//   FirstLanes(count)    the Tail whose last vector has `count` lanes (1..kLanes)
//   Zero()               Acc of zeros
//   LoadC(p, tail, last) / StoreC(p, tail, last, v)
//                        C's lanes; `last`: the strip's last vector, where
//                        only the tail's lanes are read or written
//   LoadB(p, tail, last) B's lanes alike (lanes outside the tail read as 0)
//   BroadcastA(p)        *p in every lane
//   MulAdd(acc, a, b)    acc + a * b, one rounding per fp32 lane
#ifndef LONGCTX_KERNELS_CPU_ATTENTION_TILES_STRIPS_H_
#define LONGCTX_KERNELS_CPU_ATTENTION_TILES_STRIPS_H_

#include <cstddef>

namespace longctx::cpu {
namespace {  // NOLINT(build/namespaces): see the comment at the top

// R rows x NV vectors of C from column 0 of b and c; the last vector's lanes
// limited by `tail`. Every C element is one chain of multiply-adds over k
// ascending, starting from C (accumulate) or 0.
template <class Isa, int R, int NV>
inline void StripProduct(int k, const typename Isa::Elem* __restrict a, ptrdiff_t a_rs, ptrdiff_t a_cs,
                         const typename Isa::Elem* __restrict b, ptrdiff_t ldb, float* __restrict c, ptrdiff_t ldc,
                         bool accumulate, typename Isa::Tail tail) {
  constexpr int kLanes = Isa::kLanes;
  typename Isa::Acc acc[R][NV];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v)
      acc[r][v] = accumulate ? Isa::LoadC(c + r * ldc + kLanes * v, tail, v == NV - 1) : Isa::Zero();
  for (int kk = 0; kk < k; ++kk) {
    typename Isa::Operand bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) bv[v] = Isa::LoadB(b + kk * ldb + kLanes * v, tail, v == NV - 1);
    const typename Isa::Elem* ak = a + kk * a_cs;
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const typename Isa::Operand av = Isa::BroadcastA(ak + r * a_rs);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[r][v] = Isa::MulAdd(acc[r][v], av, bv[v]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) Isa::StoreC(c + r * ldc + kLanes * v, tail, v == NV - 1, acc[r][v]);
}

// The column remainder of a row strip: `vectors` (1..kVectors) vectors, the
// template argument counted up to it, one StripProduct instantiation a width.
template <class Isa, int R, int NV>
inline void TailStrip(int vectors, int k, const typename Isa::Elem* a, ptrdiff_t a_rs, ptrdiff_t a_cs,
                      const typename Isa::Elem* b, ptrdiff_t ldb, float* c, ptrdiff_t ldc, bool accumulate,
                      typename Isa::Tail tail) {
  if constexpr (NV < Isa::kVectors) {
    if (vectors > NV) {
      TailStrip<Isa, R, NV + 1>(vectors, k, a, a_rs, a_cs, b, ldb, c, ldc, accumulate, tail);
      return;
    }
  }
  StripProduct<Isa, R, NV>(k, a, a_rs, a_cs, b, ldb, c, ldc, accumulate, tail);
}

// R rows of C, all n columns: strips of kVectors whole vectors, then one
// strip of the vectors left with the last one masked.
template <class Isa, int R>
inline void StripRows(int n, int k, const typename Isa::Elem* a, ptrdiff_t a_rs, ptrdiff_t a_cs,
                      const typename Isa::Elem* b, ptrdiff_t ldb, float* c, ptrdiff_t ldc, bool accumulate) {
  constexpr int kLanes = Isa::kLanes, kWidth = Isa::kLanes * Isa::kVectors;
  const typename Isa::Tail all = Isa::AllLanes();
  int n0 = 0;
  for (; n0 + kWidth <= n; n0 += kWidth)
    StripProduct<Isa, R, Isa::kVectors>(k, a, a_rs, a_cs, b + n0, ldb, c + n0, ldc, accumulate, all);
  const int rest = n - n0;
  if (rest == 0) return;
  const typename Isa::Tail tail = Isa::FirstLanes(rest - kLanes * ((rest - 1) / kLanes));
  TailStrip<Isa, R, 1>((rest + kLanes - 1) / kLanes, k, a, a_rs, a_cs, b + n0, ldb, c + n0, ldc, accumulate, tail);
}

// The rows of C in strips of kStripRows; a remainder shares the last strip's
// rows (m = 64: 9 strips of 6 and two of 5, not 10 of 6 and one of 4), so no
// strip is left with too few accumulators to cover the FMA latency. Each C
// element is the same chain of FMAs in any strip: the same bits.
constexpr int kStripRows = 6;

template <class Isa, int R>
void StripRowsAt(int n, int k, const typename Isa::Elem* a, ptrdiff_t a_rs, ptrdiff_t a_cs,
                 const typename Isa::Elem* b, ptrdiff_t ldb, float* c, ptrdiff_t ldc, bool accumulate, int i) {
  StripRows<Isa, R>(n, k, a + i * a_rs, a_rs, a_cs, b, ldb, c + i * ldc, ldc, accumulate);
}

template <class Isa>
void TailStripRows(int rows, int n, int k, const typename Isa::Elem* a, ptrdiff_t a_rs, ptrdiff_t a_cs,
                   const typename Isa::Elem* b, ptrdiff_t ldb, float* c, ptrdiff_t ldc, bool accumulate, int i) {
  static_assert(kStripRows == 6, "TailStripRows covers strips of up to 6 rows");
  switch (rows) {
    case 1: StripRowsAt<Isa, 1>(n, k, a, a_rs, a_cs, b, ldb, c, ldc, accumulate, i); break;
    case 2: StripRowsAt<Isa, 2>(n, k, a, a_rs, a_cs, b, ldb, c, ldc, accumulate, i); break;
    case 3: StripRowsAt<Isa, 3>(n, k, a, a_rs, a_cs, b, ldb, c, ldc, accumulate, i); break;
    case 4: StripRowsAt<Isa, 4>(n, k, a, a_rs, a_cs, b, ldb, c, ldc, accumulate, i); break;
    case 5: StripRowsAt<Isa, 5>(n, k, a, a_rs, a_cs, b, ldb, c, ldc, accumulate, i); break;
    case 6: StripRowsAt<Isa, 6>(n, k, a, a_rs, a_cs, b, ldb, c, ldc, accumulate, i); break;
    default: break;
  }
}

// The tile product of attention_tiles.h (AttentionTileKernels::gemm) on
// Isa's strips.
template <class Isa>
void StripGemm(int m, int n, int k, const typename Isa::Elem* a, ptrdiff_t a_rs, ptrdiff_t a_cs,
               const typename Isa::Elem* b, ptrdiff_t ldb, float* c, ptrdiff_t ldc, bool accumulate) {
  const int rest = m % kStripRows;
  const int whole = m / kStripRows - (rest > 0 && m > kStripRows ? 1 : 0);  // strips of kStripRows before the tail
  int i = 0;
  for (; i < whole * kStripRows; i += kStripRows)
    StripRowsAt<Isa, kStripRows>(n, k, a, a_rs, a_cs, b, ldb, c, ldc, accumulate, i);
  const int tail = m - i;  // 0, 1-5 (m < kStripRows), or kStripRows + rest in two strips
  const int first = tail > kStripRows ? (tail + 1) / 2 : tail;
  TailStripRows<Isa>(first, n, k, a, a_rs, a_cs, b, ldb, c, ldc, accumulate, i);
  TailStripRows<Isa>(tail - first, n, k, a, a_rs, a_cs, b, ldb, c, ldc, accumulate, i + first);
}

}  // namespace
}  // namespace longctx::cpu

#endif  // LONGCTX_KERNELS_CPU_ATTENTION_TILES_STRIPS_H_
