// Why: see context_parallel.h.
#include "train/parallel/context_parallel.h"

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "data/context_balance.h"

namespace longctx {

absl::StatusOr<std::unique_ptr<ContextParallel>> ContextParallel::Create(Communicator* world, Backend* backend,
                                                                         DType dtype, int cp, Split split,
                                                                         std::vector<int32_t> windows) {
  const int n = world->world_size();
  if (cp < 1 || n % cp != 0)
    return absl::InvalidArgumentError(absl::StrCat("context_parallel: ", cp, " must be >= 1 and divide the ",
                                                   n, " ranks (world = data-parallel x context-parallel ranks)"));
  // Groups of consecutive ranks: the C ranks of a row share a node first.
  absl::StatusOr<std::unique_ptr<Communicator>> group = world->Split(world->rank() / cp, world->rank() % cp);
  if (!group.ok()) return group.status();
  if ((*group)->world_size() != cp)
    return absl::InternalError(absl::StrCat(world->Where(), ": context-parallel group of ", (*group)->world_size(),
                                            " ranks, expected ", cp));
  return std::unique_ptr<ContextParallel>(
      new ContextParallel(backend, dtype, cp, split, std::move(windows), std::move(*group), world->rank() / cp, n / cp));
}

ContextParallel::ContextParallel(Backend* backend, DType dtype, int cp, Split split, std::vector<int32_t> windows,
                                 std::unique_ptr<Communicator> group, int data_rank, int data_world)
    : backend_(backend),
      cp_(cp),
      split_(split),
      windows_(std::move(windows)),
      data_rank_(data_rank),
      data_world_(data_world),
      group_(std::move(group)),
      exchange_(backend, group_.get()),
      attention_(backend, dtype) {}

absl::StatusOr<PackedBatch> ContextParallel::Shard(const PackedBatch& micro) {
  const int32_t local = micro.seq_len / cp_;
  PackedBatch out;
  out.batch_size = micro.batch_size;
  out.seq_len = local;
  out.cu_seqlens.push_back(0);
  row_cu_.assign(micro.batch_size, {});
  layouts_.assign(micro.batch_size, {});
  for (int32_t b = 0; b < micro.batch_size; ++b) {
    absl::StatusOr<ContextAssignment> assignment =
        split_ == Split::kZigZag ? ZigZagAssignment(micro.seq_len, cp_)
                                 : BalancedAssignment(micro, b, cp_, /*chunks_per_rank=*/8, windows_);
    if (!assignment.ok()) return assignment.status();
    layouts_[b].chunk_len = micro.seq_len / assignment->num_chunks;
    layouts_[b].chunks_of_rank = assignment->chunks_of_rank;
    absl::StatusOr<ContextShard> shard = SplitRowForContext(micro, b, *assignment, group_->rank());
    if (!shard.ok()) return shard.status();
    out.inputs.insert(out.inputs.end(), shard->inputs.begin(), shard->inputs.end());
    out.targets.insert(out.targets.end(), shard->targets.begin(), shard->targets.end());
    out.positions.insert(out.positions.end(), shard->positions.begin(), shard->positions.end());
    for (size_t s = 1; s < shard->cu_seqlens.size(); ++s) out.cu_seqlens.push_back(b * local + shard->cu_seqlens[s]);
    out.max_seqlen = std::max(out.max_seqlen, shard->max_seqlen);
    out.num_target_tokens += shard->num_target_tokens;
    // The row's own document boundaries (0..T), which every rank of the group knows.
    const int64_t begin = int64_t{b} * micro.seq_len, end = begin + micro.seq_len;
    for (int32_t c : micro.cu_seqlens)
      if (c >= begin && c <= end) row_cu_[b].push_back(static_cast<int32_t>(c - begin));
  }
  return out;
}

void ContextParallel::Count(int window) {
  ContextTraffic& t = traffic_[window > 0 ? 1 : 0];
  t.kv_sent += exchange_.kv_bytes_sent();
  t.kv_received += exchange_.kv_bytes_received();
  t.grad_sent += exchange_.grad_bytes_sent();
  t.grad_received += exchange_.grad_bytes_received();
  exchange_.ResetCounts();
}

std::vector<ContextTraffic> ContextParallel::TakeTraffic() {
  std::vector<ContextTraffic> t = traffic_;
  traffic_.assign(2, {});
  return t;
}

namespace {
// Row b's rows [b * n, (b + 1) * n) of a [rows * n, ...] tensor.
Tensor RowOf(const Tensor& x, int64_t b, int64_t n) { return x.Rows(b * n, (b + 1) * n); }
}  // namespace

ContextAttentionArgs ContextParallel::RowArgs(size_t b, int window, const Tensor& q, const Tensor& k,
                                              const Tensor& v, const Tensor& o, const Tensor& lse) const {
  const ContextLayout& layout = layouts_[b];
  const int64_t n = layout.local_tokens(group_->rank());
  ContextAttentionArgs a;
  a.rank = group_->rank();
  a.layout = &layout;
  a.row_cu_seqlens = row_cu_[b];
  a.window = window;
  a.q = RowOf(q, b, n);
  a.k = RowOf(k, b, n);
  a.v = RowOf(v, b, n);
  a.o = RowOf(o, b, n);
  a.lse = lse.Cols(b * n, (b + 1) * n);
  return a;
}

void ContextParallel::Forward(int layer, int window, const Tensor& q, const Tensor& k, const Tensor& v,
                              const Tensor& o, const Tensor& lse) {
  for (size_t b = 0; b < row_cu_.size(); ++b) {
    const ContextAttentionArgs a = RowArgs(b, window, q, k, v, o, lse);
    absl::Status st = exchange_.Exchange(*a.layout, a.row_cu_seqlens, window, a.k, a.v, /*for_backward=*/false);
    if (st.ok()) st = attention_.Forward(a, exchange_);
    if (!st.ok()) AbortJob(absl::Status(st.code(), absl::StrCat("layer ", layer, " forward: ", st.message())));
  }
  Count(window);
}

void ContextParallel::Backward(int layer, int window, const Tensor& q, const Tensor& k, const Tensor& v,
                               const Tensor& o, const Tensor& lse, const Tensor& d_o, const Tensor& dq,
                               const Tensor& dk, const Tensor& dv) {
  backend_->Fill(dk, 0.0);
  backend_->Fill(dv, 0.0);
  for (size_t b = 0; b < row_cu_.size(); ++b) {
    const ContextAttentionArgs a = RowArgs(b, window, q, k, v, o, lse);
    const int64_t n = a.q.shape[0];
    const Tensor dkb = RowOf(dk, b, n), dvb = RowOf(dv, b, n);
    absl::Status st = exchange_.Exchange(*a.layout, a.row_cu_seqlens, window, a.k, a.v, /*for_backward=*/true);
    if (st.ok()) st = attention_.Backward(a, RowOf(d_o, b, n), RowOf(dq, b, n), dkb, dvb, exchange_);
    if (st.ok()) st = exchange_.ReturnGradients(dkb, dvb);
    if (!st.ok()) AbortJob(absl::Status(st.code(), absl::StrCat("layer ", layer, " backward: ", st.message())));
  }
  Count(window);
}

}  // namespace longctx
