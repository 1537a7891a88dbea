// Why: model/context_parallel_attention.h runs one rank's share of a layer's
// attention and asks a KvExchange for the key blocks other ranks hold, one
// block at a time. Over a communicator a rank cannot pull: its peers must
// send. But which blocks every rank of the group will ask for is known to
// all of them (PlanContextFetches: the row's document boundaries, the
// layout and the window), so before the op every rank packs what each peer
// will ask of it and the group swaps those packs in C - 1 SendRecv rounds
// (round s: to rank me + s, from rank me - s); the op's Fetch calls then read
// the received rows. A block that both of a rank's chunks need is moved once.
// The backward fetches the same blocks again (the op needs them; nothing is
// kept between forward and backward, so memory stays one layer's blocks),
// collects the dK, dV it computes for other ranks' keys in the same layout,
// and ReturnGradients swaps those back in the reverse rounds, adding what
// arrives into this rank's dK, dV. Every byte moved is counted.
//
// A full layer thus moves, per row, every earlier key of the rank's
// documents that other ranks hold (no future blocks, no other documents'); a
// sliding-window layer only the w - 1 keys before each of its chunks (the
// halo), the block planner trimming the rest.
#ifndef LONGCTX_TRAIN_PARALLEL_CONTEXT_EXCHANGE_H_
#define LONGCTX_TRAIN_PARALLEL_CONTEXT_EXCHANGE_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "kernels/backend.h"
#include "launch/communicator.h"
#include "model/context_parallel_attention.h"

namespace longctx {

class CommKvExchange final : public KvExchange {
 public:
  // group: the C ranks holding one row (its rank() is this rank's index in
  // the layout). Neither is owned.
  CommKvExchange(Backend* backend, Communicator* group);

  // A collective of the group: every rank calls it with the same layout,
  // row boundaries and window (one layer's op), k, v this rank's own
  // [local, kv_heads, head_dim] rows. Moves every block any rank's op will
  // fetch; for_backward also zeroes the gradient slots ReturnGrad fills.
  absl::Status Exchange(const ContextLayout& layout, absl::Span<const int32_t> row_cu_seqlens, int window,
                        const Tensor& k, const Tensor& v, bool for_backward);
  // The op's calls: rank must be this rank, (owner, begin, end) one of the
  // blocks the last Exchange planned for it.
  absl::Status Fetch(int rank, int owner, int64_t begin, int64_t end, const Tensor& k, const Tensor& v) override;
  absl::Status ReturnGrad(int rank, int owner, int64_t begin, int64_t end, const Tensor& dk,
                          const Tensor& dv) override;
  // A collective of the group, after the op's backward: the gradients
  // ReturnGrad collected go to the keys' owners, and those other ranks
  // computed for this rank's keys are added into dk, dv ([local, kv_heads,
  // head_dim]).
  absl::Status ReturnGradients(const Tensor& dk, const Tensor& dv);

  // Bytes this rank sent and received since the last ResetCounts: K, V in
  // Exchange, dK, dV in ReturnGradients.
  int64_t kv_bytes_sent() const { return kv_sent_; }
  int64_t kv_bytes_received() const { return kv_received_; }
  int64_t grad_bytes_sent() const { return grad_sent_; }
  int64_t grad_bytes_received() const { return grad_received_; }
  void ResetCounts() { kv_sent_ = kv_received_ = grad_sent_ = grad_received_ = 0; }

 private:
  // One block moved from its owner to the rank that needs it: `offset` is
  // its place (in elements) in that rank's receive buffer, K rows then V rows.
  struct Block {
    ContextFetch fetch;
    int64_t offset = 0;
  };
  int64_t BlockElements(const ContextFetch& f) const { return 2 * f.rows() * row_elems_; }
  // The blocks `rank` receives from `owner`, in their receive-buffer order.
  std::vector<const Block*> BlocksOf(int rank, int owner) const;
  const Block* Find(int owner, int64_t begin, int64_t end) const;
  absl::Status Where(int rank, int owner, int64_t begin, int64_t end, const Block** block) const;

  Backend* backend_;
  Communicator* group_;
  const ContextLayout* layout_ = nullptr;
  DType dtype_ = DType::kF32;
  int64_t row_elems_ = 0;                  // kv_heads * head_dim
  std::vector<std::vector<Block>> plan_;   // [C]: every rank's blocks, deduplicated, grouped by owner
  std::vector<int64_t> recv_elems_;        // [C]: elements each rank receives in all
  DeviceBuffer recv_, send_, grad_;        // this rank's receive buffer, a send pack, gradient slots
  size_t send_capacity_ = 0;
  int64_t kv_sent_ = 0, kv_received_ = 0, grad_sent_ = 0, grad_received_ = 0;
};

}  // namespace longctx

#endif  // LONGCTX_TRAIN_PARALLEL_CONTEXT_EXCHANGE_H_
