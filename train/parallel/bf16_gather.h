// Why: FSDP all-gathers every layer's parameters twice a step (forward and
// backward) and that traffic is most of its communication. On the bf16 path
// (precision BF16, MatmulPrecision::kBF16) every weight matrix is read only as
// a matmul operand, and the matmul rounds it to bf16 (round to nearest even,
// kernels/math/bf16.h) before multiplying — so sending those values as bf16
// (half the bytes) and widening them back gives the matmul exactly the
// operands it would have made from the fp32 values: the step computes the same
// numbers as an fp32 gather, bit for bit. Values read outside a matmul — norm
// weights, the embedding table's lookup (and a tied LM head with it) — travel
// as fp32, unchanged. Master weights and AdamW stay fp32 in the shards; only
// the gathered working copy is affected, and a checkpoint or probe gathers
// fp32 (FsdpStrategy::GatherFullParameters).
//
// Wire format: rank r's shard [begin, end) of buffer b, element by element,
// as 16-bit units — one per bf16 element, two (the fp32 bits) per exact one —
// padded to the largest rank's count U, so one AllGather of world × U units
// (Communicator::AllGather with kBF16, a copy of bits) moves the buffer.
#ifndef LONGCTX_TRAIN_PARALLEL_BF16_GATHER_H_
#define LONGCTX_TRAIN_PARALLEL_BF16_GATHER_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "kernels/backend.h"
#include "launch/communicator.h"
#include "model/param_layout.h"

namespace longctx {

// Sorted, disjoint element ranges of buffer b that the model reads only as
// matmul operands: every 2-D slice but the embedding table.
std::vector<ElementRange> MatmulOnlyRanges(const ParamLayout& layout, int b);

class Bf16Gather {
 public:
  Bf16Gather(const ParamLayout* layout, int world);
  // full (kF32, buffer b's size) = every rank's shard (kF32, this rank's
  // ShardOf range of the master values) with the matmul-only elements rounded
  // to bf16. Collective; host (CPU backend) memory only.
  absl::Status Gather(Communicator& comm, int b, const Tensor& shard, const Tensor& full);
  // 16-bit units each rank sends for buffer b (the padded U), and what an
  // fp32 gather would send (2 units per element of the largest shard).
  int64_t units(int b) const { return units_[b]; }
  int64_t fp32_units(int b) const;
  int64_t bytes() const { return static_cast<int64_t>((send_.capacity() + recv_.capacity()) * sizeof(uint16_t)); }

 private:
  const ParamLayout* layout_;
  int world_;
  std::vector<std::vector<ElementRange>> matmul_;  // per buffer
  std::vector<int64_t> units_;                     // per buffer: max over ranks
  std::vector<uint16_t> send_, recv_;
};

}  // namespace longctx

#endif  // LONGCTX_TRAIN_PARALLEL_BF16_GATHER_H_
