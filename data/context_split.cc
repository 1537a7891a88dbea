// Why: see context_split.h.
#include "data/context_split.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/log.h"

namespace longctx {

int32_t ContextAssignment::OwnerOf(int32_t chunk) const {
  for (int32_t r = 0; r < static_cast<int32_t>(chunks_of_rank.size()); ++r)
    for (int32_t c : chunks_of_rank[r])
      if (c == chunk) return r;
  CHECK(false) << "chunk " << chunk << " has no owner among " << num_chunks << " chunks";
  return -1;
}

int32_t ContextShard::GlobalPosition(int32_t local) const {
  CHECK(local >= 0 && local < num_tokens()) << "local token " << local << " of " << num_tokens();
  for (const ContextPiece& p : pieces)
    if (local < p.local_begin + p.length) return p.global_begin + (local - p.local_begin);
  return -1;  // unreachable: the pieces cover the shard
}

absl::StatusOr<ContextAssignment> ZigZagAssignment(int32_t seq_len, int32_t cp) {
  if (cp < 1) return absl::InvalidArgumentError(absl::StrCat("context parallelism: cp = ", cp, " must be >= 1"));
  if (seq_len <= 0 || seq_len % (2 * cp) != 0)
    return absl::InvalidArgumentError(absl::StrCat(
        "context parallelism: seq_len ", seq_len, " is not divisible by 2 x cp = ", 2 * cp,
        " (each row is cut into 2C equal chunks, rank r holding chunks r and 2C-1-r); use a seq_len that is a "
        "multiple of ",
        2 * cp));
  ContextAssignment a;
  a.cp = cp;
  a.num_chunks = 2 * cp;
  a.chunks_of_rank.resize(cp);
  for (int32_t r = 0; r < cp; ++r) a.chunks_of_rank[r] = {r, 2 * cp - 1 - r};
  return a;
}

absl::Status ValidateContextAssignment(const ContextAssignment& a, int32_t seq_len) {
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(
        absl::StrCat("context parallelism: assignment of ", a.num_chunks, " chunks to cp = ", a.cp, " ranks: ", why));
  };
  if (a.cp < 1) return bad("cp must be >= 1");
  if (a.num_chunks < a.cp || a.num_chunks % a.cp != 0) return bad("num_chunks must be a positive multiple of cp");
  if (seq_len <= 0 || seq_len % a.num_chunks != 0)
    return bad(absl::StrCat("seq_len ", seq_len, " is not divisible by ", a.num_chunks, " (the chunks must be equal)"));
  if (static_cast<int32_t>(a.chunks_of_rank.size()) != a.cp)
    return bad(absl::StrCat("chunks_of_rank has ", a.chunks_of_rank.size(), " ranks"));
  std::vector<int> seen(a.num_chunks, 0);
  for (int32_t r = 0; r < a.cp; ++r) {
    const std::vector<int32_t>& cs = a.chunks_of_rank[r];
    if (static_cast<int32_t>(cs.size()) != a.chunks_per_rank())
      return bad(absl::StrCat("rank ", r, " holds ", cs.size(), " chunks, not ", a.chunks_per_rank()));
    for (size_t i = 0; i < cs.size(); ++i) {
      if (cs[i] < 0 || cs[i] >= a.num_chunks) return bad(absl::StrCat("rank ", r, ": chunk ", cs[i], " out of range"));
      if (i > 0 && cs[i] <= cs[i - 1]) return bad(absl::StrCat("rank ", r, ": chunks not ascending"));
      if (seen[cs[i]]++ > 0) return bad(absl::StrCat("chunk ", cs[i], " held twice"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<ContextShard> SplitRowForContext(const PackedBatch& batch, int32_t row,
                                                const ContextAssignment& assignment, int32_t rank) {
  const int32_t T = batch.seq_len;
  if (absl::Status st = ValidateContextAssignment(assignment, T); !st.ok()) return st;
  if (row < 0 || row >= batch.batch_size)
    return absl::InvalidArgumentError(absl::StrCat("context split: row ", row, " of a batch of ", batch.batch_size));
  if (rank < 0 || rank >= assignment.cp)
    return absl::InvalidArgumentError(absl::StrCat("context split: rank ", rank, " of cp = ", assignment.cp));
  const size_t n = static_cast<size_t>(batch.batch_size) * T;
  if (batch.inputs.size() != n || batch.targets.size() != n || batch.positions.size() != n ||
      batch.cu_seqlens.size() < 2 || batch.cu_seqlens.front() != 0 || batch.cu_seqlens.back() != static_cast<int32_t>(n))
    return absl::InvalidArgumentError(
        absl::StrCat("context split: batch arrays do not match its shape ", batch.batch_size, " x ", T));
  const std::vector<std::pair<int32_t, int32_t>> segs = SegmentsOfRow(batch, row);  // (start in row, length)
  const int64_t row_base = int64_t{row} * T;

  ContextShard s;
  s.cp = assignment.cp;
  s.rank = rank;
  s.seq_len = T;
  s.chunk_len = T / assignment.num_chunks;
  s.cu_seqlens.push_back(0);
  const std::vector<int32_t>& mine = assignment.chunks_of_rank[rank];
  size_t seg = 0;  // first row segment that may overlap the current piece (pieces ascend)
  for (size_t i = 0; i < mine.size();) {
    size_t j = i + 1;
    while (j < mine.size() && mine[j] == mine[j - 1] + 1) ++j;
    ContextPiece p;
    p.first_chunk = mine[i];
    p.num_chunks = static_cast<int32_t>(j - i);
    p.global_begin = mine[i] * s.chunk_len;
    p.length = p.num_chunks * s.chunk_len;
    p.local_begin = s.num_tokens();
    p.first_segment = static_cast<int32_t>(s.cu_seqlens.size()) - 1;
    const int32_t gb = p.global_begin, ge = p.global_end();
    const auto from = [&](const std::vector<int32_t>& v) { return v.begin() + row_base + gb; };
    s.inputs.insert(s.inputs.end(), from(batch.inputs), from(batch.inputs) + p.length);
    s.targets.insert(s.targets.end(), from(batch.targets), from(batch.targets) + p.length);
    s.positions.insert(s.positions.end(), from(batch.positions), from(batch.positions) + p.length);
    while (seg < segs.size() && segs[seg].first + segs[seg].second <= gb) ++seg;
    for (size_t k = seg; k < segs.size() && segs[k].first < ge; ++k) {
      const int32_t db = segs[k].first, de = segs[k].first + segs[k].second;
      const int32_t b = std::max(db, gb), e = std::min(de, ge);
      s.cu_seqlens.push_back(s.cu_seqlens.back() + (e - b));
      s.segment_doc_begin.push_back(db);
      s.segment_doc_end.push_back(de);
      s.max_seqlen = std::max(s.max_seqlen, e - b);
      if (b == gb) p.continues_from_previous = db < gb, p.first_doc_begin = db;
      if (e == ge) p.continues_into_next = de > ge, p.last_doc_begin = db;
    }
    p.num_segments = static_cast<int32_t>(s.cu_seqlens.size()) - 1 - p.first_segment;
    s.pieces.push_back(p);
    i = j;
  }
  for (int32_t t : s.targets) s.num_target_tokens += t >= 0;
  return s;
}

std::vector<std::pair<int32_t, int32_t>> ContextKeysToReceive(const ContextShard& shard, int32_t window) {
  // Wanted: before each local segment, its document's keys within reach.
  std::vector<std::pair<int32_t, int32_t>> want;
  for (size_t s = 0; s + 1 < shard.cu_seqlens.size(); ++s) {
    if (shard.cu_seqlens[s] == shard.cu_seqlens[s + 1]) continue;
    const int32_t first = shard.GlobalPosition(shard.cu_seqlens[s]);
    const int32_t begin = window > 0 ? std::max(shard.segment_doc_begin[s], first - (window - 1))
                                     : shard.segment_doc_begin[s];
    if (begin < first) want.push_back({begin, first});
  }
  std::sort(want.begin(), want.end());
  std::vector<std::pair<int32_t, int32_t>> merged;
  for (const auto& iv : want) {
    if (!merged.empty() && iv.first <= merged.back().second)
      merged.back().second = std::max(merged.back().second, iv.second);
    else
      merged.push_back(iv);
  }
  // Less the rank's own pieces (ascending, disjoint).
  std::vector<std::pair<int32_t, int32_t>> out;
  for (auto [a, b] : merged) {
    for (const ContextPiece& p : shard.pieces) {
      if (p.global_end() <= a || p.global_begin >= b) continue;
      if (p.global_begin > a) out.push_back({a, p.global_begin});
      a = std::max(a, p.global_end());
      if (a >= b) break;
    }
    if (a < b) out.push_back({a, b});
  }
  return out;
}

int64_t ContextKeysToReceiveCount(const ContextShard& shard, int32_t window) {
  int64_t n = 0;
  for (const auto& [a, b] : ContextKeysToReceive(shard, window)) n += b - a;
  return n;
}

absl::StatusOr<std::vector<ContextShard>> SplitRowForAllRanks(const PackedBatch& batch, int32_t row,
                                                              const ContextAssignment& assignment) {
  std::vector<ContextShard> out;
  for (int32_t r = 0; r < assignment.cp; ++r) {
    absl::StatusOr<ContextShard> s = SplitRowForContext(batch, row, assignment, r);
    if (!s.ok()) return s.status();
    out.push_back(std::move(*s));
  }
  return out;
}

}  // namespace longctx
