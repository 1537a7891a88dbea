// Why: see context_exchange.h.
#include "train/parallel/context_exchange.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "train/parallel/collectives.h"

namespace longctx {
namespace {

absl::Status Bad(const Communicator& c, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(c.Where(), ": context exchange: ", what));
}

// A view of `rows` rows of [rows, heads, d] at element offset `elems` of buf.
Tensor RowsAt(const DeviceBuffer& buf, DType dtype, int64_t elems, int64_t rows, int64_t heads, int64_t d,
              Device device) {
  return Tensor(static_cast<char*>(buf.data()) + elems * static_cast<int64_t>(DTypeSize(dtype)), dtype,
                {rows, heads, d}, device);
}

// One round's SendRecv, counted in the step's comm_s (train/parallel/collectives.h).
absl::Status TimedSendRecv(Communicator& group, const void* send, int64_t send_count, int dest, void* recv,
                           int64_t recv_count, int source, DType dtype) {
  const CommTimer timer;
  return group.SendRecv(send, send_count, dest, recv, recv_count, source, dtype);
}

void Grow(DeviceBuffer* buf, Backend* be, size_t bytes) {
  if (buf->bytes() < bytes) *buf = DeviceBuffer(be, bytes);
}

}  // namespace

CommKvExchange::CommKvExchange(Backend* backend, Communicator* group) : backend_(backend), group_(group) {}

std::vector<const CommKvExchange::Block*> CommKvExchange::BlocksOf(int rank, int owner) const {
  std::vector<const Block*> out;
  for (const Block& b : plan_[rank])
    if (b.fetch.owner == owner) out.push_back(&b);
  return out;
}

const CommKvExchange::Block* CommKvExchange::Find(int owner, int64_t begin, int64_t end) const {
  for (const Block& b : plan_[group_->rank()])
    if (b.fetch.owner == owner && b.fetch.begin == begin && b.fetch.end == end) return &b;
  return nullptr;
}

absl::Status CommKvExchange::Where(int rank, int owner, int64_t begin, int64_t end, const Block** block) const {
  if (rank != group_->rank())
    return Bad(*group_, absl::StrCat("asked for rank ", rank, "'s blocks; this is rank ", group_->rank()));
  *block = Find(owner, begin, end);
  if (*block == nullptr)
    return Bad(*group_, absl::StrCat("rows [", begin, ", ", end, ") of rank ", owner,
                                     " were not planned by the last Exchange"));
  return absl::OkStatus();
}

absl::Status CommKvExchange::Exchange(const ContextLayout& layout, absl::Span<const int32_t> row_cu_seqlens,
                                      int window, const Tensor& k, const Tensor& v, bool for_backward) {
  const int C = group_->world_size(), me = group_->rank();
  if (layout.ranks() != C)
    return Bad(*group_, absl::StrCat("the layout has ", layout.ranks(), " ranks, the group ", C));
  if (k.ndim != 3 || v.ndim != 3 || k.dtype != v.dtype || k.shape[0] != layout.local_tokens(me) ||
      v.shape[0] != k.shape[0] || v.shape[1] != k.shape[1] || v.shape[2] != k.shape[2])
    return Bad(*group_, absl::StrCat("k ", k.DebugString(), " and v ", v.DebugString(), " must be [",
                                     layout.local_tokens(me), ", kv_heads, head_dim] alike"));
  layout_ = &layout;
  dtype_ = k.dtype;
  const int64_t hkv = k.shape[1], d = k.shape[2];
  row_elems_ = hkv * d;
  const int64_t esz = static_cast<int64_t>(DTypeSize(dtype_));
  const Device dev = backend_->device();

  // Every rank's blocks: a block both of a rank's chunks need is listed
  // once; grouped by owner so what one owner sends is one contiguous run of
  // the receiver's buffer.
  plan_.assign(C, {});
  recv_elems_.assign(C, 0);
  for (int r = 0; r < C; ++r) {
    absl::StatusOr<std::vector<ContextFetch>> fetches = PlanContextFetches(layout, row_cu_seqlens, window, r);
    if (!fetches.ok()) return fetches.status();
    std::vector<ContextFetch> unique;
    for (const ContextFetch& f : *fetches)
      if (std::find(unique.begin(), unique.end(), f) == unique.end()) unique.push_back(f);
    std::stable_sort(unique.begin(), unique.end(),
                     [](const ContextFetch& a, const ContextFetch& b) { return a.owner < b.owner; });
    int64_t offset = 0;
    for (const ContextFetch& f : unique) {
      plan_[r].push_back({f, offset});
      offset += BlockElements(f);
    }
    recv_elems_[r] = offset;
  }
  Grow(&recv_, backend_, static_cast<size_t>(recv_elems_[me] * esz));

  for (int s = 1; s < C; ++s) {
    const int dest = (me + s) % C, src = (me - s + C) % C;
    // Pack what dest asks of this rank, in dest's order.
    const std::vector<const Block*> out = BlocksOf(dest, me);
    int64_t send_elems = 0;
    for (const Block* b : out) send_elems += BlockElements(b->fetch);
    if (static_cast<size_t>(send_elems * esz) > send_capacity_) {
      send_ = DeviceBuffer(backend_, static_cast<size_t>(send_elems * esz));
      send_capacity_ = static_cast<size_t>(send_elems * esz);
    }
    int64_t at = 0;
    for (const Block* b : out) {
      const int64_t n = b->fetch.rows(), lr = layout.LocalRow(me, b->fetch.begin);
      if (lr < 0 || layout.LocalRow(me, b->fetch.end - 1) != lr + n - 1)
        return Bad(*group_, absl::StrCat("rank ", dest, " asks for rows [", b->fetch.begin, ", ", b->fetch.end,
                                         "), which are not one run of this rank's tokens"));
      backend_->Copy(RowsAt(send_, dtype_, at, n, hkv, d, dev), k.Rows(lr, lr + n));
      backend_->Copy(RowsAt(send_, dtype_, at + n * row_elems_, n, hkv, d, dev), v.Rows(lr, lr + n));
      at += BlockElements(b->fetch);
    }
    // What this rank asked of src: one run of its receive buffer.
    const std::vector<const Block*> in = BlocksOf(me, src);
    int64_t recv_elems = 0;
    for (const Block* b : in) recv_elems += BlockElements(b->fetch);
    const int64_t recv_at = in.empty() ? 0 : in.front()->offset;
    char* recv_ptr = recv_elems > 0 ? static_cast<char*>(recv_.data()) + recv_at * esz : nullptr;
    if (absl::Status st = TimedSendRecv(*group_, send_elems > 0 ? send_.data() : nullptr, send_elems, dest,
                                        recv_ptr, recv_elems, src, dtype_);
        !st.ok())
      return st;
    kv_sent_ += send_elems * esz;
    kv_received_ += recv_elems * esz;
  }
  if (for_backward) {
    Grow(&grad_, backend_, static_cast<size_t>(recv_elems_[me] * esz));
    if (recv_elems_[me] > 0) backend_->Fill(Tensor(grad_.data(), dtype_, {recv_elems_[me]}, dev), 0.0);
  }
  return absl::OkStatus();
}

absl::Status CommKvExchange::Fetch(int rank, int owner, int64_t begin, int64_t end, const Tensor& k,
                                   const Tensor& v) {
  const Block* b = nullptr;
  if (absl::Status st = Where(rank, owner, begin, end, &b); !st.ok()) return st;
  const int64_t n = end - begin;
  const Device dev = backend_->device();
  backend_->Copy(k, RowsAt(recv_, dtype_, b->offset, n, k.shape[1], k.shape[2], dev));
  backend_->Copy(v, RowsAt(recv_, dtype_, b->offset + n * row_elems_, n, v.shape[1], v.shape[2], dev));
  return absl::OkStatus();
}

absl::Status CommKvExchange::ReturnGrad(int rank, int owner, int64_t begin, int64_t end, const Tensor& dk,
                                        const Tensor& dv) {
  const Block* b = nullptr;
  if (absl::Status st = Where(rank, owner, begin, end, &b); !st.ok()) return st;
  if (grad_.bytes() < static_cast<size_t>(recv_elems_[rank] * static_cast<int64_t>(DTypeSize(dtype_))))
    return Bad(*group_, "ReturnGrad without Exchange(for_backward = true)");
  const int64_t n = end - begin;
  const Device dev = backend_->device();
  backend_->Axpy(RowsAt(grad_, dtype_, b->offset, n, dk.shape[1], dk.shape[2], dev), 1.0, dk);
  backend_->Axpy(RowsAt(grad_, dtype_, b->offset + n * row_elems_, n, dv.shape[1], dv.shape[2], dev), 1.0, dv);
  return absl::OkStatus();
}

absl::Status CommKvExchange::ReturnGradients(const Tensor& dk, const Tensor& dv) {
  if (layout_ == nullptr) return Bad(*group_, "ReturnGradients before Exchange");
  const int C = group_->world_size(), me = group_->rank();
  const int64_t esz = static_cast<int64_t>(DTypeSize(dtype_));
  const int64_t hkv = dk.shape[1], d = dk.shape[2];
  const Device dev = backend_->device();
  for (int s = 1; s < C; ++s) {
    // The reverse of Exchange's round s: gradients go back to the rank this
    // one received from, and arrive from the rank it sent to.
    const int dest = (me - s + C) % C, src = (me + s) % C;
    const std::vector<const Block*> out = BlocksOf(me, dest);
    int64_t send_elems = 0;
    for (const Block* b : out) send_elems += BlockElements(b->fetch);
    const char* send_ptr = send_elems > 0 ? static_cast<const char*>(grad_.data()) + out.front()->offset * esz : nullptr;
    const std::vector<const Block*> in = BlocksOf(src, me);
    int64_t recv_elems = 0;
    for (const Block* b : in) recv_elems += BlockElements(b->fetch);
    if (static_cast<size_t>(recv_elems * esz) > send_capacity_) {
      send_ = DeviceBuffer(backend_, static_cast<size_t>(recv_elems * esz));
      send_capacity_ = static_cast<size_t>(recv_elems * esz);
    }
    if (absl::Status st = TimedSendRecv(*group_, send_ptr, send_elems, dest,
                                        recv_elems > 0 ? send_.data() : nullptr, recv_elems, src, dtype_);
        !st.ok())
      return st;
    grad_sent_ += send_elems * esz;
    grad_received_ += recv_elems * esz;
    int64_t at = 0;
    for (const Block* b : in) {
      const int64_t n = b->fetch.rows(), lr = layout_->LocalRow(me, b->fetch.begin);
      backend_->Axpy(dk.Rows(lr, lr + n), 1.0, RowsAt(send_, dtype_, at, n, hkv, d, dev));
      backend_->Axpy(dv.Rows(lr, lr + n), 1.0, RowsAt(send_, dtype_, at + n * row_elems_, n, hkv, d, dev));
      at += BlockElements(b->fetch);
    }
  }
  return absl::OkStatus();
}

}  // namespace longctx
