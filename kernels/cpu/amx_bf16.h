// Why: the packed bf16 attention (attention_packed_bf16.cc) converts each
// operand to bf16 k-pairs once per block and reuses it across many tile
// products, so it needs the packing routines and the tile products of
// attention_tiles_avx512bf16.cc by name rather than behind the per-product
// AttentionTileKernels::gemm (which packs both operands on every call).
//
// Layouts (uint32 = two bf16, the lower half first):
//  * A operand: rows of k-pairs, a[i * a_ld + p] = (A(i, 2p), A(i, 2p + 1)).
//  * B operand: pairs of rows, b[p * b_ld + j] = (B(2p, j), B(2p + 1, j)).
// Rounding is round to nearest even (vcvtneps2bf16), as in the tile tables.
// The packers, the softmax passes and DotProduct require PairsUsable()
// (AVX-512 with AVX512-BF16); Product and LoadTileConfig require Usable()
// (also AMX, and the tile state granted to the process), and Product also
// LoadTileConfig() on the calling thread since its last use of the tile unit
// by anyone else. (The namespace is named for the tile unit the layouts were
// made for; without it the same layouts feed vdpbf16ps.)
#ifndef LONGCTX_KERNELS_CPU_AMX_BF16_H_
#define LONGCTX_KERNELS_CPU_AMX_BF16_H_

#include <cstddef>
#include <cstdint>

namespace longctx::cpu::amx {

// The CPU has AVX-512, AMX-BF16 and AMX-TILE, and Linux granted tile state.
bool Usable();

// Eight tiles of 16 rows x 64 bytes, the only configuration Product uses.
void LoadTileConfig();

// C[0:mt, 0:nt] (= or +=) A B over kp k-pairs, whole 16 x 16 tiles: mt, nt
// and kp multiples of 16; a_ld, b_ld in uint32, ldc in floats. Every element
// of the padded rectangle is written, so C needs room for mt rows of nt.
void Product(int mt, int nt, int kp, const uint32_t* a, int a_ld, const uint32_t* b, int b_ld, float* c, int ldc,
             bool accumulate);

// The CPU has AVX-512 and AVX512-BF16 (vdpbf16ps), with or without AMX.
bool PairsUsable();

// Product's contract on AVX512-BF16 dot products (no tile unit): the 6 x 64
// register block of the generic avx512-bf16 tiles, each C element's k-pairs
// in ascending order through one fp32 lane, so the bits of that table's
// product on the same packed values (mt, nt, kp multiples of 16).
void DotProduct(int mt, int nt, int kp, const uint32_t* a, int a_ld, const uint32_t* b, int b_ld, float* c, int ldc,
                bool accumulate);

// [k][n] (row stride ld) -> B layout out[p * out_ld + x], p < ceil(k / 2),
// x < n; the odd last row pairs with zero. Nothing else is written.
void PackPairsOfRows(const float* src, ptrdiff_t ld, int k, int n, uint32_t* out, int out_ld);
// [m][k] (row stride ld) -> A layout out[i * out_ld + p]: pairs p < ceil(k / 2)
// written, in 16-pair groups (pairs past ceil(k / 2) in the last group are
// left as they were).
void PackPairsAlongRows(const float* src, ptrdiff_t ld, int m, int k, uint32_t* out, int out_ld);
// A stored transposed, [k][m] (row stride ld) -> A layout out[i * out_ld + p],
// whole 16 x 16 pair blocks: rows up to m rounded up to 16, pairs up to
// ceil(k / 2) rounded up to 16, zero beyond m and k.
void PackPairsOfColumns(const float* src, ptrdiff_t ld, int k, int m, uint32_t* out, int out_ld);
// The same of scale * src: scale * src(kk, i) rounded once, the bits of
// PackScaledRowsAndPairs' pairs, transposed.
void PackScaledPairsOfColumns(const float* src, ptrdiff_t ld, int k, int m, float scale, uint32_t* out, int out_ld);
// Rows of [m][k] (row stride ld) times scale -> B layout of the transpose,
// out[p * out_ld + i] = (scale A(i, 2p), scale A(i, 2p + 1)), whole 16 x 16
// blocks: i up to m rounded up to 16, p up to ceil(k / 2) rounded up to 16,
// zero beyond m and k. The same bits as scaling into a transposed fp32 copy and
// PackPairsOfRows of it.
void PackRowPairsTransposed(const float* src, ptrdiff_t ld, int m, int k, float scale, uint32_t* out, int out_ld);
// scale * [m][k] (row stride ld) in both layouts in one pass: A rows
// a_out[i * a_ld + p] (pairs p < ceil(k / 2)) and pairs of rows
// b_out[p * b_ld + x] (p < ceil(m / 2), the odd last row with zero); either
// output may be null. The same bits as PackPairsAlongRows / PackPairsOfRows
// of a scaled fp32 copy.
void PackScaledRowsAndPairs(const float* src, ptrdiff_t ld, int m, int k, float scale, uint32_t* a_out, int a_ld,
                            uint32_t* b_out, int b_ld);
// A at any strides, element by element -> A layout (pairs p < ceil(k / 2)).
void PackPairsStrided(const float* src, ptrdiff_t rs, ptrdiff_t cs, int m, int k, uint32_t* out, int out_ld);

// The forward's exp-and-sum pass of the bf16 tables (tile_exp_sum of
// AttentionTilesAvx512Bf16Exp: the same P and the same sums l, bit for bit) on
// a transposed score tile (row j = one key, queries along the row), writing P
// as the B operand of Vᵀ Pᵀ instead of back into s (which is only read):
// pairs[(j / 2) * pairs_ld + x] = (P(j, x), P(j + 1, x)) for j < rows (the odd
// last row pairs with zero) and x < len rounded up to 16 (zero past len).
// attention_tiles_avx512.cc.
void ExpSumPairs(const float* s, int rows, int ld, int len, const int* ra, const int* rb, const float* msafe,
                 float* l, uint32_t* pairs, int pairs_ld);
// c[r * ldc + x] *= alpha[x] for r < rows, x < n, skipping the 16-lane groups
// whose alpha are all 1 (x * 1 is x: the same bits as multiplying them).
void ScaleColumns(float* c, int rows, int ldc, int n, const float* alpha);
// dst[j * dst_ld + i] = src[i * src_ld + j] for i < m, j < n (32-bit
// elements, copied exactly), through 16 x 16 register transposes; with
// row_scale, dst[j * dst_ld + i] = src[i * src_ld + j] * row_scale[j] (one
// fp32 product, the bits of the scalar expression).
void StoreTransposed(const float* src, int src_ld, int m, int n, float* dst, ptrdiff_t dst_ld,
                     const float* row_scale = nullptr);
// dst[j * dst_ld + i] += src[i * src_ld + j] for i < m, j < n (one fp32
// addition per element, dst + src: the bits of the GQA sum of partials).
void AddTransposed(const float* src, int src_ld, int m, int n, float* dst, ptrdiff_t dst_ld);
// dst[i * dst_ld + x] = scale * src[i * src_ld + x] for i < rows, x < d (one
// fp32 product per element: the bits of the scalar loop), each whole 64-byte
// line of dst written with a streaming (non-temporal) store, the rest with
// ordinary stores; fenced (sfence) before it returns. For outputs written
// once and read by a later op: their lines are not fetched for ownership
// first (the packed backward's dQ rows, whose backward this makes faster at
// window 1,024: docs/history/benchmarks-2026.md, "Attention at GEMM speed").
void StreamScaledRows(const float* src, ptrdiff_t src_ld, int64_t rows, int d, float scale, float* dst,
                      ptrdiff_t dst_ld);
// The backward's softmax pass of the bf16 tables (tile_backward of
// AttentionTilesAvx512Bf16Exp: the same P = exp(s - lse) and dS = P (dP - D),
// bit for bit) on a row-major tile (row i = one query, keys along the row,
// row stride ld; s and dp are only read), written straight as the three bf16
// operands the products take: P and dS as pairs of consecutive query rows,
// p_pairs[(i / 2) * pairs_ld + x] = (P(i, x), P(i + 1, x)) (likewise
// ds_pairs; the odd last row pairs with zero), and dS as A rows of key pairs,
// ds_rows[i * rows_ld + x / 2] = (dS(i, x), dS(i, x + 1)). Columns
// x < width (a multiple of 32, >= len) are written, zero past len and outside
// [ra[i], rb[i]). attention_tiles_avx512.cc.
void BackwardPairs(const float* s, const float* dp, int rows, int ld, int len, int width, const int* ra,
                   const int* rb, const float* lse, const float* drow, uint32_t* p_pairs, uint32_t* ds_pairs,
                   int pairs_ld, uint32_t* ds_rows, int rows_ld);

// S = Q Kᵀ and dP = dO Vᵀ of query rows [0, rows) over key columns [0, len)
// (len a multiple of 16) on vdpbf16ps, kept in registers and turned at once
// into BackwardPairs' three outputs (columns up to width): the bits of
// DotProduct(rows rounded up to 16, len, kp, q, a_ld, kt, b_ld, s, ...) and
// the same for dO, Vᵀ, then BackwardPairs on s and dp, without storing S and
// dP. q and o are A rows of k-pairs (row rows of them readable when rows is
// odd); kt and vt B operands [kp][b_ld]. Requires PairsUsable().
// attention_tiles_avx512.cc.
void DotBackwardPairs(const uint32_t* q, const uint32_t* o, int a_ld, int kp, const uint32_t* kt, const uint32_t* vt,
                      int b_ld, int rows, int len, int width, const int* ra, const int* rb, const float* lse,
                      const float* drow, uint32_t* p_pairs, uint32_t* ds_pairs, int pairs_ld, uint32_t* ds_rows,
                      int rows_ld);

}  // namespace longctx::cpu::amx

#endif  // LONGCTX_KERNELS_CPU_AMX_BF16_H_
