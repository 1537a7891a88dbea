// Why: see attention_packed_bf16.h. The loops are attention.cc's (same items, masks,
// online softmax, FlashAttention-2 backward with five products per tile); what
// differs is where operands become bf16 pairs:
//  * forward: K (A rows) and V (pairs of consecutive keys, at the parities
//    the items' first keys have: a sliding window's first key can be odd)
//    once per call for every kv head; the item's scaled Qᵀ once per item; per
//    tile only P.
//  * backward: the segment's scaled Q and dO once per item, as A rows (for
//    S = Qs Kᵀ, dP = dO Vᵀ) and transposed, as rows of query pairs (the A
//    operands of dVᵀ += dOᵀ P, dKᵀ += Qsᵀ dS); Kᵀ, Vᵀ and K of a key block
//    once per key block; per tile one fused pass (amx::BackwardPairs) turns
//    S and dP into P and dS pairs (B operands) and dS rows, with no
//    transposing conversion. On vdpbf16ps, S and dP are not stored at all:
//    amx::DotBackwardPairs computes them in registers, two query rows at a
//    time, and runs the same pass on them there (the same bits, and a
//    faster window backward than storing them: docs/history/benchmarks-2026.md, "Attention at GEMM speed").
//    dV and dK take
//    up to four query tiles per product (kBwdPendingTiles: their C tiles
//    loaded and stored once per four tiles).
// The products are on whole 16 x 16 tiles (ProductUnit: amx::Product on the
// tile unit, its config loaded once per item, or amx::DotProduct on
// vdpbf16ps). Where a pre-converted operand would reach past its segment's
// end (the last tile of a segment) or starts at an odd key, that tile's
// operand is converted on its own with zero padding, as the generic path
// does, so values of another document never meet a zero of this one.
#include "kernels/cpu/attention_packed_bf16.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "kernels/cpu/attention_driver.h"
#include "base/log.h"
#include "kernels/math/online_softmax.h"

#if defined(__x86_64__)
#include "kernels/cpu/amx_bf16.h"

namespace longctx::cpu {
namespace {

inline int RoundUp16(int x) { return (x + 15) / 16 * 16; }

// The unit the tile products run on: the AMX tile unit (its config loaded
// once per item: oneDNN may load its own between calls) or vdpbf16ps.
struct ProductUnit {
  bool tiles;
  void Begin() const {
    if (tiles) amx::LoadTileConfig();
  }
  void operator()(int mt, int nt, int kp, const uint32_t* a, int a_ld, const uint32_t* b, int b_ld, float* c,
                  int ldc, bool accumulate) const {
    if (tiles)
      amx::Product(mt, nt, kp, a, a_ld, b, b_ld, c, ldc, accumulate);
    else
      amx::DotProduct(mt, nt, kp, a, a_ld, b, b_ld, c, ldc, accumulate);
  }
};

// Keys per block of the backward: 128, so dQ += dS K runs four k-steps per
// load and store of its C tiles instead of two (the same k-steps in the same
// order as two 64-key blocks: the same bits). The forward's blocks are
// ForwardKeys (attention_driver.h: 256 keys on the tile unit, 128 on vdpbf16ps).
constexpr int kBwdKeys = 128;
// Key blocks per pass of the backward over their query tiles (BackwardItem),
// when the first block's queries number at least kBwdGroupMinQueries: a
// window-1024 block's 1,152 queries stay in cache from one block to the
// next, and four blocks' buffers (~700 KiB) beside them would push them out
// and slow its backward (docs/history/benchmarks-2026.md, "Attention at GEMM speed").
constexpr int kBwdGroup = 4;
constexpr int64_t kBwdGroupMinQueries = 2048;
static_assert(kBlockKBf16Forward % 2 == 0 && kBlockKAmxForward % 2 == 0,
              "forward tiles keep the parity of an item's first key");

// Query tiles whose P and dS pairs one dV, dK product of the backward takes
// at most: a key block's full tiles that see all of its columns wait for the
// next (BackwardHead), so that dVᵀ += dOᵀ P and dKᵀ += Qsᵀ dS run up to 8
// k-steps per load and store of their 32 C tiles instead of 4 (the same
// k-steps in the same order: the same bits). The tile unit stores a tile in
// about the time of one tile product, so C traffic is a large part of a
// product of few k-steps: four tiles make the backward's dV, dK products
// faster than two, and eight gain nothing more
// (docs/history/benchmarks-2026.md, "Attention at GEMM speed").
constexpr int kBwdPendingTiles = 4;

// The backward's rows of packed Q, dO and of dQ as a ring (BackwardHead):
// `rows` slots, or no ring (wraps false) where the mask lets a key block
// reach about as far as the segment (full attention). kRingMirror rows past
// the end repeat slots [0, kRingMirror) for products reading the pairs of
// kBwdPendingTiles tiles across the end; kRingSlack rows cover a packer's
// zero-filled last block.
struct RowRing {
  int64_t rows;
  bool wraps;
};
constexpr int64_t kRingMirror = kBwdPendingTiles * kBlockQ;
constexpr int64_t kRingSlack = 64;

// The most rows live at once: a key group's rows from its first query (the
// rows before it are written out) to those packed for it (need_rows: up to
// 256 rows and the zero tail ahead), over the item's key groups.
RowRing MakeRowRing(const Ctx<float>& c, int64_t sb, int64_t se, int64_t k0, int64_t k1, int64_t rows) {
  int64_t span = 0;
  for (int64_t g0 = k0; g0 < k1;) {
    KeyBlock spans[kBwdGroup] = {};
    const int nb = NextKeyGroup(c, sb, se, g0, kBwdKeys, kBwdGroup, kBwdGroupMinQueries, spans, k1);
    int64_t thi = 0;
    for (int b = 0; b < nb; ++b) thi = std::max(thi, spans[b].qhi);
    span = std::max(span, RoundUp16(static_cast<int>(thi - sb)) + kBlockQ - (spans[0].j0 - sb));
    g0 = spans[nb - 1].j0 + spans[nb - 1].nk;
  }
  const int64_t need = (span + 256 + kBlockQ + kRingSlack + 127) / 128 * 128 + 128;
  if (need >= rows) return {rows, false};
  return {need, true};
}

// Pair rows [from, to) of a B-layout operand (row stride ld) set to 0.
void ZeroPairs(uint32_t* b, int ld, int from, int to) {
  if (to > from) std::memset(b + static_cast<size_t>(from) * ld, 0, sizeof(uint32_t) * (to - from) * ld);
}

// K and V of every kv head, converted once per forward call.
struct PackedKv {
  int64_t rows = 0;  // tokens rounded up to even, plus a zero tail of one tile
  int kp = 0;        // k-pairs of a K row (head_dim / 2)
  int64_t d = 0;
  int ldv = 0;                 // pairs per Vᵀ row: an odd multiple of 16 (see PackKv)
  LineVector<uint32_t> k;      // [kv_heads][rows][kp]: A rows
  LineVector<uint32_t> vt[2];  // parity e: [kv_heads][d][ldv], pair p = keys (2p + e, 2p + e + 1): Vᵀ as A rows
  const uint32_t* KRows(int64_t g, int64_t t) const { return k.data() + (g * rows + t) * kp; }
  const uint32_t* VtPairs(int64_t g, int64_t t) const {
    const int e = static_cast<int>(t & 1);
    return vt[e].data() + g * d * ldv + (t - e) / 2;
  }
};

// The keys whose Vᵀ pairs of parity e the forward's items read: [lo, hi),
// empty when lo >= hi.
struct KeySpan {
  int64_t lo = 0, hi = 0;
  bool empty() const { return lo >= hi; }
};

// Fills kv (kept by the caller across calls: sizes only grow, so no page
// faults once warm) with K and, where need[e] asks for them, the pairs of Vᵀ
// of parity e (the forward's tiles start at keys of one parity per item: full
// attention's at the segment's start, a window's at odd keys except in its
// first window, whose tiles start at the segment's start: there only that
// window's keys are packed at parity 0, not the whole call's); only the zero
// tails are cleared, the packers write the rest. Vᵀ's row stride is an odd
// multiple of 64 bytes: at a power of two (a long segment's rows / 2 pairs)
// the 16 rows of one A tile would all fall in the same L1 sets.
void PackKv(const Ctx<float>& c, const KeySpan need[2], PackedKv& kv) {
  const bool parity[2] = {!need[0].empty(), !need[1].empty()};
  const int64_t n = c.n, d = c.d, hkv = c.kv_heads;
  kv.rows = (n + 1) / 2 * 2 + kBlockK;
  kv.kp = static_cast<int>(d / 2);
  kv.d = d;
  kv.ldv = RoundUp16(static_cast<int>(kv.rows / 2)) | 16;
  kv.k.resize(static_cast<size_t>(hkv * kv.rows * kv.kp));
  kv.vt[0].resize(static_cast<size_t>(hkv * d * kv.ldv));
  kv.vt[1].resize(kv.vt[0].size());
  for (int64_t g = 0; g < hkv; ++g) {
    std::fill(kv.k.begin() + (g * kv.rows + n) * kv.kp, kv.k.begin() + (g + 1) * kv.rows * kv.kp, 0u);
    for (int64_t x = 0; x < d; ++x) {
      uint32_t* row0 = kv.vt[0].data() + (g * d + x) * kv.ldv;
      uint32_t* row1 = kv.vt[1].data() + (g * d + x) * kv.ldv;
      if (parity[0]) std::fill(row0 + (n + 1) / 2, row0 + kv.ldv, 0u);
      if (parity[1]) std::fill(row1 + n / 2, row1 + kv.ldv, 0u);
    }
  }
  constexpr int64_t kChunk = 256;  // rows per task (even, so pairs never straddle two tasks)
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) collapse(2)
  for (int64_t g = 0; g < hkv; ++g)
    for (int64_t ch = 0; ch < chunks; ++ch) {
      const int64_t r0 = ch * kChunk, rows = std::min(kChunk, n - r0);
      const int di = static_cast<int>(d);
      amx::PackPairsAlongRows(c.k + r0 * c.sk + g * d, c.sk, static_cast<int>(rows), di,
                              kv.k.data() + (g * kv.rows + r0) * kv.kp, kv.kp);
      // Whole 16 x 16 pair blocks, zero past the keys: only the last chunk
      // writes past its pairs, into the zero tail.
      // A chunk's pairs of parity e hold keys [r0 + e, r0 + e + kChunk).
      auto wanted = [&](int e) { return r0 + e < need[e].hi && r0 + e + kChunk > need[e].lo; };
      if (wanted(0))
        amx::PackPairsOfColumns(c.v + r0 * c.sv + g * d, c.sv, static_cast<int>(rows), di,
                                kv.vt[0].data() + g * d * kv.ldv + r0 / 2, kv.ldv);
      // Parity 1: keys (r0 + 1, r0 + 2), ...; the chunk's last pair takes the
      // next chunk's first key (or pairs with zero at the end).
      const int64_t odd_rows = std::min(kChunk, n - r0 - 1);
      if (wanted(1) && odd_rows > 0)
        amx::PackPairsOfColumns(c.v + (r0 + 1) * c.sv + g * d, c.sv, static_cast<int>(odd_rows), di,
                                kv.vt[1].data() + g * d * kv.ldv + r0 / 2, kv.ldv);
    }
}

// The backward's key-block buffers (ktb, vtb, kdb, dkt, dvt, pt, dst) hold
// kBwdGroup blocks, block b at offset b times one block's size; a block's pt
// and dst hold the P and dS pairs of kBwdPendingTiles query tiles.
constexpr int kPendingPairRows = kBwdPendingTiles * kBlockQ / 2;  // per block of pt, dst
struct PackedScratch {
  LineVector<float> st, acc, dkt, dvt, s, dp, dqa, inv;
  LineVector<uint32_t> qb, pa, pt, dst, pb, vt, ktb, vtb, kdb, qsa, dosa, qsb, dosb;
  std::vector<int> ra, rb;  // the backward's visible key ranges
  OnlineSoftmax<float> softmax[kMaxForwardHeads];  // the forward's statistics, per head of an item
  explicit PackedScratch(int64_t d)
      : st(kMaxForwardKeys * kBlockQ), acc(kMaxForwardHeads * d * kBlockQ), dkt(kBwdGroup * kBwdKeys * d), dvt(dkt.size()),
        s(kBlockQ * kBwdKeys), dp(kBlockQ * kBwdKeys), inv(kBlockQ), qb(kMaxForwardHeads * d / 2 * kBlockQ), pa(kBlockQ * kBwdKeys / 2),
        pt(kBwdGroup * kBwdKeys * kPendingPairRows), dst(pt.size()), pb(kMaxForwardKeys / 2 * kBlockQ),
        vt(d * kMaxForwardKeys / 2), ktb(kBwdGroup * d / 2 * kBwdKeys), vtb(ktb.size()), kdb(ktb.size()),
        ra(kBlockK), rb(kBlockK) {}
};

// The output accumulates transposed, Oᵀ += Vᵀ Pᵀ (acc[x * kBlockQ + i]): the
// transposed score tile's rows are keys, so the exp pass can write pairs of
// its rows — P's k-pairs as the B operand wants them — straight from
// registers (amx::ExpSumPairs), with no transposing conversion; the tile unit
// gives Oᵀ the bits of O = P V (the same k-steps in the same order).
void ForwardItem(const Ctx<float>& c, const Item& it, PackedScratch& w, const PackedKv& kv, ProductUnit product) {
  const int64_t d = c.d, g = it.head / c.group, i0 = it.begin;
  const int di = static_cast<int>(d), kp = di / 2;
  const int nq = static_cast<int>(it.end - i0), mq = RoundUp16(nq), nh = static_cast<int>(it.heads);
  const int64_t p0 = i0 + it.shift, k_end = math::EndVisibleKey(c.mask, it.end - 1 + it.shift);
  float* st = w.st.data();
  // Per head x of the item: scaled Qᵀ as B, [kp][64] (columns past mq are
  // not read), at qb + x * kp * kBlockQ; Oᵀ at acc + x * d * kBlockQ.
  for (int x = 0; x < nh; ++x) {
    amx::PackRowPairsTransposed(c.q + i0 * c.sq + (it.head + x) * d, c.sq, nq, di, c.scale,
                                w.qb.data() + x * kp * kBlockQ, kBlockQ);
    std::fill_n(w.acc.data() + x * d * kBlockQ, d * kBlockQ, 0.f);
    w.softmax[x].Start(nq);
  }
  product.Begin();
  const int o_lines = nq * di / 16;  // 64-byte lines of one head's O rows
  int o_prefetched = 0;
  const int bk = ForwardKeys(c);  // keys per tile
  for (int64_t t0 = math::FirstVisibleKey(c.mask, it.seg_begin, p0); t0 < k_end; t0 += bk) {
    const int64_t t1 = std::min<int64_t>(t0 + bk, k_end);
    const int nk = static_cast<int>(t1 - t0);
    for (int e = std::min(nh * o_lines, o_prefetched + 32); o_prefetched < e; ++o_prefetched) {
      const int x = o_prefetched / o_lines, line = o_prefetched % o_lines;
      const int r = line / (di / 16), col = line % (di / 16) * 16;
      __builtin_prefetch(c.o + (i0 + r) * c.so + (it.head + x) * d + col, 1, 3);
    }
    const int kpp = RoundUp16((nk + 1) / 2);
    // Vᵀ pre-converted unless this tile's pairs reach past the segment.
    const uint32_t* vt = kv.VtPairs(g, t0);
    int ldv = kv.ldv;
    if (t0 + 2 * kpp > it.seg_end) {
      amx::PackPairsOfColumns(c.v + t0 * c.sv + g * d, c.sv, nk, di, w.vt.data(), bk / 2);
      vt = w.vt.data();
      ldv = bk / 2;
    }
    for (int x = 0; x < nh; ++x) {
      OnlineSoftmax<float>& sm = w.softmax[x];
      float* acc = w.acc.data() + x * d * kBlockQ;
      product(RoundUp16(nk), mq, kp, kv.KRows(g, t0), kp, w.qb.data() + x * kp * kBlockQ, kBlockQ, st, kBlockQ,
              false);  // Sᵀ
      // Fold's statistics, then its exp pass writing P as key pairs of the
      // queries (B, [kpp][kBlockQ], zero past nq and in pairs past nk), and
      // the rescale of Oᵀ's columns.
      sm.FoldMax(c, t0, nk, p0, nq, st);
      amx::ExpSumPairs(st, nk, kBlockQ, nq, sm.ra.data(), sm.rb.data(), sm.msafe.data(), sm.l.data(), w.pb.data(),
                       kBlockQ);
      ZeroPairs(w.pb.data(), kBlockQ, (nk + 1) / 2, kpp);
      amx::ScaleColumns(acc, di, kBlockQ, nq, sm.alpha.data());
      product(di, mq, kpp, vt, ldv, w.pb.data(), kBlockQ, acc, kBlockQ, true);  // Oᵀ += Vᵀ Pᵀ
    }
  }
  // O = Oᵀ's columns / l, through register transposes.
  for (int x = 0; x < nh; ++x) {
    w.softmax[x].InvSums(nq, w.inv.data());
    amx::StoreTransposed(w.acc.data() + x * d * kBlockQ, kBlockQ, di, nq, c.o + i0 * c.so + (it.head + x) * d, c.so,
                         w.inv.data());
    w.softmax[x].WriteLse(c, it, it.head + x);
  }
}

std::atomic<int64_t> calls[2] = {0, 0};  // [tile_unit]
std::atomic<int64_t> ring_wraps{0};

// Where one query head's dK, dV rows go: its partial or the outputs
// (KeyBlockDestination), stored; or, for a later head of a keys_direct item,
// the outputs, added to.
struct KeysOut {
  float *dk, *dv;
  int64_t sdk, sdv;
  bool add;
};

// Backward, after a key block [j0, j0 + nk): its dK, dV from the transposed
// accumulators (dkt[x * ld + r]: key r, dimension x) to `out`.
void WriteKeyBlockTransposed(const KeysOut& out, int di, int64_t j0, int nk, const float* dkt, const float* dvt,
                             int ld) {
  if (out.add) {
    amx::AddTransposed(dkt, ld, di, nk, out.dk + j0 * out.sdk, out.sdk);
    amx::AddTransposed(dvt, ld, di, nk, out.dv + j0 * out.sdv, out.sdv);
    return;
  }
  amx::StoreTransposed(dkt, ld, di, nk, out.dk + j0 * out.sdk, out.sdk);
  amx::StoreTransposed(dvt, ld, di, nk, out.dv + j0 * out.sdv, out.sdv);
}

// The products of a query tile against a key block: S = Qs Kᵀ and dP = dO Vᵀ
// (row-major, queries by keys), then one fused pass (amx::BackwardPairs) gives
// P and dS as pairs of query rows and dS as rows of key pairs, and
//   dQ  += dS K,     A = dS rows,   B = K pairs;
//   dVᵀ += dOᵀ P,    A = dOᵀ rows of query pairs, B = P pairs;
//   dKᵀ += Qsᵀ dS,   A = Qsᵀ,       B = dS pairs.
// dK and dV accumulate transposed so that P and dS enter as B operands
// straight from the pass: no transposing conversion of Pᵀ and dSᵀ (the tile
// unit gives Cᵀ = Bᵀ Aᵀ the bits of C = A B, so the results are those of
// dV += Pᵀ dO, dK += dSᵀ Qs, as the generic driver computes them).
void BackwardHead(const Ctx<float>& c, const Item& it, PackedScratch& w, ProductUnit product, const KeysOut& keys) {
  const int64_t d = c.d, h = it.head, g = h / c.group, sb = it.seg_begin, se = it.seg_end, len = se - sb;
  const int di = static_cast<int>(d), kp = di / 2;
  const float* lse = c.lse + h * c.slse;
  const float* drow = c.drow + h * c.n;
  int* ra = w.ra.data();
  int* rb = w.rb.data();
  const int64_t rows = (len + 1) / 2 * 2 + kBlockQ;
  const float* q_rows = c.q + sb * c.sq + h * d;
  const float* do_rows = c.d_o + sb * c.sdo + h * d;
  // The item's keys [it.begin, it.end): the segment's, or a key part's
  // (SegmentKeyParts), whose dQ rows are `reach`; rows before it are never
  // packed, zeroed or written (its start is even: parts start kKeyPartAlign
  // keys apart from sb, and the backward's first query of a key is the key).
  const RowRange reach = KeyPartRows(c, sb, se, it.begin, it.end);
  const int64_t first_row = c.key_parts == 1 ? 0 : (reach.lo - sb) / 2 * 2;
  const int64_t last_row = c.key_parts == 1 ? len : reach.hi - sb;
  const RowRing ring = MakeRowRing(c, sb, se, it.begin, it.end, rows);
  if (ring.wraps) ring_wraps.fetch_add(1, std::memory_order_relaxed);
  const int64_t ring_rows = ring.rows + (ring.wraps ? kRingMirror : 0);  // with the mirrored head (B pairs)
  const int ldt = RoundUp16(static_cast<int>((ring_rows + kRingSlack) / 2)) | 16;
  // Scaled Q and dO of this segment and head (fp32 product, then rounded
  // once), packed straight from their rows: as A rows [rows][kp] and,
  // transposed, as rows of query pairs [d][ldt] (ldt an odd multiple of 16
  // pairs, so a tile's 16 rows do not share L1 sets); rows past len are zero.
  // dQ accumulator with room for a whole last tile. Packed rows and zeroed dQ
  // rows are made as the key loop first needs them, and dQ rows are written
  // out as soon as no later key block can reach them (queries before the next
  // block's first key). Where the mask bounds how far a key block reaches (a
  // sliding window), the five buffers are a ring of ring.rows rows (row u at
  // u % ring.rows): a window's rows stay in the core's cache instead of
  // sweeping whole-segment buffers through it (at 32K tokens each was 4-8
  // MiB per head, written once and evicted dirty, so the ring makes the
  // window-1024 backward at 32K tokens faster:
  // docs/history/benchmarks-2026.md, "Attention at GEMM speed"). The values and their order
  // are the same: the same bits.
  w.dqa.resize(static_cast<size_t>(ring.rows * d));
  w.qsa.resize(static_cast<size_t>(ring_rows * kp));
  w.dosa.resize(w.qsa.size());
  w.qsb.resize(static_cast<size_t>(d * ldt));
  w.dosb.resize(w.qsb.size());
  auto slot = [&](int64_t u) { return ring.wraps ? u % ring.rows : u; };
  // fn(a, b, slot(a)) over rows [from, to) cut where the ring wraps.
  auto for_each_lap = [&](int64_t from, int64_t to, auto&& fn) {
    for (int64_t a = from; a < to;) {
      const int64_t at = slot(a), b = ring.wraps ? std::min(to, a + ring.rows - at) : to;
      fn(a, b, at);
      a = b;
    }
  };
  int64_t packed = first_row, zeroed = first_row;  // rows packed, dQ rows zeroed
  int64_t written = c.key_parts == 1 ? 0 : reach.lo - sb;  // dQ rows written out
  // Rows [a, b) of one lap (b - a even, a even) packed into the four buffers
  // at slot(a); on a wrapping ring the rows of slots [0, kRingMirror) also
  // after the ring's end, so that a product reading the pairs of several
  // tiles across the end finds them there. Rows past len are zero.
  auto pack_piece = [&](int64_t a, int64_t b, int64_t at) {
    const int64_t real = std::min(b, len) - a;  // rows from Q, dO; the rest zero
    if (real > 0) {
      const int count = static_cast<int>(real);
      amx::PackScaledRowsAndPairs(q_rows + a * c.sq, c.sq, count, di, c.scale, w.qsa.data() + at * kp, kp, nullptr,
                                  0);
      amx::PackScaledRowsAndPairs(do_rows + a * c.sdo, c.sdo, count, di, 1.f, w.dosa.data() + at * kp, kp, nullptr, 0);
      amx::PackScaledPairsOfColumns(q_rows + a * c.sq, c.sq, count, di, c.scale, w.qsb.data() + at / 2, ldt);
      amx::PackScaledPairsOfColumns(do_rows + a * c.sdo, c.sdo, count, di, 1.f, w.dosb.data() + at / 2, ldt);
    }
    const int64_t z = std::max<int64_t>(real, 0);  // zero rows [a + z, b): past the segment's end
    if (a + z < b) {
      std::fill(w.qsa.begin() + (at + z) * kp, w.qsa.begin() + (at + b - a) * kp, 0u);
      std::fill(w.dosa.begin() + (at + z) * kp, w.dosa.begin() + (at + b - a) * kp, 0u);
      const int64_t p_lo = (at + z + 1) / 2, p_hi = (at + b - a) / 2;  // an odd len's last pair has its zero
      for (int64_t x = 0; x < d; ++x) {
        std::fill(w.qsb.begin() + x * ldt + p_lo, w.qsb.begin() + x * ldt + p_hi, 0u);
        std::fill(w.dosb.begin() + x * ldt + p_lo, w.dosb.begin() + x * ldt + p_hi, 0u);
      }
    }
  };
  auto need_rows = [&](int64_t hi) {  // rows [first_row, hi) of the packed Q, dO and of dQ ready
    if (hi > packed && packed < rows) {
      // In steps of at least 256 rows (even: pairs never straddle two steps;
      // a step's last 16-pair block may write zeros the next step
      // overwrites), through the segment's end to the zero tail.
      int64_t to = std::min<int64_t>(rows, std::max<int64_t>(hi, packed + 256));
      if (to > len) to = rows;
      CHECK(!ring.wraps || to - written + kRingSlack <= ring.rows)
          << "packed bf16 attention backward: rows " << written << ".." << to << " do not fit a ring of "
          << ring.rows;
      for_each_lap(packed, to, [&](int64_t a, int64_t b, int64_t at) {
        pack_piece(a, b, at);
        if (ring.wraps && at < kRingMirror) pack_piece(a, std::min(b, a + kRingMirror - at), at + ring.rows);
      });
      packed = to;
    }
    if (hi > zeroed) {
      const int64_t to = std::min<int64_t>(rows, std::max<int64_t>(hi, zeroed + 256));
      CHECK(!ring.wraps || to - written <= ring.rows)
          << "packed bf16 attention backward: dQ rows " << written << ".." << to << " do not fit a ring of "
          << ring.rows;
      for_each_lap(zeroed, to, [&](int64_t a, int64_t b, int64_t at) {
        std::fill(w.dqa.begin() + at * d, w.dqa.begin() + (at + b - a) * d, 0.f);
      });
      zeroed = to;
    }
  };
  // dQ rows [from, to) out. With one key part they are final (scale * dQ),
  // written once and read only by a later op: streaming stores (no read for
  // ownership); a key part's raw rows are read back by CombineDqParts.
  auto write_dq = [&](int64_t from, int64_t to) {
    for_each_lap(from, to, [&](int64_t a, int64_t b, int64_t at) {
      if (c.key_parts == 1)
        amx::StreamScaledRows(w.dqa.data() + at * d, d, b - a, di, c.scale, c.dq + (sb + a) * c.sdq + h * d, c.sdq);
      else
        WriteDq(c, it, w.dqa.data(), a, b, a - at);
    });
  };
  float* s = w.s.data();
  float* dp = w.dp.data();
  // A key block of the group and where its buffers are (Kᵀ, Vᵀ as B
  // [kp][kBwdKeys], K as B key pairs [kBwdKeys / 2][d], dKᵀ and dVᵀ
  // [d][kBwdKeys], P and dS pairs [kPendingPairRows][kBwdKeys]); pending:
  // the full tiles whose P, dS pairs wait in pair rows [0, 32 pending) of the
  // block's pt, dst, the first at query offset pending_u, the others after it.
  struct Block : KeyBlock {
    int mk, kpk;
    uint32_t *ktb, *vtb, *kdb, *pt, *dst;
    float *dkt, *dvt;
    int pending;
    int64_t pending_u;
  };
  Block blocks[kBwdGroup];
  // The products of query tile t0 against block kb. P and dS pairs of query
  // rows (B, row stride kBwdKeys): a full tile at an even offset that sees
  // every column, with a next tile in the block, waits in the block's pt,
  // dst after those already waiting, so dVᵀ and dKᵀ take up to
  // kBwdPendingTiles tiles in one product — k-steps in the same order, the
  // same bits; waiting tiles go without the next when it sees fewer columns.
  // dS as A rows of key pairs for dQ, zero in the rows past nq.
  auto tile = [&](Block& kb, int64_t t0) {
    const int64_t j0 = kb.j0;
    const int nk = kb.nk, mk = kb.mk, kpk = kb.kpk;
    const int nq = static_cast<int>(std::min<int64_t>(t0 + kBlockQ, kb.qhi) - t0), mq = RoundUp16(nq);
    const int kpq = RoundUp16((nq + 1) / 2);
    const int64_t u = t0 - sb, su = slot(u);
    CHECK(!ring.wraps || u % kBlockQ == 0) << "packed bf16 attention backward: query tile at " << u
                                           << ", not a tile boundary, on a ring";
    // The key columns any row of the tile sees, [c0, c1) in 32-key steps:
    // at a causal diagonal or a window's far edge half a 128-key block is
    // hidden from the whole tile, and its products and softmax pass are
    // skipped (their P and dS would be exact zeros, whose products add
    // nothing: the same bits). ra, rb become relative to c0.
    int lo = nk, hi = 0;
    for (int r = 0; r < nq; ++r) {
      const Range rr = KeysSeenBy(c, sb, t0 + r, j0, nk);
      ra[r] = rr.a;
      rb[r] = rr.b;
      if (rr.a < rr.b) {
        lo = std::min(lo, rr.a);
        hi = std::max(hi, rr.b);
      }
    }
    if (lo >= hi) {  // no row sees a key of the block (not for [qlo, qhi) of these masks): the whole width
      lo = 0;
      hi = nk;
    }
    const int c0 = lo / 32 * 32;
    const int c1n = std::min(mk, (hi + 31) / 32 * 32);       // product columns (keys), <= mk
    const int c1k = std::min(2 * kpk, (hi + 31) / 32 * 32);  // k-pairs of dQ's product, x 2
    const bool all_columns = c0 == 0 && c1n == mk && c1k == 2 * kpk;
    for (int r = 0; r < nq; ++r) {
      ra[r] = std::max(ra[r] - c0, 0);
      rb[r] = std::max(rb[r] - c0, ra[r]);
    }
    if (kb.pending > 0 && !all_columns) {
      const int kpw = kb.pending * (kBlockQ / 2);
      product(di, mk, kpw, w.dosb.data() + slot(kb.pending_u) / 2, ldt, kb.pt, kBwdKeys, kb.dvt, kBwdKeys, true);
      product(di, mk, kpw, w.qsb.data() + slot(kb.pending_u) / 2, ldt, kb.dst, kBwdKeys, kb.dkt, kBwdKeys, true);
      kb.pending = 0;
    }
    const int off = kb.pending * (kBlockQ / 2);
    if (nq != mq) std::fill(w.pa.begin(), w.pa.begin() + mq * kpk, 0u);
    uint32_t* const p_pairs = kb.pt + off * kBwdKeys + c0;
    uint32_t* const ds_pairs = kb.dst + off * kBwdKeys + c0;
    if (product.tiles) {
      product(mq, c1n - c0, kp, w.qsa.data() + su * kp, kp, kb.ktb + c0, kBwdKeys, s + c0, kBwdKeys, false);  // S
      product(mq, c1n - c0, kp, w.dosa.data() + su * kp, kp, kb.vtb + c0, kBwdKeys, dp + c0, kBwdKeys,
              false);  // dP
      amx::BackwardPairs(s + c0, dp + c0, nq, kBwdKeys, c1n - c0, c1k - c0, ra, rb, lse + t0, drow + t0, p_pairs,
                         ds_pairs, kBwdKeys, w.pa.data() + c0 / 2, kpk);
    } else {  // vdpbf16ps: S and dP stay in registers for the softmax pass (the same bits, no fp32 tiles)
      amx::DotBackwardPairs(w.qsa.data() + su * kp, w.dosa.data() + su * kp, kp, kp, kb.ktb + c0, kb.vtb + c0,
                            kBwdKeys, nq, c1n - c0, c1k - c0, ra, rb, lse + t0, drow + t0, p_pairs, ds_pairs,
                            kBwdKeys, w.pa.data() + c0 / 2, kpk);
    }
    ZeroPairs(kb.pt, kBwdKeys, off + (nq + 1) / 2, off + kpq);
    ZeroPairs(kb.dst, kBwdKeys, off + (nq + 1) / 2, off + kpq);
    product(mq, di, (c1k - c0) / 2, w.pa.data() + c0 / 2, kpk, kb.kdb + c0 / 2 * di, di, w.dqa.data() + su * d, di,
            true);  // dQ += dS K
    if (all_columns && nq == kBlockQ && u % 2 == 0 && t0 + kBlockQ < kb.qhi && kb.pending + 1 < kBwdPendingTiles) {
      if (kb.pending == 0) kb.pending_u = u;
      ++kb.pending;
      return;
    }
    // dOᵀ and Qsᵀ of the tile(s) as A: the item's pairs from query u0 on
    // (pairs past the segment's end are the zero tail). u0 is even: a key
    // block's first query is its first key (the backward has no diagonal
    // offset: AttentionParams::Validate), an even offset from the segment's
    // start, and tiles follow in steps of kBlockQ.
    const int64_t u0 = kb.pending > 0 ? kb.pending_u : u;
    CHECK(u0 % 2 == 0) << "packed bf16 attention backward: query tile at odd offset " << u0;
    const int kpt = off + kpq;
    // dVᵀ += dOᵀ P, dKᵀ += Qsᵀ dS (on the tile's columns)
    const int64_t su0 = slot(u0);
    product(di, c1n - c0, kpt, w.dosb.data() + su0 / 2, ldt, kb.pt + c0, kBwdKeys, kb.dvt + c0, kBwdKeys, true);
    product(di, c1n - c0, kpt, w.qsb.data() + su0 / 2, ldt, kb.dst + c0, kBwdKeys, kb.dkt + c0, kBwdKeys, true);
    kb.pending = 0;
  };
  product.Begin();
  // Key blocks ascending, kBwdGroup at a time; per group the query tiles
  // that see a block of it, ascending, and per tile the group's blocks it
  // sees, ascending: each tile's packed Q, dO rows and dQ rows are read once
  // per group, not once per block (the generic driver's BackwardItem says
  // why). Every dQ row still adds its key blocks in ascending order and every
  // dKᵀ, dVᵀ column its query tiles in ascending order: the same bits.
  for (int64_t g0 = it.begin; g0 < it.end;) {
    KeyBlock spans[kBwdGroup] = {};
    const int nb = NextKeyGroup(c, sb, se, g0, kBwdKeys, kBwdGroup, kBwdGroupMinQueries, spans, it.end);
    const int64_t tlo = spans[0].qlo;
    int64_t thi = 0;
    for (int b = 0; b < nb; ++b) {
      const int64_t j0 = spans[b].j0;
      thi = std::max(thi, spans[b].qhi);
      const int nk = spans[b].nk;
      const size_t key_pairs = static_cast<size_t>(b) * (d / 2) * kBwdKeys;  // one block's ktb, vtb, kdb
      const size_t acc_off = static_cast<size_t>(b) * d * kBwdKeys;
      const size_t pair_off = static_cast<size_t>(b) * kBwdKeys * kPendingPairRows;
      Block& kb = blocks[b];
      kb = {spans[b],
            RoundUp16(nk),
            RoundUp16((nk + 1) / 2),
            w.ktb.data() + key_pairs,
            w.vtb.data() + key_pairs,
            w.kdb.data() + key_pairs,
            w.pt.data() + pair_off,
            w.dst.data() + pair_off,
            w.dkt.data() + acc_off,
            w.dvt.data() + acc_off,
            0,
            0};
      const float* kr = c.k + j0 * c.sk + g * d;
      // Kᵀ and Vᵀ as B, [kp][kBwdKeys] (columns past mk are not read).
      amx::PackRowPairsTransposed(kr, c.sk, nk, di, 1.f, kb.ktb, kBwdKeys);
      amx::PackRowPairsTransposed(c.v + j0 * c.sv + g * d, c.sv, nk, di, 1.f, kb.vtb, kBwdKeys);
      amx::PackPairsOfRows(kr, c.sk, nk, di, kb.kdb, di);  // K as B: key pairs
      ZeroPairs(kb.kdb, di, (nk + 1) / 2, kb.kpk);
      std::fill(kb.dkt, kb.dkt + d * kBwdKeys, 0.f);
      std::fill(kb.dvt, kb.dvt + d * kBwdKeys, 0.f);
    }
    // Every row this group's tiles read or write: whole 16-row groups of the
    // last tile, and the pairs the tiles of one dV, dK product reach.
    need_rows(std::min<int64_t>(rows, RoundUp16(static_cast<int>(thi - sb)) + kBlockQ));
    for (int64_t t0 = tlo; t0 < thi; t0 += kBlockQ)
      for (int b = 0; b < nb; ++b)
        if (t0 >= blocks[b].qlo && t0 < blocks[b].qhi) tile(blocks[b], t0);
    for (int b = 0; b < nb; ++b) {
      CHECK(blocks[b].pending == 0) << "packed bf16 attention backward: a tile's dK, dV left pending";
      WriteKeyBlockTransposed(keys, di, blocks[b].j0, blocks[b].nk, blocks[b].dkt, blocks[b].dvt, kBwdKeys);
    }
    // Queries before the next group's first key see no later key.
    const int64_t j_end = blocks[nb - 1].j0 + blocks[nb - 1].nk;
    const int64_t done = std::max(written, std::min<int64_t>(last_row, j_end - sb));
    write_dq(written, done);
    written = done;
    g0 = j_end;
  }
  write_dq(written, last_row);
}

// A backward item: one query head (it.heads == 1) to its destination, or
// (keys_direct) the it.heads query heads of one kv head in turn, each adding
// its dK, dV to the outputs after the first stored them.
void BackwardItem(const Ctx<float>& c, const Item& it, PackedScratch& w, ProductUnit product, bool keys_direct) {
  if (!keys_direct) {
    const KeyBlockDestination<float> out(c, it);
    BackwardHead(c, it, w, product, {out.dk, out.dv, out.sdk, out.sdv, false});
    return;
  }
  const int64_t g = it.head / c.group;
  for (int64_t x = 0; x < it.heads; ++x) {
    Item head = it;
    head.head = it.head + x;
    head.heads = 1;
    BackwardHead(c, head, w, product, {c.dk + g * c.d, c.dv + g * c.d, c.sdk, c.sdv, x > 0});
  }
}

Ctx<float> CtxOf(const PackedBf16AttentionArgs& a) {
  CHECK(PackedBf16AttentionUsable(a.view, a.tile_unit))
      << "packed bf16 attention: not usable here on " << (a.tile_unit ? "AMX" : "AVX512-BF16");
  calls[a.tile_unit].fetch_add(1, std::memory_order_relaxed);
  Ctx<float> c{a.view};
  c.tiles = a.tiles;
  c.drow = a.drow;
  c.dk_part = a.dk_part;
  c.dv_part = a.dv_part;
  c.key_parts = a.key_parts;
  c.segment_parts = a.segment_parts;
  c.dq_part = a.dq_part;
  CHECK(c.key_parts == 1 || c.dq_part != nullptr) << "packed bf16 attention backward: key parts without dq_part";
  return c;
}

}  // namespace

bool PackedBf16AttentionUsable(const AttentionView<float>& view, bool tile_unit) {
  return view.d % 32 == 0 && view.d <= 256 && view.cu_k == view.cu && !view.offset_aligned &&
         (tile_unit ? amx::Usable() : amx::PairsUsable());
}

int64_t PackedBf16AttentionCalls(bool tile_unit) { return calls[tile_unit].load(std::memory_order_relaxed); }

int64_t PackedBf16BackwardRingWraps() { return ring_wraps.load(std::memory_order_relaxed); }

bool PackedBf16KeysDirect(const AttentionView<float>& view, int threads) {
  return view.group > 1 && view.segments * view.kv_heads >= 2 * static_cast<int64_t>(threads);
}

void PackedBf16AttentionForward(const PackedBf16AttentionArgs& args) {
  const Ctx<float> c = CtxOf(args);
  const ProductUnit product{args.tile_unit};
  const std::vector<Item> items = MakeForwardItems(c.cu, c.cu_k, c.segments, kBlockQ, c.heads, c.group);
  // Per parity of the items' first keys (ForwardItem's tiles step by an even
  // count), the keys their tiles read: from the first key to the last tile's
  // pairs, which reach up to a tile past the last visible key.
  KeySpan need[2];
  for (const Item& it : items) {
    const int64_t first = math::FirstVisibleKey(c.mask, it.seg_begin, it.begin + it.shift);
    const int64_t end = math::EndVisibleKey(c.mask, it.end - 1 + it.shift) + kMaxForwardKeys;
    KeySpan& span = need[first & 1];
    span = span.empty() ? KeySpan{first, end} : KeySpan{std::min(span.lo, first), std::max(span.hi, end)};
  }
  static thread_local PackedKv kept;  // the calling thread's, grown across calls
  PackKv(c, need, kept);
  const PackedKv& kv = kept;
  RunItems<PackedScratch>(c, items, [&kv, product](const Ctx<float>& cc, const Item& it, PackedScratch& w) {
    ForwardItem(cc, it, w, kv, product);
  });
}

void PackedBf16AttentionBackwardItems(const PackedBf16AttentionArgs& args) {
  const Ctx<float> c = CtxOf(args);
  const ProductUnit product{args.tile_unit};
  const bool direct = args.keys_direct;
  CHECK(!direct || c.group > 1) << "packed bf16 attention backward: keys_direct without GQA";
  RunItems<PackedScratch>(
      c, MakeBackwardPartItems(c, direct ? c.group : 1),
      [product, direct](const Ctx<float>& cc, const Item& it, PackedScratch& w) {
        BackwardItem(cc, it, w, product, direct);
      });
}

}  // namespace longctx::cpu

#else  // not x86-64: no AMX, no AVX512-BF16

namespace longctx::cpu {
bool PackedBf16AttentionUsable(const AttentionView<float>&, bool) { return false; }
int64_t PackedBf16AttentionCalls(bool) { return 0; }
int64_t PackedBf16BackwardRingWraps() { return 0; }
bool PackedBf16KeysDirect(const AttentionView<float>&, int) { return false; }
void PackedBf16AttentionForward(const PackedBf16AttentionArgs&) {
  LOG(FATAL) << "PackedBf16AttentionForward: no AMX or AVX512-BF16 on this host";
}
void PackedBf16AttentionBackwardItems(const PackedBf16AttentionArgs&) {
  LOG(FATAL) << "PackedBf16AttentionBackwardItems: no AMX or AVX512-BF16 on this host";
}
}  // namespace longctx::cpu

#endif
