// Why: the tiled attention (attention.cc) spends its time in a handful of
// tile operations — small matrix products (64 x 64 x head_dim) and the softmax
// passes over a score tile — and these are what must run at GEMM speed. Each
// instruction set gets its own implementation of exactly these operations,
// behind one table of function pointers chosen at run time (one indirect call
// per tile, nothing per element): AVX-512 (attention_tiles_avx512.cc),
// AVX2/FMA (attention_tiles_avx2.cc, the fallback every x86-64 machine of this
// project has) and a plain scalar reference (attention_tiles_scalar.cc, also
// the F64 path of the finite-difference tests). The attention loops themselves
// (masks, online softmax bookkeeping, work items) are written once, over this
// table. An AttentionConfig can force one ISA, so the tests run every path
// this machine can run against the same double references.
//
// Products: every element of C is one sequential fused multiply-add chain over
// kk ascending, starting from C (accumulate) or 0, on every path — so the
// products of the three paths agree bit for bit and results never depend on
// threads or on where a tile lies.
#ifndef LONGCTX_KERNELS_CPU_ATTENTION_TILES_H_
#define LONGCTX_KERNELS_CPU_ATTENTION_TILES_H_

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/attention_isa.h"

namespace longctx::cpu {

// Which implementation of the tile kernels runs (F32; F64 always runs
// kScalar): the backend option's enum (kernels/cpu/attention_isa.h).
using AttentionIsa = ::longctx::CpuAttentionIsa;

// "auto", "avx512", "avx2", "scalar".
const char* AttentionIsaName(AttentionIsa isa);
// Whether this CPU (and this build) can run `isa`; kAuto and kScalar always.
bool AttentionIsaSupported(AttentionIsa isa);
// kAuto resolved for this CPU.
AttentionIsa BestAttentionIsa();

template <class T>
struct AttentionTileKernels {
  const char* name;
  // C[0:m, 0:n] (= or +=) sum_{kk < k} A(i, kk) * B[kk, 0:n], where
  // A(i, kk) = a[i * a_rs + kk * a_cs] (so A or A^T), B rows contiguous with
  // leading dimension ldb, C leading dimension ldc. Serial.
  void (*gemm)(int m, int n, int k, const T* a, ptrdiff_t a_rs, ptrdiff_t a_cs, const T* b, ptrdiff_t ldb, T* c,
               ptrdiff_t ldc, bool accumulate);
  // Forward, on a transposed score tile (row j = one key, x = queries
  // contiguous, row stride ld): mn[x] = max(mn[x], s[j][x]) for x in
  // [ra[j], rb[j]), rows j < rows.
  void (*tile_max)(const T* s, int rows, int ld, const int* ra, const int* rb, T* mn);
  // Then s[j][x] = exp(s[j][x] - msafe[x]) and l[x] += s[j][x] on
  // [ra[j], rb[j]); s[j][x] = 0 on the rest of [0, len).
  void (*tile_exp_sum)(T* s, int rows, int ld, int len, const int* ra, const int* rb, const T* msafe, T* l);
  // Backward, on row-major tiles (row i = one query, x = keys contiguous,
  // row stride ld): p holds scores and ds holds dP on entry; on [ra[i], rb[i])
  // p = exp(p - lse[i]) and ds = p * (ds - drow[i]); both 0 on the rest of
  // [0, len).
  void (*tile_backward)(T* p, T* ds, int rows, int ld, int len, const int* ra, const int* rb, const T* lse,
                        const T* drow);
  // Operand staging: dst[c * width + r] = scale * src[r * ld + c] for r < rows
  // (<= width), c < d, and 0 for rows <= r < width. Null: the drivers' scalar
  // loop (attention_driver.h LoadTransposed), which any implementation must
  // match bit for bit.
  void (*load_transposed)(const T* src, int64_t ld, int rows, int64_t d, T scale, int width, T* dst) = nullptr;
};

// The table for `isa` (kAuto resolved); aborts naming the ISA when the CPU
// cannot run it (check AttentionIsaSupported first).
const AttentionTileKernels<float>& AttentionTileKernelsF32(AttentionIsa isa);
const AttentionTileKernels<double>& AttentionTileKernelsF64();

// Tile products of bf16 operands (Q, K, V, dO, P, dS rounded to bf16, round
// to nearest even) with fp32 accumulation: on AMX (tdpbf16ps) where the CPU
// has it and allow_amx, else on AVX512-BF16 (vdpbf16ps); the softmax passes
// are the AVX-512 ones with the bf16-accuracy exp (AttentionTilesAvx512Bf16Exp:
// statistics and sums stay fp32). Null where the CPU (or build) has neither:
// attention then stays fp32 at precision bf16.
const AttentionTileKernels<float>* AttentionTileKernelsBf16(bool allow_amx = true);

// The per-ISA tables (null where the build has no such code: non-x86 hosts).
const AttentionTileKernels<float>* AttentionTilesAvx512();  // attention_tiles_avx512.cc
// The AVX-512 table with the softmax passes' exp at bf16 accuracy (< 1e-5
// relative instead of 3e-7; attention_tiles_avx512.cc Exp2Bf16): the
// softmax passes of the bf16 tables below.
const AttentionTileKernels<float>* AttentionTilesAvx512Bf16Exp();
const AttentionTileKernels<float>* AttentionTilesAvx2();    // attention_tiles_avx2.cc
const AttentionTileKernels<float>& AttentionTilesScalarF32();  // attention_tiles_scalar.cc
const AttentionTileKernels<float>* AttentionTilesAvx512Bf16();  // attention_tiles_avx512bf16.cc
const AttentionTileKernels<float>* AttentionTilesAmxBf16();     // same file; null without AMX or permission

}  // namespace longctx::cpu

#endif  // LONGCTX_KERNELS_CPU_ATTENTION_TILES_H_
