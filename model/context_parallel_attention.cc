// Why: see context_parallel_attention.h.
#include "model/context_parallel_attention.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/context_attention.h"

namespace longctx {
namespace {

absl::Status Bad(const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("context-parallel attention: ", what));
}

// A dense [rows, heads, d] scratch tensor of dtype in backend memory.
struct Scratch3 {
  DeviceBuffer buf;
  Tensor t;
  Scratch3(Backend* be, DType dtype, int64_t rows, int64_t heads, int64_t d)
      : buf(be, static_cast<size_t>(rows * heads * d) * DTypeSize(dtype)),
        t(buf.data(), dtype, {rows, heads, d}, be->device()) {}
};
struct Scratch2 {
  DeviceBuffer buf;
  Tensor t;
  Scratch2(Backend* be, DType dtype, int64_t rows, int64_t cols)
      : buf(be, static_cast<size_t>(rows * cols) * DTypeSize(dtype)), t(buf.data(), dtype, {rows, cols}, be->device()) {}
};

}  // namespace

int64_t ContextLayout::num_chunks() const {
  int64_t n = 0;
  for (const auto& c : chunks_of_rank) n += static_cast<int64_t>(c.size());
  return n;
}

int ContextLayout::OwnerOf(int64_t chunk) const {
  for (int r = 0; r < ranks(); ++r)
    if (std::binary_search(chunks_of_rank[r].begin(), chunks_of_rank[r].end(), static_cast<int32_t>(chunk))) return r;
  return -1;
}

int64_t ContextLayout::LocalRow(int rank, int64_t global) const {
  const int64_t chunk = global / chunk_len;
  const auto& cs = chunks_of_rank[rank];
  const auto it = std::lower_bound(cs.begin(), cs.end(), static_cast<int32_t>(chunk));
  if (it == cs.end() || *it != chunk) return -1;
  return (it - cs.begin()) * chunk_len + global % chunk_len;
}

absl::Status ContextLayout::Validate() const {
  if (chunk_len <= 0) return Bad(absl::StrCat("chunk_len must be > 0, is ", chunk_len));
  if (chunks_of_rank.empty()) return Bad("no ranks");
  const int64_t n = num_chunks();
  std::vector<int> seen(static_cast<size_t>(n), 0);
  for (int r = 0; r < ranks(); ++r)
    for (size_t x = 0; x < chunks_of_rank[r].size(); ++x) {
      const int32_t c = chunks_of_rank[r][x];
      if (c < 0 || c >= n) return Bad(absl::StrCat("rank ", r, " holds chunk ", c, " of ", n));
      if (x > 0 && c <= chunks_of_rank[r][x - 1]) return Bad(absl::StrCat("rank ", r, "'s chunks are not ascending"));
      if (seen[c]++) return Bad(absl::StrCat("chunk ", c, " is held twice"));
    }
  return absl::OkStatus();
}

namespace {
// The blocks own chunk c's queries attend to, skipped ones left out (the
// loop of Run and of PlanContextFetches: one definition of the order).
absl::StatusOr<std::vector<ContextBlockPlan>> PlanChunkBlocks(absl::Span<const int32_t> cu, int64_t c, int64_t L,
                                                              int window, ContextAttentionStats* st) {
  std::vector<ContextBlockPlan> plans;
  const int64_t q0 = c * L;
  for (int64_t kc = 0; kc <= c; ++kc) {
    absl::StatusOr<ContextBlockPlan> p = PlanContextBlock(cu, q0, q0 + L, kc * L, (kc + 1) * L, window);
    if (!p.ok()) return p.status();
    if (st != nullptr) ++st->blocks;
    if (p->skipped()) {
      if (st != nullptr) ++st->skipped;
      continue;
    }
    plans.push_back(*std::move(p));
  }
  return plans;
}
}  // namespace

absl::StatusOr<std::vector<ContextFetch>> PlanContextFetches(const ContextLayout& layout,
                                                             absl::Span<const int32_t> row_cu_seqlens, int window,
                                                             int rank) {
  if (absl::Status s = layout.Validate(); !s.ok()) return s;
  if (rank < 0 || rank >= layout.ranks()) return Bad(absl::StrCat("rank ", rank, " outside the group"));
  const int64_t L = layout.chunk_len;
  if (row_cu_seqlens.empty() || row_cu_seqlens.back() != L * layout.num_chunks())
    return Bad(absl::StrCat("row_cu_seqlens must end at the row's ", L * layout.num_chunks(), " tokens"));
  std::vector<ContextFetch> out;
  for (const int32_t c : layout.chunks_of_rank[rank]) {
    absl::StatusOr<std::vector<ContextBlockPlan>> plans = PlanChunkBlocks(row_cu_seqlens, c, L, window, nullptr);
    if (!plans.ok()) return plans.status();
    for (const ContextBlockPlan& p : *plans) {
      const int owner = layout.OwnerOf(p.k_begin / L);
      if (owner != rank) out.push_back({owner, p.k_begin, p.k_end});
    }
  }
  return out;
}

InProcessKvExchange::InProcessKvExchange(Backend* backend, const ContextLayout* layout)
    : backend_(backend), layout_(layout), held_(layout->ranks()), received_(layout->ranks(), 0),
      returned_(layout->ranks(), 0) {}

void InProcessKvExchange::Register(int rank, const Tensor& k, const Tensor& v, const Tensor& dk, const Tensor& dv) {
  held_[rank] = {k, v, dk, dv};
}

void InProcessKvExchange::ResetCounts() {
  std::fill(received_.begin(), received_.end(), 0);
  std::fill(returned_.begin(), returned_.end(), 0);
}

absl::Status InProcessKvExchange::Rows(int owner, int64_t begin, int64_t end, int64_t* local) const {
  if (owner < 0 || owner >= layout_->ranks() || !held_[owner].k.defined())
    return Bad(absl::StrCat("rank ", owner, " has registered no K, V"));
  *local = layout_->LocalRow(owner, begin);
  if (*local < 0 || end <= begin || layout_->LocalRow(owner, end - 1) != *local + (end - begin - 1))
    return Bad(absl::StrCat("rows [", begin, ", ", end, ") are not one run of rank ", owner, "'s tokens"));
  return absl::OkStatus();
}

absl::Status InProcessKvExchange::Fetch(int rank, int owner, int64_t begin, int64_t end, const Tensor& k,
                                        const Tensor& v) {
  int64_t local = 0;
  if (absl::Status s = Rows(owner, begin, end, &local); !s.ok()) return s;
  const Held& h = held_[owner];
  backend_->Copy(k, h.k.Rows(local, local + (end - begin)));
  backend_->Copy(v, h.v.Rows(local, local + (end - begin)));
  received_[rank] += static_cast<int64_t>(k.nbytes() + v.nbytes());
  return absl::OkStatus();
}

absl::Status InProcessKvExchange::ReturnGrad(int rank, int owner, int64_t begin, int64_t end, const Tensor& dk,
                                             const Tensor& dv) {
  int64_t local = 0;
  if (absl::Status s = Rows(owner, begin, end, &local); !s.ok()) return s;
  const Held& h = held_[owner];
  if (!h.dk.defined()) return Bad(absl::StrCat("rank ", owner, " has registered no dK, dV"));
  backend_->Axpy(h.dk.Rows(local, local + (end - begin)), 1.0, dk);
  backend_->Axpy(h.dv.Rows(local, local + (end - begin)), 1.0, dv);
  returned_[rank] += static_cast<int64_t>(dk.nbytes() + dv.nbytes());
  return absl::OkStatus();
}

absl::Status ContextParallelAttention::Forward(const ContextAttentionArgs& a, KvExchange& exchange,
                                               ContextAttentionStats* stats) {
  return Run(a, false, {}, {}, {}, {}, exchange, stats);
}

absl::Status ContextParallelAttention::Backward(const ContextAttentionArgs& a, const Tensor& d_o, const Tensor& dq,
                                                const Tensor& dk, const Tensor& dv, KvExchange& exchange,
                                                ContextAttentionStats* stats) {
  return Run(a, true, d_o, dq, dk, dv, exchange, stats);
}

absl::Status ContextParallelAttention::Run(const ContextAttentionArgs& a, bool backward, const Tensor& d_o,
                                           const Tensor& dq, const Tensor& dk, const Tensor& dv, KvExchange& exchange,
                                           ContextAttentionStats* stats) {
  if (a.layout == nullptr) return Bad("no layout");
  if (absl::Status s = a.layout->Validate(); !s.ok()) return s;
  if (a.rank < 0 || a.rank >= a.layout->ranks()) return Bad(absl::StrCat("rank ", a.rank, " outside the group"));
  const int64_t L = a.layout->chunk_len, local = a.layout->local_tokens(a.rank);
  if (a.row_cu_seqlens.empty() || a.row_cu_seqlens.back() != L * a.layout->num_chunks())
    return Bad(absl::StrCat("row_cu_seqlens must end at the row's ", L * a.layout->num_chunks(), " tokens"));
  if (a.q.ndim != 3 || a.k.ndim != 3 || a.q.shape[0] != local || a.k.shape[0] != local || a.v.shape[0] != local ||
      a.o.shape[0] != local)
    return Bad(absl::StrCat("rank ", a.rank, " holds ", local, " tokens: q ", a.q.DebugString(), " k ",
                            a.k.DebugString(), " o ", a.o.DebugString()));
  const int64_t h = a.q.shape[1], hkv = a.k.shape[1], d = a.q.shape[2];
  ContextAttentionStats st;
  if (backward) backend_->Fill(dq, 0.0);
  const std::vector<int32_t>& chunks = a.layout->chunks_of_rank[a.rank];
  for (size_t x = 0; x < chunks.size(); ++x) {
    const int64_t c = chunks[x], r0 = static_cast<int64_t>(x) * L;
    const Tensor qc = a.q.Rows(r0, r0 + L), oc = a.o.Rows(r0, r0 + L), lc = a.lse.Cols(r0, r0 + L);
    absl::StatusOr<std::vector<ContextBlockPlan>> planned = PlanChunkBlocks(a.row_cu_seqlens, c, L, a.window, &st);
    if (!planned.ok()) return planned.status();
    const std::vector<ContextBlockPlan>& plans = *planned;
    // Per block: its keys (own rows, or fetched), then the forward's (o, lse)
    // or the backward's gradients.
    std::vector<Scratch3> outs;
    std::vector<Scratch2> lses;
    outs.reserve(plans.size());
    lses.reserve(plans.size());
    for (const ContextBlockPlan& p : plans) {
      const int owner = a.layout->OwnerOf(p.k_begin / L);
      const int64_t n = p.num_keys();
      Scratch3 kb(backend_, dtype_, owner == a.rank ? 0 : n, hkv, d), vb(backend_, dtype_, owner == a.rank ? 0 : n, hkv, d);
      Tensor k, v;
      if (owner == a.rank) {
        const int64_t lr = a.layout->LocalRow(a.rank, p.k_begin);
        k = a.k.Rows(lr, lr + n);
        v = a.v.Rows(lr, lr + n);
      } else {
        if (absl::Status s = exchange.Fetch(a.rank, owner, p.k_begin, p.k_end, kb.t, vb.t); !s.ok()) return s;
        k = kb.t;
        v = vb.t;
        ++st.remote_blocks;
        st.keys_fetched += n;
      }
      if (!backward) {
        outs.emplace_back(backend_, dtype_, L, h, d);
        lses.emplace_back(backend_, dtype_, h, L);
        if (absl::Status s = ContextBlockForward(*backend_, p, qc, k, v, outs.back().t, lses.back().t, a.scale); !s.ok())
          return s;
        continue;
      }
      Scratch3 dqb(backend_, dtype_, L, h, d), dkb(backend_, dtype_, n, hkv, d), dvb(backend_, dtype_, n, hkv, d);
      if (absl::Status s = ContextBlockBackward(*backend_, p, qc, k, v, oc, lc, d_o.Rows(r0, r0 + L), dqb.t, dkb.t,
                                                dvb.t, a.scale);
          !s.ok())
        return s;
      backend_->Axpy(dq.Rows(r0, r0 + L), 1.0, dqb.t);
      if (owner == a.rank) {
        const int64_t lr = a.layout->LocalRow(a.rank, p.k_begin);
        backend_->Axpy(dk.Rows(lr, lr + n), 1.0, dkb.t);
        backend_->Axpy(dv.Rows(lr, lr + n), 1.0, dvb.t);
      } else if (absl::Status s = exchange.ReturnGrad(a.rank, owner, p.k_begin, p.k_end, dkb.t, dvb.t); !s.ok()) {
        return s;
      }
    }
    if (backward) continue;
    std::vector<Tensor> os, ls;
    for (size_t b = 0; b < outs.size(); ++b) {
      os.push_back(outs[b].t);
      ls.push_back(lses[b].t);
    }
    if (absl::Status s = MergeAttentionParts(*backend_, os, ls, oc, lc); !s.ok()) return s;
  }
  if (stats != nullptr) *stats = st;
  return absl::OkStatus();
}

}  // namespace longctx
