// Why: see grad_sum64.h.
#include "train/parallel/grad_sum64.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/log.h"
#include "train/parallel/collectives.h"

namespace longctx {

namespace {
constexpr int64_t kChunk = int64_t{1} << 20;  // doubles per conversion pass of AddF64
}  // namespace

void ToF64(Backend& be, const Tensor& src32, const Tensor& dst64) {
  CHECK(src32.numel() == dst64.numel() && dst64.dtype == DType::kF64)
      << "ToF64: " << src32.DebugString() << " -> " << dst64.DebugString();
  if (src32.numel() == 0) return;
  be.Copy(dst64, src32);
}

void AddF64(Backend& be, const Tensor& acc64, const Tensor& src, const Tensor& scratch64) {
  CHECK(acc64.dtype == DType::kF64 && acc64.numel() == src.numel() && scratch64.dtype == DType::kF64)
      << "AddF64: " << acc64.DebugString() << " += " << src.DebugString();
  const int64_t n = src.numel();
  if (n == 0) return;
  if (src.dtype == DType::kF64) {
    be.Axpy(acc64, 1.0, src);
    return;
  }
  const int64_t chunk = std::min<int64_t>(n, scratch64.numel());
  CHECK(chunk > 0) << "AddF64: empty scratch";
  for (int64_t off = 0; off < n; off += chunk) {
    const int64_t c = std::min(chunk, n - off);
    const Tensor tmp = RangeView(scratch64, {0, c});
    be.Copy(tmp, RangeView(src, {off, off + c}));
    be.Axpy(RangeView(acc64, {off, off + c}), 1.0, tmp);
  }
}

int64_t Fp64Reducer::chunk_elements(int world) { return std::max<int64_t>(1, (int64_t{4} << 20) / world); }

Tensor Fp64Reducer::Buf(DeviceBuffer* d, int64_t n) {
  const size_t bytes = static_cast<size_t>(std::max<int64_t>(n, 1)) * sizeof(double);
  if (d->bytes() < bytes) *d = DeviceBuffer(be_, bytes);
  return Tensor(d->data(), DType::kF64, {n}, be_->device());
}

absl::Status Fp64Reducer::ReduceScatter(Communicator& comm, const Tensor& full, const Tensor& out_shard) {
  const int world = comm.world_size(), rank = comm.rank();
  const int64_t n = full.numel();
  const ElementRange mine = ShardOf(n, rank, world);
  if ((full.dtype != DType::kF32 && full.dtype != DType::kF64) ||
      (out_shard.dtype != DType::kF32 && out_shard.dtype != DType::kF64) || out_shard.numel() != mine.size())
    return absl::InvalidArgumentError(absl::StrCat("fp64 reduce-scatter: ", comm.Where(), " owns ", mine.size(),
                                                   " of ", n, " elements; got ", full.DebugString(), " into ",
                                                   out_shard.DebugString(), " (f32/f64 only)"));
  const bool accumulate = out_shard.dtype == DType::kF64;
  auto deliver = [&](const Tensor& out, const Tensor& sum) {
    if (out.numel() == 0) return;
    if (!accumulate) {
      be_->Copy(out, sum);  // the one rounding to fp32 (none when sum is fp32)
    } else if (sum.dtype == DType::kF64) {
      be_->Axpy(out, 1.0, sum);
    } else {
      AddF64(*be_, out, sum, Buf(&recv_, std::min<int64_t>(sum.numel(), chunk_elements(1))));
    }
  };
  if (world == 1) {
    deliver(out_shard, full);
    return absl::OkStatus();
  }
  if (world == 2 && !accumulate && full.dtype == DType::kF32) {
    // Two fp32 terms: fp32's a + b is already the exact sum rounded once —
    // the fp64 result bit for bit — so the fp32 reduce-scatter does it with
    // half the bytes. (out_shard may alias full's range: reduce into tmp32_.)
    const size_t bytes = static_cast<size_t>(std::max<int64_t>(mine.size(), 1)) * sizeof(float);
    if (tmp32_.bytes() < bytes) tmp32_ = DeviceBuffer(be_, bytes);
    const Tensor tmp(tmp32_.data(), DType::kF32, {mine.size()}, be_->device());
    if (absl::Status st = ReduceScatterSum(comm, *be_, full, tmp); !st.ok()) return st;
    if (mine.size() > 0) be_->Copy(out_shard, tmp);
    return absl::OkStatus();
  }
  const int64_t largest = ShardOf(n, 0, world).size();  // rank 0's range is never smaller
  // Pieces no longer than the largest range: a small buffer must not pad (and
  // send) a whole 32 MiB chunk per call — that made tiny models' steps ~3x
  // slower on 2-4 ranks. The sums per element are the same for any piece size.
  const int64_t c = std::min(chunk_elements(world), std::max<int64_t>(largest, 1));
  const Tensor send = Buf(&send_, c * world);
  const Tensor recv = Buf(&recv_, c);
  for (int64_t off = 0; off < largest; off += c) {
    // Piece [off, off + c) of every rank's range, each in its slot of `send`.
    for (int r = 0; r < world; ++r) {
      const ElementRange rr = ShardOf(n, r, world);
      const int64_t len = std::clamp<int64_t>(rr.size() - off, 0, c);
      const Tensor slot = RangeView(send, {r * c, (r + 1) * c});
      if (len > 0) be_->Copy(RangeView(slot, {0, len}), RangeView(full, {rr.begin + off, rr.begin + off + len}));
      if (len < c) be_->Fill(RangeView(slot, {len, c}), 0.0);
    }
    if (absl::Status st = ReduceScatterSum(comm, *be_, send, recv); !st.ok()) return st;
    const int64_t len = std::clamp<int64_t>(mine.size() - off, 0, c);
    if (len > 0) deliver(RangeView(out_shard, {off, off + len}), RangeView(recv, {0, len}));
  }
  return absl::OkStatus();
}

Fp64GradSum::Fp64GradSum(Backend* be, const ParamLayout* layout)
    : be_(be), layout_(layout), acc_(layout->num_buffers()), reducer_(be) {}

Tensor Fp64GradSum::Acc(int b) const {
  return Tensor(acc_[b].data(), DType::kF64, {layout_->buffer_size(b)}, be_->device());
}

void Fp64GradSum::BeginMicroBatch(ParamStore& grads) {
  if (micro_ == 1) {
    // The first micro-batch's gradient becomes the accumulator's start (exact).
    for (int b = 0; b < layout_->num_buffers(); ++b) {
      const int64_t n = layout_->buffer_size(b);
      if (acc_[b].bytes() < static_cast<size_t>(n) * sizeof(double))
        acc_[b] = DeviceBuffer(be_, static_cast<size_t>(n) * sizeof(double));
      ToF64(*be_, grads.buffer(b), Acc(b));
    }
  }
  if (micro_ > 0) grads.Zero();
}

void Fp64GradSum::EndMicroBatch(ParamStore& grads) {
  ++micro_;
  if (micro_ < 2) return;  // the only one so far stays in grads
  int64_t largest = 1;
  for (int b = 0; b < layout_->num_buffers(); ++b) largest = std::max(largest, layout_->buffer_size(b));
  const size_t bytes = static_cast<size_t>(std::min(largest, kChunk)) * sizeof(double);
  if (scratch_.bytes() < bytes) scratch_ = DeviceBuffer(be_, bytes);
  const Tensor scratch(scratch_.data(), DType::kF64, {std::min(largest, kChunk)}, be_->device());
  for (int b = 0; b < layout_->num_buffers(); ++b) AddF64(*be_, Acc(b), grads.buffer(b), scratch);
}

bool Fp64GradSum::LocalFinite(const ParamStore& grads) const {
  for (int b = 0; b < layout_->num_buffers(); ++b) {
    if (layout_->buffer_size(b) == 0) continue;
    if (micro_ >= 2 ? !be_->AllFinite(Acc(b)) : !be_->AllFinite(grads.buffer(b))) return false;
  }
  return true;
}

absl::Status Fp64GradSum::ReduceScatter(Communicator& comm, const ParamStore& grads, int b, const Tensor& shard32) {
  const int64_t n = layout_->buffer_size(b);
  const ElementRange r = ShardOf(n, comm.rank(), comm.world_size());
  if (shard32.dtype != DType::kF32 || shard32.numel() != r.size())
    return absl::InvalidArgumentError(absl::StrCat("fp64 gradient sum of buffer ", b, ": ", comm.Where(), " owns ",
                                                   r.size(), " of ", n, " elements, the fp32 shard is ",
                                                   shard32.DebugString()));
  const Tensor g = grads.buffer(b);
  if (micro_ < 2 && comm.world_size() == 1) {
    // One term: the fp32 gradient is the sum (bit-identical to the fp32 path).
    if (shard32.data != g.data) be_->Copy(shard32, g);
    return absl::OkStatus();
  }
  // From the fp64 accumulator, or the one fp32 micro-batch gradient (packed
  // to fp64 chunk by chunk). The output may alias g's range: every piece is
  // packed before its result is written, and pieces do not overlap.
  return reducer_.ReduceScatter(comm, micro_ >= 2 ? Acc(b) : g, shard32);
}

absl::Status SumReplicatedGradients(Communicator& comm, Backend& be, ParamStore& grads, Fp64GradSum* sum64,
                                    DeviceBuffer* tmp32) {
  for (int b = 0; b < grads.layout().num_buffers(); ++b) {
    const Tensor g = grads.buffer(b);
    const ElementRange r = ShardOf(g.numel(), comm.rank(), comm.world_size());
    absl::Status st;
    if (sum64 != nullptr && comm.world_size() == 1) {
      st = sum64->ReduceScatter(comm, grads, b, g);  // the identity, or the fp64 sum rounded into g
    } else if (sum64 != nullptr) {
      // Reduced in fp64 into a separate fp32 shard, then every rank's shard
      // gathered into g (out of place: Open MPI's in-place all-gather is
      // slower for large buffers, docs/BENCHMARKS.md, "Data parallel on CPU").
      if (tmp32->bytes() < static_cast<size_t>(r.size()) * sizeof(float))
        *tmp32 = DeviceBuffer(&be, static_cast<size_t>(r.size()) * sizeof(float));
      const Tensor mine(tmp32->data(), DType::kF32, {r.size()}, be.device());
      st = sum64->ReduceScatter(comm, grads, b, mine);
      if (st.ok()) st = AllGather(comm, be, mine, g);
    } else if (comm.world_size() == 1) {
      st = comm.AllReduceSum(g);  // today's single-process path (the identity)
    } else {
      // Each element is summed once (into its owner's shard) and every rank
      // receives a copy of those bits (an all-reduce does not promise the
      // same bits on all ranks).
      if (tmp32->bytes() < static_cast<size_t>(r.size()) * sizeof(float))
        *tmp32 = DeviceBuffer(&be, static_cast<size_t>(r.size()) * sizeof(float));
      const Tensor mine(tmp32->data(), DType::kF32, {r.size()}, be.device());
      st = ReduceScatterSum(comm, be, g, mine);
      if (st.ok()) st = AllGather(comm, be, mine, g);
    }
    if (!st.ok()) return absl::Status(st.code(), absl::StrCat("DDP gradient sync, buffer ", b, ": ", st.message()));
  }
  return absl::OkStatus();
}

int64_t Fp64GradSum::bytes() const {
  int64_t n = static_cast<int64_t>(scratch_.bytes()) + reducer_.bytes();
  for (const DeviceBuffer& d : acc_) n += static_cast<int64_t>(d.bytes());
  return n;
}

}  // namespace longctx
