// Why: see bpe_merges.h. Two strategies with identical results: a quadratic
// scan over cached pair ranks for short words (almost every Llama-3 pretoken;
// no allocation beyond one small vector), and a heap over a linked list for
// long inputs (SentencePiece encodes a whole document as one word).
#include "data/bpe_merges.h"

#include <algorithm>
#include <limits>

namespace longctx {
namespace {

constexpr int32_t kNoRank = std::numeric_limits<int32_t>::max();
constexpr size_t kSmallWord = 48;

}  // namespace

void BpeMerges::Add(int32_t left, int32_t right, int32_t result) {
  table_[Key(left, right)] = Merge{next_rank_++, result};
}

void BpeMerges::Apply(std::vector<int32_t>* symbols) const {
  if (symbols->size() < 2) return;
  if (symbols->size() <= kSmallWord) {
    ApplySmall(symbols);
  } else {
    ApplyLarge(symbols);
  }
}

void BpeMerges::ApplySmall(std::vector<int32_t>* symbols) const {
  std::vector<int32_t>& s = *symbols;
  // rank[i], result[i]: the merge of (s[i], s[i+1]), kNoRank when none.
  int32_t rank[kSmallWord];
  int32_t result[kSmallWord];
  size_t n = s.size();
  auto look = [&](size_t i) {
    const Merge* m = Find(s[i], s[i + 1]);
    rank[i] = m ? m->rank : kNoRank;
    result[i] = m ? m->result : -1;
  };
  for (size_t i = 0; i + 1 < n; ++i) look(i);
  while (n > 1) {
    size_t best = 0;
    for (size_t i = 1; i + 1 < n; ++i) {
      if (rank[i] < rank[best]) best = i;  // strict: the leftmost of equal ranks
    }
    if (rank[best] == kNoRank) break;
    s[best] = result[best];
    for (size_t i = best + 1; i + 1 < n; ++i) {
      s[i] = s[i + 1];
      rank[i] = rank[i + 1];
      result[i] = result[i + 1];
    }
    --n;
    if (best > 0) look(best - 1);
    if (best + 1 < n) look(best);
  }
  s.resize(n);
}

void BpeMerges::ApplyLarge(std::vector<int32_t>* symbols) const {
  std::vector<int32_t>& s = *symbols;
  const int32_t n = static_cast<int32_t>(s.size());
  // Doubly linked list over the original positions; a merged symbol keeps the
  // position of its left part, so positions order the live symbols.
  std::vector<int32_t> prev(n), next(n);
  for (int32_t i = 0; i < n; ++i) {
    prev[i] = i - 1;
    next[i] = i + 1 < n ? i + 1 : -1;
  }
  struct Entry {
    int32_t rank;
    int32_t pos;    // position of the left symbol
    int32_t left;   // ids when queued, to recognise stale entries
    int32_t right;
  };
  // Min-heap on (rank, pos).
  auto later = [](const Entry& a, const Entry& b) { return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos; };
  std::vector<Entry> heap;
  heap.reserve(n);
  auto push = [&](int32_t pos) {
    const int32_t nx = next[pos];
    if (nx < 0) return;
    const Merge* m = Find(s[pos], s[nx]);
    if (m == nullptr) return;
    heap.push_back(Entry{m->rank, pos, s[pos], s[nx]});
    std::push_heap(heap.begin(), heap.end(), later);
  };
  for (int32_t i = 0; i + 1 < n; ++i) push(i);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    const Entry e = heap.back();
    heap.pop_back();
    // Stale unless both symbols are still there with the same ids: a symbol's
    // id only changes by growing (merging), never back.
    if (s[e.pos] != e.left) continue;
    const int32_t nx = next[e.pos];
    if (nx < 0 || s[nx] != e.right) continue;
    s[e.pos] = Find(e.left, e.right)->result;
    s[nx] = -1;  // dead
    next[e.pos] = next[nx];
    if (next[nx] >= 0) prev[next[nx]] = e.pos;
    if (prev[e.pos] >= 0) push(prev[e.pos]);
    push(e.pos);
  }
  size_t w = 0;
  for (int32_t i = 0; i >= 0 && i < n; i = next[i]) s[w++] = s[i];
  s.resize(w);
}

}  // namespace longctx
