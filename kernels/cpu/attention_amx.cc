// Why: see attention_amx.h. The loops are attention.cc's (same items, masks,
// online softmax, FlashAttention-2 backward with five products per tile); what
// differs is where operands become bf16 pairs:
//  * forward: K (A rows) and V (pairs of consecutive keys, at both parities,
//    since a sliding window's first key can be odd) once per call for every
//    kv head; the item's scaled Qᵀ once per item; per tile only P.
//  * backward: the segment's scaled Q and dO once per item, as A rows (for
//    S = Qs Kᵀ, dP = dO Vᵀ) and transposed, as rows of query pairs (the A
//    operands of dVᵀ += dOᵀ P, dKᵀ += Qsᵀ dS); Kᵀ, Vᵀ and K of a key block
//    once per key block; per tile one fused pass (amx::BackwardPairs) turns
//    S and dP into P and dS pairs (B operands) and dS rows, with no
//    transposing conversion. dV and dK take two query tiles per product where
//    they can (C stored and reloaded half as often).
// The products are amx::Product on whole 16 x 16 tiles; the tile config is
// loaded once per item. Where a pre-converted operand would reach past its
// segment's end (the last tile of a segment) or starts at an odd key, that
// tile's operand is converted on its own with zero padding, as the generic
// path does, so values of another document never meet a zero of this one.
#include "kernels/cpu/attention_amx.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include <omp.h>

#include "kernels/cpu/attention_driver.h"
#include "kernels/log.h"
#include "kernels/math/online_softmax.h"

#if defined(__x86_64__)
#include "kernels/cpu/amx_bf16.h"

namespace longctx::cpu {
namespace {

inline int RoundUp16(int x) { return (x + 15) / 16 * 16; }

// Keys per block of the backward: 128, so dQ += dS K runs four k-steps per
// load and store of its C tiles instead of two (the same k-steps in the same
// order as two 64-key blocks: the same bits). The forward's blocks are
// kBlockKAmxForward keys (attention_driver.h).
constexpr int kBwdKeys = 128;

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

// Fills kv (kept by the caller across calls: sizes only grow, so no page
// faults once warm); only the zero tails are cleared, the packers write the
// rest. Vᵀ's row stride is an odd multiple of 64 bytes: at a power of two (a
// long segment's rows / 2 pairs) the 16 rows of one A tile would all fall in
// the same L1 sets.
void PackKv(const Ctx<float>& c, PackedKv& kv) {
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
      std::fill(row0 + (n + 1) / 2, row0 + kv.ldv, 0u);
      std::fill(row1 + n / 2, row1 + kv.ldv, 0u);
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
      amx::PackPairsOfColumns(c.v + r0 * c.sv + g * d, c.sv, static_cast<int>(rows), di,
                              kv.vt[0].data() + g * d * kv.ldv + r0 / 2, kv.ldv);
      // Parity 1: keys (r0 + 1, r0 + 2), ...; the chunk's last pair takes the
      // next chunk's first key (or pairs with zero at the end).
      const int64_t odd_rows = std::min(kChunk, n - r0 - 1);
      if (odd_rows > 0)
        amx::PackPairsOfColumns(c.v + (r0 + 1) * c.sv + g * d, c.sv, static_cast<int>(odd_rows), di,
                                kv.vt[1].data() + g * d * kv.ldv + r0 / 2, kv.ldv);
    }
}

// One query head's part of a backward item: its scaled Q and dO of the
// segment (fp32 product, then rounded once), packed straight from their rows
// as A rows [len + tail][kp] and, transposed, as rows of query pairs [d][ldt]
// (ldt an odd multiple of 16 pairs, so a tile's 16 rows do not share L1
// sets); the tails are zero. Its dQ accumulator with room for a whole last
// tile. Packed rows and zeroed dQ rows are made as the key loop first needs
// them, and dQ rows are written out as soon as no later key block can reach
// them (queries before the next block's first key): a sliding window's
// backward then works on the window's rows while they are in cache instead
// of streaming whole-segment passes through memory.
struct HeadRows {
  LineVector<uint32_t> qsa, dosa, qsb, dosb;
  LineVector<float> dqa;
  const float *q_rows = nullptr, *do_rows = nullptr, *lse = nullptr, *drow = nullptr;
  int64_t len = 0, rows = 0;
  int ldt = 0;
  int64_t packed = 0, zeroed = 0, written = 0;  // rows packed, dQ rows zeroed, dQ rows written out

  void Start(const Ctx<float>& c, const Item& it, int64_t h) {
    const int64_t d = c.d, sb = it.seg_begin, kp = d / 2;
    len = it.seg_end - sb;
    rows = (len + 1) / 2 * 2 + kBlockQ;
    ldt = RoundUp16(static_cast<int>(rows / 2)) | 16;
    q_rows = c.q + sb * c.sq + h * d;
    do_rows = c.d_o + sb * c.sdo + h * d;
    lse = c.lse + h * c.slse + sb;
    drow = c.drow + h * c.n + sb;
    dqa.resize(static_cast<size_t>(rows * d));
    // Only the tails are cleared here (the buffers are kept across items and
    // calls); the packers write everything before them.
    qsa.resize(static_cast<size_t>(rows * kp));
    dosa.resize(qsa.size());
    qsb.resize(static_cast<size_t>(d * ldt));
    dosb.resize(qsb.size());
    std::fill(qsa.begin() + len * kp, qsa.end(), 0u);
    std::fill(dosa.begin() + len * kp, dosa.end(), 0u);
    for (int64_t x = 0; x < d; ++x) {
      std::fill(qsb.begin() + x * ldt + (len + 1) / 2, qsb.begin() + (x + 1) * ldt, 0u);
      std::fill(dosb.begin() + x * ldt + (len + 1) / 2, dosb.begin() + (x + 1) * ldt, 0u);
    }
    packed = zeroed = written = 0;
  }
  // Rows [0, hi) of the packed Q, dO and of dQ ready.
  void Need(const Ctx<float>& c, int64_t hi) {
    const int64_t d = c.d, kp = d / 2;
    const int di = static_cast<int>(d);
    if (hi > packed && packed < len) {
      // In steps of at least 256 rows (even: pairs never straddle two steps;
      // a step's last 16-pair block may write zeros the next step overwrites).
      const int64_t to = std::min<int64_t>(len, std::max<int64_t>(hi, packed + 256));
      const int count = static_cast<int>(to - packed);
      amx::PackScaledRowsAndPairs(q_rows + packed * c.sq, c.sq, count, di, c.scale, qsa.data() + packed * kp,
                                  static_cast<int>(kp), nullptr, 0);
      amx::PackScaledRowsAndPairs(do_rows + packed * c.sdo, c.sdo, count, di, 1.f, dosa.data() + packed * kp,
                                  static_cast<int>(kp), nullptr, 0);
      amx::PackScaledPairsOfColumns(q_rows + packed * c.sq, c.sq, count, di, c.scale, qsb.data() + packed / 2, ldt);
      amx::PackScaledPairsOfColumns(do_rows + packed * c.sdo, c.sdo, count, di, 1.f, dosb.data() + packed / 2, ldt);
      packed = to;
    }
    if (hi > zeroed) {
      const int64_t to = std::min<int64_t>(rows, std::max<int64_t>(hi, zeroed + 256));
      std::fill(dqa.begin() + zeroed * d, dqa.begin() + to * d, 0.f);
      zeroed = to;
    }
  }
  // dQ rows [written, done) out (scaled), as WriteDq does.
  void WriteDqUpTo(const Ctx<float>& c, const Item& head_item, int64_t done) {
    WriteDq(c, head_item, dqa.data(), written, done);
    written = done;
  }
};

struct AmxScratch {
  LineVector<float> st, acc, acc2, s, dp;
  LineVector<uint32_t> qb, pa, pt, dst, pb, vt, ktb, vtb, kdb;
  std::vector<HeadRows> heads;  // the backward's, one per query head of the item's group
  std::vector<int> ra, rb;  // the backward's visible key ranges
  OnlineSoftmax<float> softmax;  // the forward's statistics
  explicit AmxScratch(int64_t d)
      : st(kMaxForwardKeys * kBlockQ), acc(kBwdKeys * d), acc2(kBwdKeys * d), s(kBlockQ * kBwdKeys),
        dp(kBlockQ * kBwdKeys), qb(d / 2 * kBlockQ), pa(kBlockQ * kBwdKeys / 2),
        pt(kBwdKeys * kBlockQ), dst(kBwdKeys * kBlockQ), pb(kMaxForwardKeys / 2 * kBlockQ), vt(d * kMaxForwardKeys / 2),
        ktb(d / 2 * kBwdKeys),
        vtb(d / 2 * kBwdKeys), kdb(kBwdKeys / 2 * d), ra(kBlockK), rb(kBlockK) {}
};

// The output accumulates transposed, Oᵀ += Vᵀ Pᵀ (acc[x * kBlockQ + i]): the
// transposed score tile's rows are keys, so the exp pass can write pairs of
// its rows — P's k-pairs as the B operand wants them — straight from
// registers (amx::ExpSumPairs), with no transposing conversion; the tile unit
// gives Oᵀ the bits of O = P V (the same k-steps in the same order).
void ForwardItem(const Ctx<float>& c, const Item& it, AmxScratch& w, const PackedKv& kv) {
  const int64_t d = c.d, h = it.head, g = h / c.group, i0 = it.begin;
  const int di = static_cast<int>(d), kp = di / 2;
  const int nq = static_cast<int>(it.end - i0), mq = RoundUp16(nq);
  const int64_t p0 = i0 + it.shift, k_end = math::EndVisibleKey(c.mask, it.end - 1 + it.shift);
  float* st = w.st.data();
  OnlineSoftmax<float>& sm = w.softmax;
  // Scaled Qᵀ as B, [kp][64] (columns past mq are not read).
  amx::PackRowPairsTransposed(c.q + i0 * c.sq + h * d, c.sq, nq, di, c.scale, w.qb.data(), kBlockQ);
  std::fill(w.acc.begin(), w.acc.begin() + d * kBlockQ, 0.f);
  sm.Start(nq);
  amx::LoadTileConfig();
  for (int64_t t0 = math::FirstVisibleKey(c.mask, it.seg_begin, p0); t0 < k_end; t0 += kBlockKAmxForward) {
    const int64_t t1 = std::min<int64_t>(t0 + kBlockKAmxForward, k_end);
    const int nk = static_cast<int>(t1 - t0);
    amx::Product(RoundUp16(nk), mq, kp, kv.KRows(g, t0), kp, w.qb.data(), kBlockQ, st, kBlockQ, false);  // Sᵀ
    // Fold's statistics, then its exp pass writing P as key pairs of the
    // queries (B, [kpp][kBlockQ], zero past nq and in pairs past nk), and the
    // rescale of Oᵀ's columns.
    const int kpp = RoundUp16((nk + 1) / 2);
    sm.FoldMax(c, t0, nk, p0, nq, st);
    amx::ExpSumPairs(st, nk, kBlockQ, nq, sm.ra.data(), sm.rb.data(), sm.msafe.data(), sm.l.data(), w.pb.data(),
                     kBlockQ);
    ZeroPairs(w.pb.data(), kBlockQ, (nk + 1) / 2, kpp);
    amx::ScaleColumns(w.acc.data(), di, kBlockQ, nq, sm.alpha.data());
    // Vᵀ pre-converted unless this tile's pairs reach past the segment.
    const uint32_t* vt = kv.VtPairs(g, t0);
    int ldv = kv.ldv;
    if (t0 + 2 * kpp > it.seg_end) {
      amx::PackPairsOfColumns(c.v + t0 * c.sv + g * d, c.sv, nk, di, w.vt.data(), kBlockKAmxForward / 2);
      vt = w.vt.data();
      ldv = kBlockKAmxForward / 2;
    }
    amx::Product(di, mq, kpp, vt, ldv, w.pb.data(), kBlockQ, w.acc.data(), kBlockQ, true);  // Oᵀ += Vᵀ Pᵀ
  }
  sm.Finish(c, it, w.acc.data(), /*acc_transposed=*/true);
}

// The products of one head's query tiles against a key block (whose Kᵀ, Vᵀ
// and K pairs are in w): S = Qs Kᵀ and dP = dO Vᵀ (row-major, queries by
// keys), then one fused pass (amx::BackwardPairs) gives P and dS as pairs of
// query rows and dS as rows of key pairs, and
//   dQ  += dS K,     A = dS rows,   B = K pairs;
//   dVᵀ += dOᵀ P,    A = dOᵀ rows of query pairs, B = P pairs;
//   dKᵀ += Qsᵀ dS,   A = Qsᵀ,       B = dS pairs.
// dK and dV accumulate transposed so that P and dS enter as B operands
// straight from the pass: no transposing conversion of Pᵀ and dSᵀ (the tile
// unit gives Cᵀ = Bᵀ Aᵀ the bits of C = A B, so the results are those of
// dV += Pᵀ dO, dK += dSᵀ Qs, as the generic driver computes them).
void KeyBlockOfHead(const Ctx<float>& c, int64_t sb, int64_t j0, int nk, int64_t qlo, int64_t qhi, HeadRows& hr,
                    AmxScratch& w, float* dkt, float* dvt) {
  const int di = static_cast<int>(c.d), kp = di / 2;
  const int mk = RoundUp16(nk), kpk = RoundUp16((nk + 1) / 2);
  int* ra = w.ra.data();
  int* rb = w.rb.data();
  float* s = w.s.data();
  float* dp = w.dp.data();
  bool pending = false;  // a full tile's P, dS pairs wait in pair rows 0-31 of pt, dst
  int64_t pending_u = 0;
  for (int64_t t0 = qlo; t0 < qhi; t0 += kBlockQ) {
    const int nq = static_cast<int>(std::min<int64_t>(t0 + kBlockQ, qhi) - t0), mq = RoundUp16(nq);
    const int kpq = RoundUp16((nq + 1) / 2);
    const int64_t u = t0 - sb;
    amx::Product(mq, mk, kp, hr.qsa.data() + u * kp, kp, w.ktb.data(), kBwdKeys, s, kBwdKeys, false);   // S
    amx::Product(mq, mk, kp, hr.dosa.data() + u * kp, kp, w.vtb.data(), kBwdKeys, dp, kBwdKeys, false);  // dP
    for (int r = 0; r < nq; ++r) {
      const Range rr = KeysSeenBy(c, sb, t0 + r, j0, nk);
      ra[r] = rr.a;
      rb[r] = rr.b;
    }
    // P and dS pairs of query rows (B, row stride kBwdKeys): a full tile at an
    // even offset waits in pair rows 0-31 for the next tile (rows 32-63), so
    // dVᵀ and dKᵀ take both in one product — k-steps in the same order, C
    // stored and reloaded half as often, the same bits. dS as A rows of key
    // pairs for dQ, zero in the rows past nq.
    const int off = pending ? kBlockQ / 2 : 0;
    if (nq != mq) std::fill(w.pa.begin(), w.pa.begin() + mq * kpk, 0u);
    amx::BackwardPairs(s, dp, nq, kBwdKeys, nk, 2 * kpk, ra, rb, hr.lse + u, hr.drow + u,
                       w.pt.data() + off * kBwdKeys, w.dst.data() + off * kBwdKeys, kBwdKeys, w.pa.data(), kpk);
    ZeroPairs(w.pt.data(), kBwdKeys, off + (nq + 1) / 2, off + kpq);
    ZeroPairs(w.dst.data(), kBwdKeys, off + (nq + 1) / 2, off + kpq);
    amx::Product(mq, di, kpk, w.pa.data(), kpk, w.kdb.data(), di, hr.dqa.data() + u * di, di, true);  // dQ += dS K
    if (!pending && nq == kBlockQ && u % 2 == 0 && t0 + kBlockQ < qhi) {
      pending = true;
      pending_u = u;
      continue;
    }
    // dOᵀ and Qsᵀ of the tile(s) as A: the head's pairs from query u0 on
    // (pairs past the segment's end are the zero tail). u0 is even: a key
    // block's first query is its first key (the backward has no diagonal
    // offset: AttentionParams::Validate), an even offset from the segment's
    // start, and tiles follow in steps of kBlockQ.
    const int64_t u0 = pending ? pending_u : u;
    CHECK(u0 % 2 == 0) << "AMX attention backward: query tile at odd offset " << u0;
    const int kpt = off + kpq;
    // dVᵀ += dOᵀ P, dKᵀ += Qsᵀ dS
    amx::Product(di, mk, kpt, hr.dosb.data() + u0 / 2, hr.ldt, w.pt.data(), kBwdKeys, dvt, kBwdKeys, true);
    amx::Product(di, mk, kpt, hr.qsb.data() + u0 / 2, hr.ldt, w.dst.data(), kBwdKeys, dkt, kBwdKeys, true);
    pending = false;
  }
}

// A backward item is a segment and it.heads query heads from it.head on, of
// one kv group: the whole group (when there are enough such items for the
// threads) or one head. Kᵀ, Vᵀ and K of each key block are converted once
// for the item's heads; each head accumulates its own dKᵀ, dVᵀ (as the
// generic driver's per-head partials). A whole group's are added in head
// order — the generic driver's reduction of its partials, the same fp32
// additions in the same order: the same bits — and written straight to dK,
// dV, so no partials exist; a one-head item of a group > 1 writes its
// partial, which attention.cc reduces as for the generic driver.
void BackwardItem(const Ctx<float>& c, const Item& it, AmxScratch& w) {
  const int64_t d = c.d, h0 = it.head, nh = it.heads, g = h0 / c.group;
  const int64_t sb = it.seg_begin, se = it.seg_end, len = se - sb;
  const int di = static_cast<int>(d);
  if (static_cast<int64_t>(w.heads.size()) < nh) w.heads.resize(static_cast<size_t>(nh));
  w.acc.resize(static_cast<size_t>(nh * d * kBwdKeys));
  w.acc2.resize(w.acc.size());
  for (int64_t hh = 0; hh < nh; ++hh) w.heads[hh].Start(c, it, h0 + hh);
  const int64_t rows = w.heads[0].rows;
  auto head_item = [&](int64_t hh) {
    Item one = it;
    one.head = h0 + hh;
    one.heads = 1;
    return one;
  };
  // Where dK, dV go: the outputs (the whole group, or group 1), else this
  // head's partial [n][d].
  const bool whole = nh == c.group;
  float* dk_out = whole ? c.dk + g * d : c.dk_part + h0 * c.n * d;
  float* dv_out = whole ? c.dv + g * d : c.dv_part + h0 * c.n * d;
  const int64_t sdk = whole ? c.sdk : d, sdv = whole ? c.sdv : d;
  float* dkt = w.acc.data();   // dKᵀ of head h0 + hh at dkt + hh * d * kBwdKeys, [d][kBwdKeys]
  float* dvt = w.acc2.data();  // dVᵀ
  amx::LoadTileConfig();
  for (int64_t j0 = sb; j0 < se; j0 += kBwdKeys) {
    const int64_t j1 = std::min<int64_t>(j0 + kBwdKeys, se);
    const int nk = static_cast<int>(j1 - j0), kpk = RoundUp16((nk + 1) / 2);
    const float* kb = c.k + j0 * c.sk + g * d;
    // Kᵀ and Vᵀ as B, [kp][kBwdKeys] (columns past mk are not read).
    amx::PackRowPairsTransposed(kb, c.sk, nk, di, 1.f, w.ktb.data(), kBwdKeys);
    amx::PackRowPairsTransposed(c.v + j0 * c.sv + g * d, c.sv, nk, di, 1.f, w.vtb.data(), kBwdKeys);
    amx::PackPairsOfRows(kb, c.sk, nk, di, w.kdb.data(), di);                         // K as B: key pairs
    ZeroPairs(w.kdb.data(), di, (nk + 1) / 2, kpk);
    std::fill(w.acc.begin(), w.acc.end(), 0.f);
    std::fill(w.acc2.begin(), w.acc2.end(), 0.f);
    const int64_t qlo = std::max(sb, math::FirstQuerySeeing(c.mask, j0));
    const int64_t qhi = math::EndQuerySeeing(c.mask, se, j1 - 1);
    for (int64_t hh = 0; hh < nh; ++hh) {
      // Every row this block's tiles read or write: whole 16-row groups of
      // the last tile, and the pairs a pair of tiles reaches.
      w.heads[hh].Need(c, std::min<int64_t>(rows, RoundUp16(static_cast<int>(qhi - sb)) + kBlockQ));
      KeyBlockOfHead(c, sb, j0, nk, qlo, qhi, w.heads[hh], w, dkt + hh * d * kBwdKeys, dvt + hh * d * kBwdKeys);
    }
    // The group's dKᵀ, dVᵀ: head 0's, plus head 1's, ... (in place in head 0's).
    for (int64_t hh = 1; hh < nh; ++hh) {
      const float* pk = dkt + hh * d * kBwdKeys;
      const float* pv = dvt + hh * d * kBwdKeys;
      for (int64_t e = 0; e < d * kBwdKeys; ++e) {
        dkt[e] += pk[e];
        dvt[e] += pv[e];
      }
    }
    amx::StoreTransposed(dkt, kBwdKeys, di, nk, dk_out + j0 * sdk, sdk);
    amx::StoreTransposed(dvt, kBwdKeys, di, nk, dv_out + j0 * sdv, sdv);
    // Queries before the next block's first key see no later key.
    const int64_t done = std::min<int64_t>(len, j1 - sb);
    for (int64_t hh = 0; hh < nh; ++hh) w.heads[hh].WriteDqUpTo(c, head_item(hh), done);
  }
  for (int64_t hh = 0; hh < nh; ++hh) w.heads[hh].WriteDqUpTo(c, head_item(hh), len);
}

std::atomic<int64_t> amx_calls{0};

Ctx<float> CtxOf(const AmxAttentionArgs& a) {
  amx_calls.fetch_add(1, std::memory_order_relaxed);
  Ctx<float> c{a.view};
  c.tiles = a.tiles;
  c.drow = a.drow;
  return c;
}

}  // namespace

bool AmxAttentionUsable(const AttentionView<float>& view) {
  return view.d % 32 == 0 && view.d <= 256 && view.cu_k == view.cu && amx::Usable();
}

int64_t AmxAttentionCalls() { return amx_calls.load(std::memory_order_relaxed); }

bool AmxBackwardWritesPartials(const AttentionView<float>& view) {
  return view.group > 1 && view.segments * view.kv_heads < omp_get_max_threads();
}

void AmxAttentionForward(const AmxAttentionArgs& args) {
  CHECK(AmxAttentionUsable(args.view)) << "AmxAttentionForward: not usable here";
  const Ctx<float> c = CtxOf(args);
  static thread_local PackedKv kept;  // the calling thread's, grown across calls
  PackKv(c, kept);
  const PackedKv& kv = kept;
  RunItems<AmxScratch>(c, MakeForwardItems(c.cu, c.cu_k, c.segments, kBlockQ, c.heads),
                       [&kv](const Ctx<float>& cc, const Item& it, AmxScratch& w) { ForwardItem(cc, it, w, kv); });
}

void AmxAttentionBackwardItems(const AmxAttentionArgs& args) {
  CHECK(AmxAttentionUsable(args.view)) << "AmxAttentionBackwardItems: not usable here";
  Ctx<float> c = CtxOf(args);
  c.dk_part = args.dk_part;
  c.dv_part = args.dv_part;
  std::vector<Item> items;
  if (AmxBackwardWritesPartials(args.view)) {
    CHECK(c.dk_part != nullptr && c.dv_part != nullptr) << "AmxAttentionBackwardItems: partials needed";
    items = MakeBackwardItems(c.cu, c.segments, c.heads);  // one head each
  } else {
    items = MakeBackwardItems(c.cu, c.segments, c.kv_heads);  // a whole kv group each
    for (Item& it : items) {
      it.head *= c.group;
      it.heads = c.group;
    }
  }
  RunItems<AmxScratch>(c, items, BackwardItem);
}

}  // namespace longctx::cpu

#else  // not x86-64: no AMX

namespace longctx::cpu {
bool AmxAttentionUsable(const AttentionView<float>&) { return false; }
int64_t AmxAttentionCalls() { return 0; }
bool AmxBackwardWritesPartials(const AttentionView<float>&) { return false; }
void AmxAttentionForward(const AmxAttentionArgs&) { LOG(FATAL) << "AmxAttentionForward: no AMX on this host"; }
void AmxAttentionBackwardItems(const AmxAttentionArgs&) {
  LOG(FATAL) << "AmxAttentionBackwardItems: no AMX on this host";
}
}  // namespace longctx::cpu

#endif
