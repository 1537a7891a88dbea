// Why: long-context training cannot afford an N x N (or segment x segment)
// score matrix, so CPU attention is tiled flash attention: scores are made one
// kBlockQ x kBlockK tile at a time and folded into an online softmax
// (kernels/math/online_softmax.h), so memory is O(N) plus per-thread tile
// scratch. Tiles the mask cannot see (kernels/math/attention_visibility.h) are
// skipped whole — a sliding-window layer costs O(N * w), not O(N^2) — and
// partially visible tiles are masked row by row.
// The forward runs one work item per (segment, query block, up to
// kMaxForwardHeads query heads of one kv head): each K, V tile read serves
// all the item's heads. The backward is FlashAttention-2's: P recomputed from
// the saved lse, D_i = rowsum(dO_i * O_i) precomputed (of the bf16 dO with
// bf16 tiles, as dP sees it), and per tile exactly
// five products — S = Q Kᵀ, dP = dO Vᵀ, dV += Pᵀ dO, dK += dSᵀ Q, dQ += dS K —
// with no tile recomputed twice. Its work items are (segment, query head): an
// item walks the segment's key blocks, kBackwardGroup at a time, and per group
// the query blocks that see them, so it owns the dQ rows of its head
// (accumulated in its scratch, key blocks ascending) and accumulates dK, dV of
// its group's key blocks; with GQA each query head writes its own dK, dV
// partial and the partials are summed in head order after. Every output
// element is one fixed chain of operations, so results are bitwise identical
// for any thread count and schedule, without atomics.
// The tile operations (products, softmax passes) are kernels/cpu/
// attention_tiles.h: an AVX-512, an AVX2 and a scalar implementation chosen at
// run time (AttentionConfig can force one); this file is the loops over tiles.
// At precision bf16 (AMX, or AVX512-BF16 alone) a second driver
// (attention_packed_bf16.h) runs the same loops with operands converted to
// bf16 once per block instead of once per product (same bits); the pieces
// both share are attention_driver.h. BLAS is not called: it must not run
// inside our OpenMP region.
// The forward also serves inference (ops.h): keys with their own segments
// aligned bottom-right to the queries (KV-cache decode, chunked prefill) and a
// diagonal offset (STRING's shifted part). Both only move where a work item's
// key loop starts and ends and where a key's visible queries begin.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include <omp.h>

#include "kernels/cpu/attention_packed_bf16.h"
#include "kernels/cpu/attention_driver.h"
#include "kernels/cpu/attention_tiles.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/dispatch.h"
#include "kernels/math/attention_visibility.h"
#include "kernels/math/bf16.h"
#include "kernels/math/online_softmax.h"

namespace longctx::cpu {
namespace {

template <class T>
const AttentionTileKernels<T>& KernelsFor(const AttentionConfig& config, const AttentionView<T>& view);
template <>
const AttentionTileKernels<float>& KernelsFor<float>(const AttentionConfig& config,
                                                    const AttentionView<float>& view) {
  // bf16 tiles on AMX; with AVX512-BF16 alone (vdpbf16ps) only where the
  // packed driver runs the shape (or a test asks for them, bf16_amx = false):
  // the generic driver's per-product packing makes vdpbf16ps tiles slower
  // than fp32 ones (about half their GFLOP/s for a 64^3 product with its
  // packing), while packed once they run at vdpbf16ps' rate
  // (docs/BENCHMARKS.md, "Attention at GEMM speed").
  if (config.bf16 && (config.isa == AttentionIsa::kAuto || config.isa == AttentionIsa::kAvx512))
    if (const AttentionTileKernels<float>* bf16 = AttentionTileKernelsBf16(config.bf16_amx))
      if (Bf16UnitOf(*bf16) == Bf16Unit::kAmx || !config.bf16_amx ||
          (config.bf16_packed && PackedBf16AttentionUsable(view, false)))
        return *bf16;
  return AttentionTileKernelsF32(config.isa);
}
template <>
const AttentionTileKernels<double>& KernelsFor<double>(const AttentionConfig&, const AttentionView<double>&) {
  return AttentionTileKernelsF64();
}

// Key blocks per pass of the backward over their query tiles (BackwardItem).
constexpr int kBackwardGroup = 4;

// Per-thread tile scratch; nothing here grows with N except qs, dos, dqa (the
// backward's staged rows of one segment of one head: scaled Q, dO, the dQ
// accumulator; a ring of about window + 320 rows under a sliding window). Operands are copied
// to dense buffers because rows of q|k|v at their real strides (H * d and
// more apart) alias in the L1 cache: the same product with strided operands
// ran ~25 % slower. The forward's qt and acc hold kMaxForwardHeads heads,
// head x at offset x * kBlockQ * d. The backward's key-block buffers (kt, vt, kd, dka, dva)
// hold kBackwardGroup blocks, block b at offset b * kBlockK * d.
template <class T>
struct Scratch {
  LineVector<T> qt, kt, vt, kd, vd, s, dp, acc, dka, dva, qs, dos, dqa;
  std::vector<int> ra, rb;  // the backward's visible key ranges
  OnlineSoftmax<T> softmax[kMaxForwardHeads];  // the forward's statistics, per head of an item
  explicit Scratch(int64_t d)
      : qt(kMaxForwardHeads * d * kBlockQ), kt(kBackwardGroup * d * kBlockK), vt(kt.size()), kd(kt.size()), vd(kMaxForwardKeys * d),
        s(kBlockQ * kMaxForwardKeys), dp(kBlockQ * kBlockK), acc(kMaxForwardHeads * kBlockQ * d), dka(kt.size()), dva(kt.size()),
        ra(std::max(kBlockQ, kBlockK)), rb(std::max(kBlockQ, kBlockK)) {}
};

// Forward of one (segment, query block) for the item's query heads (of one
// kv head). Scores are kept transposed, st[j * kBlockQ + i] (key j, query i):
// the product K_tile Qᵀ reads K rows in place (Q is transposed once per item,
// not K once per tile) and the online-softmax updates run across queries,
// i.e. along contiguous memory, so they vectorize without any horizontal
// reduction. Each K, V tile is read from memory once for all the item's
// heads; each head folds the same tiles in the same order as an item of its
// own would.
template <class T>
void ForwardItem(const Ctx<T>& c, const Item& it, Scratch<T>& w) {
  const AttentionTileKernels<T>& K = *c.tiles;
  const int64_t d = c.d, g = it.head / c.group, i0 = it.begin;
  const int nq = static_cast<int>(it.end - i0), nh = static_cast<int>(it.heads);
  // Key index of the first query; the item's keys are those its first query
  // sees onward, up to one past the last key its last query sees (and not
  // past the segment's keys: with offset alignment the queries may lie
  // beyond them).
  const int64_t p0 = i0 + it.shift,
                k_end = std::min<int64_t>(math::EndVisibleKey(c.mask, it.end - 1 + it.shift), it.seg_end);
  T* __restrict st = w.s.data();
  for (int x = 0; x < nh; ++x) {
    LoadTransposed(K, c.q + i0 * c.sq + (it.head + x) * d, c.sq, nq, d, c.scale, kBlockQ,
                   w.qt.data() + x * d * kBlockQ);
    std::fill_n(w.acc.data() + x * kBlockQ * d, nq * d, T(0));
    w.softmax[x].Start(nq);
  }
  const int bk = ForwardKeys(c);
  for (int64_t t0 = math::FirstVisibleKey(c.mask, it.seg_begin, p0); t0 < k_end; t0 += bk) {
    const int64_t t1 = std::min<int64_t>(t0 + bk, k_end);
    const int nk = static_cast<int>(t1 - t0);
    const T* kb = c.k + t0 * c.sk + g * d;
    // V copied dense, for acc += P V with P(i, j) = st[j * kBlockQ + i].
    for (int j = 0; j < nk; ++j) std::copy_n(c.v + (t0 + j) * c.sv + g * d, d, w.vd.data() + j * d);
    for (int x = 0; x < nh; ++x) {
      T* acc = w.acc.data() + x * kBlockQ * d;
      K.gemm(nk, nq, static_cast<int>(d), kb, c.sk, 1, w.qt.data() + x * d * kBlockQ, kBlockQ, st, kBlockQ, false);
      w.softmax[x].Fold(c, t0, nk, p0, nq, st, acc);
      K.gemm(nq, static_cast<int>(d), nk, st, 1, kBlockQ, w.vd.data(), d, acc, d, true);
    }
  }
  for (int x = 0; x < nh; ++x) w.softmax[x].Finish(c, it, it.head + x, w.acc.data() + x * kBlockQ * d);
}

// The backward of one (segment, query head): key blocks ascending, taken
// kBackwardGroup at a time; per group, the query tiles that see a block of
// it, ascending, and per query tile the group's blocks it sees, ascending.
// Scores are row-major s[i * kBlockK + j] (query i, key j); K and V of a
// block are transposed once per block. Each query tile's staged rows (scaled
// Q, dO, the dQ accumulator) are read once per group, not once per block:
// at full causal L = 32,768 a block's query rows (24 MiB per thread) outgrow
// the L3, and streaming them per block runs markedly slower per FLOP than at
// L = 8,192 (docs/history/benchmarks-2026.md, "Attention at GEMM speed"). Every dQ row still adds its key
// blocks in ascending order and every dK, dV row its query tiles in
// ascending order: the results are those of one block at a time.
// Where the mask bounds a key block's reach (a sliding window) and the item
// has the whole segment's keys, the staged rows are a ring (BackwardRingRows):
// rows are staged as the first group that reads them comes, and dQ rows go
// out as soon as no later key reaches them, so a window's rows stay in the
// core's cache instead of sweeping three whole-segment buffers through it
// (the packed bf16 driver's ring, attention_packed_bf16.cc, which says why).
// The same values in the same order: the same bits.
std::atomic<int64_t> backward_ring_wraps{0};

template <class T>
int64_t BackwardRingRows(const Ctx<T>& c, int64_t sb, int64_t se, int64_t k0, int64_t k1) {
  int64_t span = 0;  // the most rows live at once: a group's first key to its last query
  for (int64_t g0 = k0; g0 < k1;) {
    KeyBlock blocks[kBackwardGroup];
    const int nb = NextKeyGroup(c, sb, se, g0, kBlockK, kBackwardGroup, 0, blocks, k1);
    int64_t thi = 0;
    for (int b = 0; b < nb; ++b) thi = std::max(thi, blocks[b].qhi);
    span = std::max(span, thi - blocks[0].j0);
    g0 = blocks[nb - 1].j0 + blocks[nb - 1].nk;
  }
  // Whole query tiles (tiles start kBlockQ-aligned from the segment's start,
  // so none straddles the ring's end), one spare.
  const int64_t rows = (span + kBlockQ - 1) / kBlockQ * kBlockQ + kBlockQ;
  return std::min(rows, se - sb);
}

template <class T>
void BackwardItem(const Ctx<T>& c, const Item& it, Scratch<T>& w) {
  const AttentionTileKernels<T>& K = *c.tiles;
  const int64_t d = c.d, h = it.head, g = h / c.group, sb = it.seg_begin, se = it.seg_end;
  // The segment's queries in key-index coordinates, [qb, qe) (training: the
  // keys' own [sb, se)); key index p is query row p - shift.
  const int64_t shift = it.shift, qb = it.q_begin + shift, qe = it.q_end + shift;
  const int di = static_cast<int>(d);
  const T* lse = c.lse + h * c.slse;
  const T* drow = c.drow + h * c.n;
  int* ra = w.ra.data();
  int* rb = w.rb.data();
  // Scaled Q and dO of this segment and head, dense rows, and the dQ
  // accumulator (zeroed): row u (from the segment's start) at u % ring.
  const int64_t len = qe - qb;
  const bool one_part = c.key_parts == 1;
  const int64_t ring = one_part && !c.offset_aligned ? BackwardRingRows(c, sb, se, it.begin, it.end) : len;
  if (ring < len) backward_ring_wraps.fetch_add(1, std::memory_order_relaxed);
  w.qs.resize(static_cast<size_t>(ring * d));
  w.dos.resize(w.qs.size());
  w.dqa.resize(w.qs.size());
  int64_t staged = 0, written = 0;  // rows [0, staged) staged; dQ rows [0, written) out
  auto stage = [&](int64_t hi) {
    for (; staged < hi; ++staged) {
      const int64_t at = staged % ring;
      const T* qrow = c.q + (it.q_begin + staged) * c.sq + h * d;
      T* qsrow = w.qs.data() + at * d;
      for (int64_t x = 0; x < d; ++x) qsrow[x] = c.scale * qrow[x];
      std::copy_n(c.d_o + (it.q_begin + staged) * c.sdo + h * d, d, w.dos.data() + at * d);
      std::fill_n(w.dqa.data() + at * d, d, T(0));
    }
  };
  auto write = [&](int64_t to) {  // final dQ rows [written, to) out, cut where the ring wraps
    while (written < to) {
      const int64_t at = written % ring, b = std::min(to, written + ring - at);
      WriteDq(c, it, w.dqa.data(), written, b, written - at);
      written = b;
    }
  };
  KeyBlock blocks[kBackwardGroup];
  // The item's keys: the segment's, or its key part's (SegmentKeyParts).
  for (int64_t g0 = it.begin; g0 < it.end;) {
    // (NextKeyGroup's query bounds are the queries', its key range the item's.)
    const int nb = NextKeyGroup(c, qb, qe, g0, kBlockK, kBackwardGroup, 0, blocks, it.end);
    const int64_t tlo = blocks[0].qlo;
    int64_t thi = 0;
    for (int b = 0; b < nb; ++b) thi = std::max(thi, blocks[b].qhi);
    stage(std::min(len, thi - qb));
    for (int b = 0; b < nb; ++b) {
      const int64_t j0 = blocks[b].j0;
      const int nk = blocks[b].nk;
      const size_t off = static_cast<size_t>(b) * kBlockK * d;
      const T* kb = c.k + j0 * c.sk + g * d;
      LoadTransposed(K, kb, c.sk, nk, d, T(1), kBlockK, w.kt.data() + off);
      for (int j = 0; j < nk; ++j) std::copy_n(kb + j * c.sk, d, w.kd.data() + off + j * d);
      LoadTransposed(K, c.v + j0 * c.sv + g * d, c.sv, nk, d, T(1), kBlockK, w.vt.data() + off);
      std::fill_n(w.dka.data() + off, nk * d, T(0));
      std::fill_n(w.dva.data() + off, nk * d, T(0));
    }
    for (int64_t t0 = tlo; t0 < thi; t0 += kBlockQ) {
      const int64_t at = (t0 - qb) % ring;
      const T* qsb = w.qs.data() + at * d;
      const T* dob = w.dos.data() + at * d;
      T* dqb = w.dqa.data() + at * d;
      for (int b = 0; b < nb; ++b) {
        const KeyBlock& kbk = blocks[b];
        if (t0 < kbk.qlo || t0 >= kbk.qhi) continue;
        const int nq = static_cast<int>(std::min<int64_t>(t0 + kBlockQ, kbk.qhi) - t0), nk = kbk.nk;
        const size_t off = static_cast<size_t>(b) * kBlockK * d;
        T* s = w.s.data();
        T* dp = w.dp.data();
        K.gemm(nq, nk, di, qsb, d, 1, w.kt.data() + off, kBlockK, s, kBlockK, false);  // S = Qs Kᵀ
        K.gemm(nq, nk, di, dob, d, 1, w.vt.data() + off, kBlockK, dp, kBlockK, false);  // dP = dO Vᵀ
        for (int r = 0; r < nq; ++r) {
          const Range rr = KeysSeenBy(c, sb, t0 + r, kbk.j0, nk);
          ra[r] = rr.a;
          rb[r] = rr.b;
        }
        K.tile_backward(s, dp, nq, kBlockK, nk, ra, rb, lse + (t0 - shift), drow + (t0 - shift));      // s = P, dp = dS
        K.gemm(nk, di, nq, s, 1, kBlockK, dob, d, w.dva.data() + off, d, true);    // dV += Pᵀ dO
        K.gemm(nk, di, nq, dp, 1, kBlockK, qsb, d, w.dka.data() + off, d, true);   // dK += dSᵀ Qs
        K.gemm(nq, di, nk, dp, kBlockK, 1, w.kd.data() + off, d, dqb, d, true);    // dQ += dS K
      }
    }
    for (int b = 0; b < nb; ++b) {
      const size_t off = static_cast<size_t>(b) * kBlockK * d;
      WriteKeyBlock(c, it, blocks[b].j0, blocks[b].nk, w.dka.data() + off, w.dva.data() + off);
    }
    g0 = blocks[nb - 1].j0 + blocks[nb - 1].nk;
    // Queries before the next group's first key see no later key (the
    // backward has no diagonal offset).
    if (one_part) write(std::min(len, g0 - qb));
  }
  if (one_part) {
    stage(len);  // rows no key block reached (none in a causal segment): dQ 0
    write(len);
    return;
  }
  const RowRange rows = KeyPartRows(c, sb, se, it.begin, it.end);
  WriteDq(c, it, w.dqa.data(), rows.lo - sb, rows.hi - sb);
}

// The packed bf16 driver (attention_packed_bf16.h) where the tiles are bf16
// (on the tile unit or vdpbf16ps) and the shape allows it;
// config.bf16_packed = false keeps the generic one.
bool UsePacked(const Ctx<float>& c, const AttentionConfig& config, bool* tile_unit) {
  const Bf16Unit unit = Bf16UnitOf(*c.tiles);
  *tile_unit = unit == Bf16Unit::kAmx;
  return config.bf16_packed && unit != Bf16Unit::kNone && PackedBf16AttentionUsable(c, *tile_unit);
}

template <class T>
void Forward(const AttentionParams& p, const AttentionConfig& config) {
  Ctx<T> c{UnpackAttention<T>(p, false)};
  c.tiles = &KernelsFor<T>(config, c);
  if constexpr (std::is_same_v<T, float>) {
    bool tile_unit = false;
    if (UsePacked(c, config, &tile_unit)) {
      PackedBf16AttentionForward({c, c.tiles, tile_unit});
      return;
    }
  }
  RunItems<Scratch<T>>(c, MakeForwardItems(c.cu, c.cu_k, c.segments, kBlockQ, c.heads, c.group, c.offset_aligned, c.query_offset),
                       ForwardItem<T>);
}

// o . dO of one row in double, dO rounded to bf16 first when kBf16DO (float
// only). In vector lanes (a serial chain of d double additions was ~5 % of a
// window-1024 bf16 backward); the products of two floats are exact in double,
// so only the order of the double sum's roundings changes.
template <bool kBf16DO, class T>
double RowDot(const T* orow, const T* dorow, int64_t d) {
  double s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t x = 0; x < d; ++x) {
    T g = dorow[x];
    if constexpr (kBf16DO && std::is_same_v<T, float>) g = math::RoundToBf16(g);
    s += static_cast<double>(orow[x]) * static_cast<double>(g);
  }
  return s;
}

template <class T>
void Backward(const AttentionParams& p, const AttentionConfig& config) {
  Ctx<T> c{UnpackAttention<T>(p, true)};
  c.tiles = &KernelsFor<T>(config, c);
  // D[h, i] = dO[i, h, :] . O[i, h, :], accumulated in double (O(N) memory).
  // D and the GQA partials are kept per calling thread across calls (grown,
  // never shrunk; every element is written before it is read): allocating
  // them per call cost page faults (RunItems says more).
  // (References taken here: inside the parallel loops a thread_local name
  // would be each worker's own.)
  static thread_local LineVector<T> kept_drow, kept_dk_part, kept_dv_part;
  LineVector<T>& drow = kept_drow;
  LineVector<T>& dk_part = kept_dk_part;
  LineVector<T>& dv_part = kept_dv_part;
  drow.resize(static_cast<size_t>(c.heads * c.n));
  T* const drow_data = drow.data();
  const int64_t n = c.n, heads = c.heads, d = c.d;
  // With bf16 tiles, D is the rowsum of the bf16 dO the products see: dS =
  // P (dP - D) cancels dP against D, and dP = dO Vᵀ is made from bf16 dO, so a
  // D from the fp32 dO left the rounding of dO, (dO_bf16 - dO) . O, in every dS
  // of the row (a query that sees only itself got dS != 0 where it is exactly 0).
  const bool bf16_d = Bf16UnitOf(*c.tiles) != Bf16Unit::kNone;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i)
    for (int64_t h = 0; h < heads; ++h) {
      const T* orow = c.o + i * c.so + h * d;
      const T* dorow = c.d_o + i * c.sdo + h * d;
      drow_data[h * n + i] = static_cast<T>(bf16_d ? RowDot<true>(orow, dorow, d) : RowDot<false>(orow, dorow, d));
    }
  c.drow = drow.data();
  bool packed = false, tile_unit = false, keys_direct = false;
  const int threads = omp_get_max_threads();
  if constexpr (std::is_same_v<T, float>) {
    packed = UsePacked(c, config, &tile_unit);
    keys_direct = packed && PackedBf16KeysDirect(c, threads);
  }
  // Key parts for the segments whose (segment, head) items hold more than a
  // thread's share of the work (the same for both drivers, so their results
  // stay equal).
  static thread_local LineVector<T> kept_dq_part;
  // (Offset-aligned blocks keep one key part: SegmentKeyParts counts a
  // segment's work on one index space.)
  const std::vector<int> segment_parts =
      c.offset_aligned ? std::vector<int>() : SegmentKeyParts(c, threads, config.backward_key_parts);
  c.key_parts = segment_parts.empty() ? 1 : *std::max_element(segment_parts.begin(), segment_parts.end());
  if (c.key_parts > 1) {
    c.segment_parts = segment_parts.data();
    kept_dq_part.resize(static_cast<size_t>((c.key_parts - 1) * heads * n * d));
    c.dq_part = kept_dq_part.data();
  }
  if (c.group > 1 && !keys_direct) {
    dk_part.resize(static_cast<size_t>(heads * c.nk * d));
    dv_part.resize(dk_part.size());
    c.dk_part = dk_part.data();
    c.dv_part = dv_part.data();
  }
  if constexpr (std::is_same_v<T, float>) {
    if (packed) {
      PackedBf16AttentionArgs args{c, c.tiles, tile_unit, c.drow, c.dk_part, c.dv_part};
      args.keys_direct = keys_direct;
      args.key_parts = c.key_parts;
      args.segment_parts = c.segment_parts;
      args.dq_part = c.dq_part;
      PackedBf16AttentionBackwardItems(args);
    }
  }
  if (!packed) RunItems<Scratch<T>>(c, MakeBackwardPartItems(c, 1), BackwardItem<T>);
  CombineDqParts(c);
  if (c.group == 1 || keys_direct) return;  // (keys_direct: the items wrote dK, dV)
  // dK, dV of kv head g = the partials of its query heads, summed in head order.
  const int64_t group = c.group, kv_heads = c.kv_heads, nk = c.nk;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < nk; ++i)
    for (int64_t g = 0; g < kv_heads; ++g) {
      T* dkrow = c.dk + i * c.sdk + g * d;
      T* dvrow = c.dv + i * c.sdv + g * d;
      const T* pk = c.dk_part + ((g * group) * nk + i) * d;
      const T* pv = c.dv_part + ((g * group) * nk + i) * d;
      for (int64_t x = 0; x < d; ++x) {
        dkrow[x] = pk[x];
        dvrow[x] = pv[x];
      }
      for (int64_t hh = 1; hh < group; ++hh) {
        pk += nk * d;
        pv += nk * d;
        for (int64_t x = 0; x < d; ++x) {
          dkrow[x] += pk[x];
          dvrow[x] += pv[x];
        }
      }
    }
}

}  // namespace

void AttentionForward(const AttentionParams& p, const AttentionConfig& config) {
  DispatchFloat(p.q.dtype, "AttentionForward", [&](auto tag) { Forward<decltype(tag)>(p, config); });
}

int64_t AttentionBackwardRingWraps() { return backward_ring_wraps.load(std::memory_order_relaxed); }

void AttentionBackward(const AttentionParams& p, const AttentionConfig& config) {
  DispatchFloat(p.q.dtype, "AttentionBackward", [&](auto tag) { Backward<decltype(tag)>(p, config); });
}

}  // namespace longctx::cpu
