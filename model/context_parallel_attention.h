// Why: a layer's attention under context parallelism. The C ranks of a group
// hold disjoint chunks of one packed row (data/context_split's zig-zag:
// rank r holds chunks r and 2C-1-r), and a rank's queries need keys other
// ranks hold: for a full layer the visible part of every earlier chunk, for
// a sliding-window layer only the w - 1 keys before each chunk (the halo).
// This is that layer op on one rank: per own chunk, the key blocks it needs
// (kernels/context_attention.h plans them by global index and document,
// skipping blocks no query sees), fetched through a KvExchange where another
// rank holds them, each block's (o, lse) merged; the backward runs each
// block again on the merged (o, lse), keeps dQ and the own keys' dK, dV, and
// returns the other ranks' dK, dV through the exchange. The exchange is an
// interface so the same op runs in one process (InProcessKvExchange, for
// tests and the reference) or over a communicator; every byte it moves is
// counted, per direction.
#ifndef LONGCTX_MODEL_CONTEXT_PARALLEL_ATTENTION_H_
#define LONGCTX_MODEL_CONTEXT_PARALLEL_ATTENTION_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "kernels/backend.h"
#include "kernels/tensor.h"

namespace longctx {

// Which rank holds which chunks of a row of num_chunks * chunk_len tokens. A
// rank's local arrays hold its chunks one after another, ascending.
struct ContextLayout {
  int64_t chunk_len = 0;
  std::vector<std::vector<int32_t>> chunks_of_rank;  // [C], each ascending
  int ranks() const { return static_cast<int>(chunks_of_rank.size()); }
  int64_t num_chunks() const;
  int64_t local_tokens(int rank) const { return chunk_len * static_cast<int64_t>(chunks_of_rank[rank].size()); }
  // The rank holding chunk c, and the row of global token g in its arrays
  // (-1 when no rank holds it).
  int OwnerOf(int64_t chunk) const;
  int64_t LocalRow(int rank, int64_t global) const;
  // Every chunk held by exactly one rank, chunk_len > 0, ranks ascending.
  absl::Status Validate() const;
};

// Moves K, V rows between the ranks of a group. Rows [begin, end) are global
// row positions inside one chunk of `owner`.
class KvExchange {
 public:
  virtual ~KvExchange() = default;
  // The owner's K, V rows [begin, end) into k, v ([end - begin, Hkv, d]) on `rank`.
  virtual absl::Status Fetch(int rank, int owner, int64_t begin, int64_t end, const Tensor& k, const Tensor& v) = 0;
  // dk, dv (gradients of the owner's rows [begin, end), computed on `rank`)
  // added to the owner's dK, dV.
  virtual absl::Status ReturnGrad(int rank, int owner, int64_t begin, int64_t end, const Tensor& dk,
                                  const Tensor& dv) = 0;
};

// Every rank of the group in this process: each rank registers its K, V (and
// dK, dV for the backward) and the exchange copies rows between them with
// the backend. Counts the bytes each rank receives (K, V) and sends back
// (dK, dV).
class InProcessKvExchange final : public KvExchange {
 public:
  InProcessKvExchange(Backend* backend, const ContextLayout* layout);
  void Register(int rank, const Tensor& k, const Tensor& v, const Tensor& dk = {}, const Tensor& dv = {});
  absl::Status Fetch(int rank, int owner, int64_t begin, int64_t end, const Tensor& k, const Tensor& v) override;
  absl::Status ReturnGrad(int rank, int owner, int64_t begin, int64_t end, const Tensor& dk,
                          const Tensor& dv) override;
  int64_t bytes_received(int rank) const { return received_[rank]; }  // K, V fetched by rank
  int64_t bytes_returned(int rank) const { return returned_[rank]; }  // dK, dV sent back by rank
  void ResetCounts();

 private:
  struct Held {
    Tensor k, v, dk, dv;
  };
  absl::Status Rows(int owner, int64_t begin, int64_t end, int64_t* local) const;
  Backend* backend_;
  const ContextLayout* layout_;
  std::vector<Held> held_;
  std::vector<int64_t> received_, returned_;
};

// A block of keys one rank's queries need from another rank: the owner's
// global rows [begin, end), inside one of its chunks.
struct ContextFetch {
  int owner = 0;
  int64_t begin = 0, end = 0;
  int64_t rows() const { return end - begin; }
  bool operator==(const ContextFetch&) const = default;
};

// Every remote block ContextParallelAttention fetches on `rank` for one
// layer of window `window` (0 = full), in the order its Forward (and again
// its Backward) asks the exchange for them. Every rank can compute every
// other rank's list (the row's document boundaries and the layout are known
// to all), which is what lets an exchange over a communicator move all of a
// layer's keys before the op runs, and return the gradients after it.
absl::StatusOr<std::vector<ContextFetch>> PlanContextFetches(const ContextLayout& layout,
                                                             absl::Span<const int32_t> row_cu_seqlens, int window,
                                                             int rank);

// One rank's share of one layer's attention. q [local, H, d] (post-RoPE on
// RoPE layers), k, v [local, Hkv, d] (post-RoPE), local = the rank's tokens
// in its chunks' order; row_cu_seqlens: the whole row's document boundaries
// (every rank knows them); window 0 = full.
struct ContextAttentionArgs {
  int rank = 0;
  const ContextLayout* layout = nullptr;
  absl::Span<const int32_t> row_cu_seqlens;
  int window = 0;
  double scale = 0.0;
  Tensor q, k, v;
  Tensor o, lse;  // [local, H, d], [H, local]: forward outputs, backward inputs
};

// What one call did: blocks planned and skipped, and keys fetched.
struct ContextAttentionStats {
  int64_t blocks = 0, skipped = 0, remote_blocks = 0, keys_fetched = 0;
};

class ContextParallelAttention {
 public:
  ContextParallelAttention(Backend* backend, DType dtype) : backend_(backend), dtype_(dtype) {}
  // o, lse of the rank's queries over every key of the row they see.
  absl::Status Forward(const ContextAttentionArgs& a, KvExchange& exchange, ContextAttentionStats* stats = nullptr);
  // Given the forward's o, lse (in a) and d_o: dq (overwritten) of the
  // rank's queries; dk, dv of its own keys from its own queries are *added*
  // (the group zeroes every rank's dK, dV first, then runs every rank's
  // backward: the other ranks add theirs through the exchange).
  absl::Status Backward(const ContextAttentionArgs& a, const Tensor& d_o, const Tensor& dq, const Tensor& dk,
                        const Tensor& dv, KvExchange& exchange, ContextAttentionStats* stats = nullptr);

 private:
  absl::Status Run(const ContextAttentionArgs& a, bool backward, const Tensor& d_o, const Tensor& dq,
                   const Tensor& dk, const Tensor& dv, KvExchange& exchange, ContextAttentionStats* stats);
  Backend* backend_;
  DType dtype_;
};

}  // namespace longctx

#endif  // LONGCTX_MODEL_CONTEXT_PARALLEL_ATTENTION_H_
