// Why: the tiled attention has two drivers — the generic one over a table of
// tile kernels (attention.cc: fp32, F64 and bf16 products on fp32 operands)
// and the packed bf16 one (attention_packed_bf16.cc, on AMX or vdpbf16ps:
// bf16 operands converted once per block instead of once per product). Both
// walk the same work items with the same masks and the same online-softmax
// bookkeeping; this header holds what they share, so a mask rule is written
// once.
//
// Everything here is in an anonymous namespace: each driver file gets its own
// copy with internal linkage, so no inline function is shared by name across
// translation units that may be compiled for different instruction sets.
#ifndef LONGCTX_KERNELS_CPU_ATTENTION_DRIVER_H_
#define LONGCTX_KERNELS_CPU_ATTENTION_DRIVER_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "kernels/attention_args.h"
#include "kernels/cpu/attention_tiles.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/line_vector.h"
#include "kernels/math/attention_visibility.h"
#include "kernels/math/online_softmax.h"

namespace longctx::cpu {
namespace {  // NOLINT(build/namespaces): see the comment at the top

// Scratch is LineVector (kernels/cpu/line_vector.h): rows start on cache lines.

constexpr int kBlockQ = 64;  // queries per tile
constexpr int kBlockK = 64;  // keys per tile (also the row stride of score tiles)
// Keys per forward tile with the bf16 tables (both drivers, so their results
// stay equal): P V then runs four k-steps per load and store of its output
// tiles instead of two (a faster AMX bf16 forward), and on the AMX unit
// eight (kBlockKAmxForward: the tile unit stores a tile in about the time of
// one tile product, so the output tiles' loads and stores weigh, and 256 keys
// beat 128 at 2K-32K tokens; vdpbf16ps shows no gain from 256 and keeps 128:
// docs/history/benchmarks-2026.md, "Attention at GEMM speed").
// The other tables keep kBlockK (their products gain nothing, and their
// results stay what they were).
constexpr int kBlockKBf16Forward = 128;
constexpr int kBlockKAmxForward = 256;
constexpr int kMaxForwardKeys = kBlockKAmxForward;

// Everything a work item needs: the shared unpacked form of the params
// (kernels/attention_args.h: raw pointers, strides in elements, the mask), the
// tile kernels and, in the backward, D and the GQA partials.
template <class T>
struct Ctx : AttentionView<T> {
  const AttentionTileKernels<T>* tiles = nullptr;
  const T* drow = nullptr;  // D[h * n + i] = rowsum(dO * O)
  T *dk_part = nullptr, *dv_part = nullptr;  // [heads][n][d] when group > 1
  // Backward key parts (SegmentKeyParts): key_parts is the most parts of any
  // segment, segment_parts[s] segment s's. With key_parts > 1 every item's
  // raw dQ accumulator goes to dQ itself (part 0) or to dq_part
  // [key_parts - 1][heads][n][d] (parts 1...), and CombineDqParts sums them.
  int key_parts = 1;
  const int* segment_parts = nullptr;
  T* dq_part = nullptr;
  int PartsOf(int64_t segment) const { return segment_parts != nullptr ? segment_parts[segment] : key_parts; }
};

// A block of rows [begin, end) inside the segment [seg_begin, seg_end), plus
// the heads it is computed for, [head, head + heads). Forward items: rows are
// queries, the segment bounds are those of the keys, and query row i sits at
// key index i + shift (0 unless the keys have their own segments).
// Backward items: the segment bounds are its keys', [q_begin, q_end) its
// query rows, query row i at key index i + shift (training: the same rows,
// shift 0; context parallelism: AttentionParams::query_offset).
struct Item {
  int64_t seg_begin, seg_end, begin, end;
  int64_t head;
  int64_t shift = 0;
  int64_t heads = 1;
  int part = 0;  // backward: which key part [begin, end) of its segment (SegmentKeyParts)
  int64_t q_begin = 0, q_end = 0;  // backward: the segment's query rows
};

// Query heads per forward item at most: the query heads of one kv head that
// share the item's K, V tiles (ForwardItem), each with its own Qᵀ, output
// accumulator and softmax statistics in the thread's scratch.
constexpr int kMaxForwardHeads = 4;

// Forward items: query blocks of each segment, with the key segment's bounds
// and the bottom-right shift (the last query of a segment is its last key),
// each for up to kMaxForwardHeads query heads of one kv head: a K, V tile
// read from memory serves them all (at full causal L = 32,768 the keys one
// item streams, 16 MiB per kv head, outgrow the cache, and one query head per
// item runs markedly slower per FLOP than at L = 8,192:
// docs/history/benchmarks-2026.md, "Attention at GEMM speed"). Ordered kv head by kv head, then the blocks: the two threads
// share one kv head's keys, and the keys in cache are one kv head's, not all
// of them — at 16,384 tokens the K, V of all kv heads of ref-b (32 MiB)
// outgrow a 32 MiB L3, one kv head's do not.
// offset_aligned: every segment's shift is query_offset (context
// parallelism, AttentionParams) instead of bottom-right.
inline std::vector<Item> MakeForwardItems(const int32_t* cu, const int32_t* cu_k, int64_t segments, int block,
                                          int64_t heads, int64_t group, bool offset_aligned = false,
                                          int64_t query_offset = 0) {
  std::vector<Item> items;
  for (int64_t s = 0; s < segments; ++s)
    for (int64_t g = 0; g < heads / group; ++g)
      for (int64_t b = cu[s]; b < cu[s + 1]; b += block)
        for (int64_t h = g * group; h < (g + 1) * group; h += kMaxForwardHeads)
          items.push_back({cu_k[s], cu_k[s + 1], b, std::min<int64_t>(b + block, cu[s + 1]), h,
                           offset_aligned ? query_offset : math::QueryKeyShift(cu[s + 1], cu_k[s + 1]),
                           std::min<int64_t>(kMaxForwardHeads, (g + 1) * group - h)});
  return items;
}

// Backward items: (segment, query head), longest segments first so the
// dynamic schedule balances (the order does not change any result); with
// heads_per_item = the GQA group (the packed driver's keys_direct), one item
// per (segment, kv head) holding its query heads.
// With cu_k (context parallelism), an item's keys are segment s of cu_k and
// its queries segment s of cu, query row i at key index i + shift.
inline std::vector<Item> MakeBackwardItems(const int32_t* cu, int64_t segments, int64_t heads,
                                           int64_t heads_per_item = 1, const int32_t* cu_k = nullptr,
                                           int64_t shift = 0) {
  std::vector<Item> items;
  const int32_t* keys = cu_k != nullptr ? cu_k : cu;
  for (int64_t s = 0; s < segments; ++s)
    for (int64_t h = 0; h < heads; h += heads_per_item)
      items.push_back({keys[s], keys[s + 1], keys[s], keys[s + 1], h, cu_k != nullptr ? shift : 0, heads_per_item, 0,
                       cu[s], cu[s + 1]});
  std::stable_sort(items.begin(), items.end(),
                   [](const Item& a, const Item& b) { return a.seg_end - a.seg_begin > b.seg_end - b.seg_begin; });
  return items;
}

// Backward key parts. Backward items are (segment, query head): an item
// with more than a thread's share of the work keeps one thread busy while
// the others run out of items and idle — with fewer items than threads (ref-b:
// 8 heads, one 16,384-token segment, 16 threads: half of them idle;
// docs/history/benchmarks-2026.md, "Attention at GEMM speed"), or with one long document
// among short ones (its 8 items hold most of the causal work). Such an
// item's keys are cut into up to kMaxKeyParts parts of about equal work (the
// queries that see each kKeyPartAlign-key block), each part its own item:
// its dK, dV rows are its own, and the dQ rows several parts reach are
// summed after them, in part order (CombineDqParts). The result then depends
// on the number of parts (so on the thread count, as a GEMM library's does),
// never on the schedule; one part is the unsplit backward, bit for bit.
// Memory: (most parts - 1) x the size of dQ.
constexpr int kMaxKeyParts = kMaxAttentionKeyParts;
constexpr int kKeyPartAlign = 128;  // a multiple of both drivers' backward key blocks

// The backward's work in key block [j0, j1) of segment [sb, se): queries
// that see its keys, summed over the keys (as counted for the parts).
template <class T>
double KeyBlockWork(const Ctx<T>& c, int64_t sb, int64_t se, int64_t j0, int64_t j1) {
  const int64_t queries = math::EndQuerySeeing(c.mask, se, j1 - 1) - std::max(sb, math::FirstQuerySeeing(c.mask, j0));
  return static_cast<double>(std::max<int64_t>(queries, 0)) * static_cast<double>(j1 - j0);
}
template <class T>
double SegmentWork(const Ctx<T>& c, int64_t sb, int64_t se) {
  double w = 0;
  for (int64_t j0 = sb; j0 < se; j0 += kKeyPartAlign) w += KeyBlockWork(c, sb, se, j0, std::min(j0 + kKeyPartAlign, se));
  return w;
}

// Parts per segment for `threads` threads: `forced` > 0 gives every segment
// that many (tests); else a segment's items (one per query head, c.heads of
// them) get ceil(its share of the total work x threads) parts, at most
// kMaxKeyParts: one where its items fit a thread's share, and for a single
// segment ceil(threads / heads).
template <class T>
std::vector<int> SegmentKeyParts(const Ctx<T>& c, int threads, int forced) {
  std::vector<int> parts(static_cast<size_t>(c.segments), forced > 0 ? forced : 1);
  if (forced > 0 || c.segments * c.heads <= 0) return parts;
  std::vector<double> work(static_cast<size_t>(c.segments));
  double total = 0;
  for (int64_t s = 0; s < c.segments; ++s) {
    work[s] = SegmentWork(c, c.cu[s], c.cu[s + 1]);
    total += work[s] * static_cast<double>(c.heads);
  }
  if (total <= 0) return parts;
  for (int64_t s = 0; s < c.segments; ++s) {
    // Rounded down a little first, so that an exact multiple (one segment,
    // threads / heads) is not pushed up by the division's rounding.
    const double want = std::ceil(work[s] * threads / total * (1 - 1e-12));
    parts[s] = static_cast<int>(std::clamp(want, 1.0, static_cast<double>(kMaxKeyParts)));
  }
  return parts;
}

// The keys of segment [sb, se) cut into `parts` parts: bounds[0] = sb <=
// bounds[1] <= ... <= bounds[parts] = se, inner bounds kKeyPartAlign keys
// apart from sb (a part may be empty in a short segment), each part about
// 1/parts of the work, counted as the queries that see each block.
template <class T>
std::vector<int64_t> KeyPartBounds(const Ctx<T>& c, int64_t sb, int64_t se, int parts) {
  std::vector<int64_t> bounds(static_cast<size_t>(parts) + 1, se);
  bounds[0] = sb;
  if (parts == 1) return bounds;
  std::vector<double> cumulative;
  double total = 0;
  for (int64_t j0 = sb; j0 < se; j0 += kKeyPartAlign) {
    total += KeyBlockWork(c, sb, se, j0, std::min<int64_t>(j0 + kKeyPartAlign, se));
    cumulative.push_back(total);
  }
  int p = 1;
  for (size_t x = 0; x < cumulative.size() && p < parts; ++x)
    while (p < parts && cumulative[x] >= total * p / parts) {
      bounds[p] = std::min<int64_t>(se, sb + static_cast<int64_t>(x + 1) * kKeyPartAlign);
      ++p;
    }
  return bounds;
}

// The query rows [lo, hi) of segment [sb, se) that a key part [k0, k1) can
// reach (empty for an empty part): the rows its dQ accumulator holds.
struct RowRange {
  int64_t lo, hi;
};
template <class T>
RowRange KeyPartRows(const Ctx<T>& c, int64_t sb, int64_t se, int64_t k0, int64_t k1) {
  if (k0 >= k1) return {k0, k0};
  const int64_t lo = std::max(sb, math::FirstQuerySeeing(c.mask, k0));
  const int64_t hi = std::min(se, math::EndQuerySeeing(c.mask, se, k1 - 1));  // the last key's reach ends last
  return {lo, std::max(lo, hi)};
}

// Backward items with c.PartsOf(segment) parts per (segment, head group): as
// MakeBackwardItems (longest segments first), each item's [begin, end) its
// part's keys (the whole segment with one part).
template <class T>
std::vector<Item> MakeBackwardPartItems(const Ctx<T>& c, int64_t heads_per_item) {
  if (c.offset_aligned)  // (never with key parts: Backward keeps one)
    return MakeBackwardItems(c.cu, c.segments, c.heads, heads_per_item, c.cu_k, c.query_offset);
  if (c.key_parts == 1) return MakeBackwardItems(c.cu, c.segments, c.heads, heads_per_item);
  std::vector<Item> items;
  for (int64_t s = 0; s < c.segments; ++s) {
    const int64_t sb = c.cu[s], se = c.cu[s + 1];
    const int np = c.PartsOf(s);
    const std::vector<int64_t> bounds = KeyPartBounds(c, sb, se, np);
    for (int64_t h = 0; h < c.heads; h += heads_per_item)
      for (int p = 0; p < np; ++p)
        if (bounds[p] < bounds[p + 1])
          items.push_back({sb, se, bounds[p], bounds[p + 1], h, 0, heads_per_item, p, sb, se});
  }
  std::stable_sort(items.begin(), items.end(),
                   [](const Item& a, const Item& b) { return a.seg_end - a.seg_begin > b.seg_end - b.seg_begin; });
  return items;
}

// A backward key block [j0, j0 + nk) and the queries [qlo, qhi) that can see
// a key of it.
struct KeyBlock {
  int64_t j0;
  int nk;
  int64_t qlo, qhi;
};

// The backward's next group of key blocks of the segment [sb, se), from key
// g0 to at most key_end (the item's key part; -1: se): up to max_blocks
// blocks of block_keys keys whose query tiles lie on one grid (a block's
// tiles start at its first query, as one block at a time would take them;
// with the backward's masks that is its first key), and only the first when
// it is seen by fewer than min_queries queries. Writes the blocks to out and
// returns how many; the group's query tiles start at out[0].qlo.
template <class T>
int NextKeyGroup(const Ctx<T>& c, int64_t sb, int64_t se, int64_t g0, int block_keys, int max_blocks,
                 int64_t min_queries, KeyBlock* out, int64_t key_end = -1) {
  if (key_end < 0) key_end = se;
  int nb = 0;
  for (int64_t j0 = g0; j0 < key_end && nb < max_blocks; j0 += block_keys) {
    const int64_t j1 = std::min<int64_t>(j0 + block_keys, key_end);
    const int64_t qlo = std::max(sb, math::FirstQuerySeeing(c.mask, j0));
    const int64_t qhi = math::EndQuerySeeing(c.mask, se, j1 - 1);
    if (nb > 0 && (qlo < out[0].qlo || (qlo - out[0].qlo) % kBlockQ != 0)) break;
    out[nb++] = {j0, static_cast<int>(j1 - j0), qlo, qhi};
    if (qhi - qlo < min_queries && nb == 1) break;
  }
  return nb;
}

// rows x d (row stride ld) -> dst[c * width + r] = scale * src[r * ld + c],
// zero-padded to `width` columns (rows <= width): the tables' own
// load_transposed where they have one (the same bits), else this loop.
template <class T>
void LoadTransposed(const AttentionTileKernels<T>& tiles, const T* src, int64_t ld, int rows, int64_t d, T scale,
                    int width, T* dst) {
  if (tiles.load_transposed != nullptr) {
    tiles.load_transposed(src, ld, rows, d, scale, width, dst);
    return;
  }
  for (int r = 0; r < rows; ++r) {
    const T* in = src + r * ld;
    for (int64_t c = 0; c < d; ++c) dst[c * width + r] = scale * in[c];
  }
  for (int64_t c = 0; c < d; ++c)
    for (int r = rows; r < width; ++r) dst[c * width + r] = T(0);
}

// The unit a table's bf16 products run on, if any (the tables are told apart
// by name: attention_tiles.h).
enum class Bf16Unit { kNone, kAmx, kDot };
template <class T>
Bf16Unit Bf16UnitOf(const AttentionTileKernels<T>& tiles) {
  const std::string_view name = tiles.name;
  return name == "amx-bf16" ? Bf16Unit::kAmx : name == "avx512-bf16" ? Bf16Unit::kDot : Bf16Unit::kNone;
}

// Keys per forward tile for c's tables: the bf16 tables take the packed
// driver's blocks, so that the generic driver's online softmax on them is the
// packed one's (the same bits; tests compare the two).
template <class T>
int ForwardKeys(const Ctx<T>& c) {
  switch (Bf16UnitOf(*c.tiles)) {
    case Bf16Unit::kAmx: return kBlockKAmxForward;
    case Bf16Unit::kDot: return kBlockKBf16Forward;
    case Bf16Unit::kNone: break;
  }
  return kBlockK;
}

// Visible range [a, b) of one line of a score tile: either the queries
// (i0 + [0, nq), i0 their key index) that see key j, or the keys (t0 + [0, nk))
// that query i sees.
struct Range {
  int a, b;
};
template <class T>
Range QueriesSeeing(const Ctx<T>& c, int64_t j, int64_t i0, int nq) {
  const int64_t a = std::max<int64_t>(0, math::FirstQuerySeeing(c.mask, j) - i0);
  const int64_t b = std::min<int64_t>(nq, math::EndQuerySeeing(c.mask, i0 + nq, j) - i0);
  return {static_cast<int>(std::min<int64_t>(a, nq)), static_cast<int>(std::max(std::min<int64_t>(a, nq), b))};
}
template <class T>
Range KeysSeenBy(const Ctx<T>& c, int64_t seg_begin, int64_t i, int64_t t0, int nk) {
  const int64_t a = std::min<int64_t>(nk, std::max<int64_t>(0, math::FirstVisibleKey(c.mask, seg_begin, i) - t0));
  const int64_t b = std::min<int64_t>(nk, math::EndVisibleKey(c.mask, i) - t0);
  return {static_cast<int>(a), static_cast<int>(std::max(a, b))};
}

// The forward's online softmax over one item's queries (nq <= kBlockQ),
// folding one transposed score tile at a time (st[j * kBlockQ + i]: key j,
// query i), and the item's outputs at the end. Both drivers use it, so their
// statistics are the same operations in the same order.
template <class T>
struct OnlineSoftmax {
  LineVector<T> m, l, mn, alpha, msafe;
  std::vector<int> ra, rb;
  OnlineSoftmax()
      : m(kBlockQ), l(kBlockQ), mn(kBlockQ), alpha(kBlockQ), msafe(kBlockQ), ra(kMaxForwardKeys),
        rb(kMaxForwardKeys) {}
  void Start(int nq) {
    std::fill(m.begin(), m.begin() + nq, math::NegInf<T>());
    std::fill(l.begin(), l.begin() + nq, T(0));
  }
  // Keys t0 + [0, nk) against queries whose first sits at key index p0:
  // visible ranges (ra, rb), running max, alpha (the rescale of what was
  // accumulated), msafe, and l rescaled: Fold up to its exp pass.
  void FoldMax(const Ctx<T>& c, int64_t t0, int nk, int64_t p0, int nq, const T* st) {
    for (int j = 0; j < nk; ++j) {
      const Range r = QueriesSeeing(c, t0 + j, p0, nq);
      ra[j] = r.a;
      rb[j] = r.b;
    }
    std::copy(m.begin(), m.begin() + nq, mn.begin());
    c.tiles->tile_max(st, nk, kBlockQ, ra.data(), rb.data(), mn.data());
    for (int i = 0; i < nq; ++i) {
      alpha[i] = math::SoftmaxRescale(m[i], mn[i]);
      msafe[i] = math::SoftmaxSafeMax(mn[i]);
      l[i] *= alpha[i];
      m[i] = mn[i];
    }
  }
  // FoldMax, then st = P (0 where masked), l += P's sums, and the nq x d
  // accumulator rows rescaled by alpha.
  void Fold(const Ctx<T>& c, int64_t t0, int nk, int64_t p0, int nq, T* st, T* acc) {
    const int64_t d = c.d;
    FoldMax(c, t0, nk, p0, nq, st);
    c.tiles->tile_exp_sum(st, nk, kBlockQ, nq, ra.data(), rb.data(), msafe.data(), l.data());
    for (int i = 0; i < nq; ++i)
      if (alpha[i] != T(1)) {
        T* arow = acc + i * d;
        for (int64_t x = 0; x < d; ++x) arow[x] *= alpha[i];
      }
  }
  // 1 / l of the item's queries (0 where nothing was seen), into inv.
  void InvSums(int nq, T* inv) const {
    for (int i = 0; i < nq; ++i) inv[i] = math::SoftmaxInvSum(l[i]);
  }
  // lse of the item's queries for head h.
  void WriteLse(const Ctx<T>& c, const Item& it, int64_t h) const {
    T* lse = c.lse + h * c.slse + it.begin;
    for (int64_t i = 0; i < it.end - it.begin; ++i) lse[i] = math::SoftmaxLse(m[i], l[i]);
  }
  // O = acc / l (acc: nq rows of d) and lse of the item's queries for head
  // h. The packed driver, whose acc is transposed, writes O with
  // amx::StoreTransposed and InvSums instead: the same product per element.
  void Finish(const Ctx<T>& c, const Item& it, int64_t h, const T* acc) const {
    const int64_t d = c.d, i0 = it.begin;
    for (int64_t i = 0; i < it.end - i0; ++i) {
      const T inv = math::SoftmaxInvSum(l[i]);
      T* orow = c.o + (i0 + i) * c.so + h * d;
      const T* arow = acc + i * d;
      for (int64_t x = 0; x < d; ++x) orow[x] = arow[x] * inv;
    }
    WriteLse(c, it, h);
  }
};

// Where a backward item's dK, dV rows go: the outputs, or this query head's
// partial ([nk][d], row stride d) when the kv heads are shared (GQA).
template <class T>
struct KeyBlockDestination {
  T *dk, *dv;
  int64_t sdk, sdv;  // row strides
  KeyBlockDestination(const Ctx<T>& c, const Item& it) {
    const int64_t d = c.d, h = it.head, g = h / c.group;
    dk = c.group == 1 ? c.dk + g * d : c.dk_part + h * c.nk * d;
    dv = c.group == 1 ? c.dv + g * d : c.dv_part + h * c.nk * d;
    sdk = c.group == 1 ? c.sdk : d;
    sdv = c.group == 1 ? c.sdv : d;
  }
};

// Backward, after a key block [j0, j0 + nk): its dK, dV rows (dense, row
// stride d) to their destination.
template <class T>
void WriteKeyBlock(const Ctx<T>& c, const Item& it, int64_t j0, int nk, const T* dka, const T* dva) {
  const int64_t d = c.d;
  const KeyBlockDestination<T> out(c, it);
  for (int r = 0; r < nk; ++r) {
    std::copy(dka + r * d, dka + (r + 1) * d, out.dk + (j0 + r) * out.sdk);
    std::copy(dva + r * d, dva + (r + 1) * d, out.dv + (j0 + r) * out.sdv);
  }
}

// Backward item, end: dQ = scale * the accumulator (dense [len][d]), for the
// segment's query rows [from, to) from it.q_begin (all of them by default). With key parts, the raw
// accumulator to the part's buffer instead (CombineDqParts scales the sum).
// dqa holds the segment's rows from first_row on (a ring's lap: the packed
// bf16 backward keeps only a window's rows, attention_packed_bf16.cc).
template <class T>
void WriteDq(const Ctx<T>& c, const Item& it, const T* dqa, int64_t from = 0, int64_t to = -1,
             int64_t first_row = 0) {
  const int64_t d = c.d, h = it.head, sb = it.q_begin;
  if (to < 0) to = it.q_end - sb;
  if (c.key_parts > 1) {
    T* dst = it.part == 0 ? c.dq + h * d : c.dq_part + ((it.part - 1) * c.heads + h) * c.n * d;
    const int64_t ld = it.part == 0 ? c.sdq : d;
    for (int64_t i = sb + from; i < sb + to; ++i) std::copy_n(dqa + (i - sb - first_row) * d, d, dst + i * ld);
    return;
  }
  for (int64_t i = sb + from; i < sb + to; ++i) {
    T* dqrow = c.dq + i * c.sdq + h * d;
    const T* acc = dqa + (i - sb - first_row) * d;
    for (int64_t x = 0; x < d; ++x) dqrow[x] = c.scale * acc[x];
  }
}

// After the backward items with key parts: dQ = scale * (the raw dQ of part
// 0, in dQ, + part 1 + ...), in part order, over the rows each part reached
// (KeyPartRows; a row no part reached is 0).
template <class T>
void CombineDqParts(const Ctx<T>& c) {
  if (c.key_parts == 1) return;
  const int parts = c.key_parts;  // rows[s * parts + p]; a segment's parts past its own are empty
  const int64_t d = c.d, heads = c.heads, n = c.n;
  std::vector<RowRange> rows(static_cast<size_t>(c.segments * parts), RowRange{0, 0});
  std::vector<int64_t> segment_of(static_cast<size_t>(n), -1);
  for (int64_t s = 0; s < c.segments; ++s) {
    const int64_t sb = c.cu[s], se = c.cu[s + 1];
    const int np = c.PartsOf(s);
    const std::vector<int64_t> bounds = KeyPartBounds(c, sb, se, np);
    for (int p = 0; p < np; ++p) rows[s * parts + p] = KeyPartRows(c, sb, se, bounds[p], bounds[p + 1]);
    std::fill(segment_of.begin() + sb, segment_of.begin() + se, s);
  }
#pragma omp parallel
  {
    std::vector<T> sum(static_cast<size_t>(d));
#pragma omp for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      const int64_t s = segment_of[i];
      if (s < 0) continue;
      for (int64_t h = 0; h < heads; ++h) {
        T* dqrow = c.dq + i * c.sdq + h * d;
        std::fill(sum.begin(), sum.end(), T(0));
        for (int p = 0; p < parts; ++p) {
          const RowRange r = rows[s * parts + p];
          if (i < r.lo || i >= r.hi) continue;
          const T* src = p == 0 ? dqrow : c.dq_part + (((p - 1) * heads + h) * n + i) * d;
          for (int64_t x = 0; x < d; ++x) sum[x] += src[x];
        }
        for (int64_t x = 0; x < d; ++x) dqrow[x] = c.scale * sum[x];
      }
    }
  }
}

// Runs fn(c, item, scratch) for every item on the OpenMP team, dynamic
// schedule. Each thread's Scratch (made from the head dim) is kept across
// calls: the backward's per-segment buffers are megabytes at long L, and
// allocating them per call cost page faults that two threads then serialize
// on (a few percent of a single-thread sliding-window bf16 layer at
// L = 16,384, more with two threads). They stay allocated at the largest
// segment seen, per thread (docs/history/benchmarks-2026.md, "Attention at GEMM speed").
template <class Scratch, class C, class Fn>
void RunItems(const C& c, const std::vector<Item>& items, Fn fn) {
  const int64_t count = static_cast<int64_t>(items.size());
#pragma omp parallel if (count > 1)
  {
    static thread_local std::unique_ptr<Scratch> kept;
    static thread_local int64_t kept_d = -1;
    if (!kept || kept_d != c.d) {
      kept = std::make_unique<Scratch>(c.d);
      kept_d = c.d;
    }
    Scratch& w = *kept;
#pragma omp for schedule(dynamic, 1)
    for (int64_t x = 0; x < count; ++x) fn(c, items[x], w);
  }
}

}  // namespace
}  // namespace longctx::cpu

#endif  // LONGCTX_KERNELS_CPU_ATTENTION_DRIVER_H_
