// Why: see sharded_adamw.h. The per-piece AdamW calls are the same backend
// kernel AdamW::Step uses, with the same arguments per element, so a shard
// update equals the full update restricted to the shard.
#include "optim/sharded_adamw.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "base/log.h"

namespace longctx {

ShardedAdamW::ShardedAdamW(const ParamLayout* layout, Backend* backend, DType dtype, const AdamWSettings& s,
                           int rank, int world)
    : layout_(layout), backend_(backend), dtype_(dtype), settings_(s) {
  for (int b = 0; b < layout->num_buffers(); ++b) {
    const ElementRange r = ShardOf(layout->buffer_size(b), rank, world);
    ranges_.push_back(r);
    const size_t bytes = static_cast<size_t>(r.size()) * DTypeSize(dtype);
    m_.emplace_back(backend, bytes);
    v_.emplace_back(backend, bytes);
    if (r.size() > 0) {
      backend->Fill(m_shard(b), 0.0);
      backend->Fill(v_shard(b), 0.0);
    }
  }
}

Tensor ShardedAdamW::m_shard(int b) const {
  return Tensor(m_[b].data(), dtype_, {ranges_[b].size()}, backend_->device());
}
Tensor ShardedAdamW::v_shard(int b) const {
  return Tensor(v_[b].data(), dtype_, {ranges_[b].size()}, backend_->device());
}

int64_t ShardedAdamW::state_bytes() const {
  int64_t n = 0;
  for (int b = 0; b < num_buffers(); ++b) n += static_cast<int64_t>(m_[b].bytes() + v_[b].bytes());
  return n;
}

absl::StatusOr<StepStats> ShardedAdamW::Step(const std::vector<Tensor>& param_shards,
                                             const std::vector<Tensor>& grad_shards, double lr,
                                             const ReduceDoublesFn& reduce) {
  const int nb = num_buffers();
  CHECK(static_cast<int>(param_shards.size()) == nb && static_cast<int>(grad_shards.size()) == nb)
      << "ShardedAdamW::Step: " << param_shards.size() << " parameter and " << grad_shards.size()
      << " gradient shards for " << nb << " buffers";
  StepStats st;
  // Same summation order as ParamStore::SumSquares on one rank: buffer by buffer.
  double sumsq = 0;
  for (int b = 0; b < nb; ++b)
    if (ranges_[b].size() > 0) sumsq += backend_->SumSquares(grad_shards[b]);
  if (reduce) {
    absl::Status rs = reduce(&sumsq, 1);
    if (!rs.ok()) return absl::Status(rs.code(), absl::StrCat("ShardedAdamW: gradient norm: ", rs.message()));
  }
  st.grad_norm = std::sqrt(sumsq);
  if (settings_.grad_clip > 0 && st.grad_norm > settings_.grad_clip)
    st.clip_scale = settings_.grad_clip / (st.grad_norm + 1e-6);
  ++step_;
  const size_t es = DTypeSize(dtype_);
  auto piece = [&](const Tensor& t, int64_t off, int64_t n) {
    return Tensor(static_cast<char*>(t.data) + off * es, t.dtype, {n}, t.device);
  };
  for (const ParamSlice& s : layout_->slices()) {
    const ElementRange r = ranges_[s.buffer];
    const int64_t lo = std::max(r.begin, s.offset), hi = std::min(r.end, s.offset + s.numel());
    if (hi <= lo) continue;
    const int b = s.buffer;
    CHECK(param_shards[b].numel() == r.size() && grad_shards[b].numel() == r.size())
        << "ShardedAdamW::Step: buffer " << b << " shard views have " << param_shards[b].numel() << " and "
        << grad_shards[b].numel() << " elements, the range has " << r.size();
    const int64_t off = lo - r.begin, n = hi - lo;
    AdamWParams p;
    p.param = piece(param_shards[b], off, n);
    p.grad = piece(grad_shards[b], off, n);
    p.m = piece(m_shard(b), off, n);
    p.v = piece(v_shard(b), off, n);
    p.lr = lr;
    p.beta1 = settings_.beta1;
    p.beta2 = settings_.beta2;
    p.eps = settings_.eps;
    p.weight_decay = (s.is_matrix || settings_.decay_norms) ? settings_.weight_decay : 0.0;
    p.grad_scale = st.clip_scale;
    p.step = step_;
    backend_->AdamW(p);
  }
  return st;
}

}  // namespace longctx
