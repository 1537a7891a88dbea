// Why: what "attention with positions" means for one layer, written once for
// the training/eval forward (Transformer) and the KV-cache engine
// (InferenceEngine): RoPE or NoPE by the layer's kind, RoPER's value and
// output rotations, and STRING (Shifted Rotary position embeddING, inference
// only) as two attentions merged by log-sum-exp. Only backend ops are called.
//
// STRING (paper Eq. 3-4, Algorithms 1-2; ../shared/SPECS.md): keys stay
// rotated at their true positions. For query i and key j at distance
// d = i - j, d < S keeps position d and d >= S is encoded as d - S + W:
//   part 1: q rotated at i, keys with d <= S - 1 (attention window S);
//   part 2: q rotated at i - S + W, keys with d >= S (diagonal offset S, and
//           for a sliding layer of window w also d < w);
//   lse = logaddexp(lse1, lse2), o = exp(lse1 - lse) o1 + exp(lse2 - lse) o2.
// Rows with i < S have no part 2 (its lse is -inf, weight 0). Distances are
// key-index distances within a segment, which equal position distances
// because positions restart at 0 in every segment. Applied to RoPE layers
// only: NoPE layers have no positions, and a sliding layer with w <= S never
// sees d >= S (unchanged). Unlike the public implementation the window is
// exclusive (distance exactly S is in part 2 only), as in the paper's matrix.
// rope_scale multiplies the RoPE cos/sin tables by 1 + 0.1 ln 2 (the public
// implementation's scale), i.e. the rotated dims of q and k, on the layers
// STRING changes.
//
// RoPER with STRING: the output of each part is rotated back by that part's
// query position (i, resp. i - S + W), so value j enters rotated by minus its
// STRING relative position, the same position its score used.
#ifndef LONGCTX_MODEL_LAYER_ATTENTION_H_
#define LONGCTX_MODEL_LAYER_ATTENTION_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "kernels/backend.h"
#include "model/config.h"

namespace longctx {

struct StringOptions {
  bool enabled = false;
  int s = 0;                // shift S (>= 1 when enabled); default L_train / 3, set by the caller
  int w = 128;              // local window W (>= 0): distance d >= S becomes d - S + W
  bool rope_scale = false;  // scale the RoPE tables by 1 + 0.1 ln 2
};

// OK, or InvalidArgument naming the option (`string.s: must be >= 1 ...`).
absl::Status ValidateStringOptions(const StringOptions& o);

// 1 + 0.1 ln 2 when rope_scale, else 1.
double StringRopeTableScale(const StringOptions& o);

// How one layer runs under STRING, in terms of the attention op: each part's
// window and diagonal offset, and the shift added to the query's position for
// its rotation (the key stays at its true position).
struct StringPart {
  int window = 0;   // 0 = causal over the whole segment
  int offset = 0;   // diagonal_offset
  int q_shift = 0;  // query rotated at i + q_shift
};
struct StringPlan {
  bool active = false;  // false: ordinary attention with the layer's window
  StringPart part1, part2;
};
// layer_window: the layer's sliding window (0 = full attention).
StringPlan MakeStringPlan(const StringOptions& o, bool uses_rope, int layer_window);

// The relative position query i and key j (i >= j, same segment, visible in
// the layer) are scored at under a plan: from the part whose window/offset
// sees (i, j). Inactive plan: i - j. Returns -1 when no part sees the pair.
int64_t StringPlanPosition(const StringPlan& plan, int layer_window, int64_t i, int64_t j);

// Keys and values of a layer into their attention form, in place: on a RoPE
// layer k is rotated at `positions` (and scaled by the STRING table scale
// where STRING is active); with RoPER v is rotated at `positions` over the
// first roper_dim dims. k, v: [n, kv_heads, head_dim]; positions I32 [n].
void RotateKeysValues(Backend& be, const ModelDims& dims, int layer, const StringOptions& string, const Tensor& k,
                      const Tensor& v, const Tensor& positions);

// The seam through which context parallelism (train/parallel/context_parallel.h)
// replaces a layer's attention op: the C ranks of a group hold disjoint
// chunks of the same rows, so the op on one rank needs keys and values other
// ranks hold. The transformer hands over exactly what it would hand the
// backend's attention: q rotated (on RoPE layers), k, v in attention form,
// this rank's tokens of the micro-batch; the hook knows the rows' layout.
// Forward fills o [n, heads, head_dim] and lse [heads, n]; Backward takes
// the forward's o, lse and d_o and overwrites dq, dk, dv (the gradients of
// this rank's q, k, v from every rank's queries). Every rank of a group calls
// them in the same order (the same layers, the same recomputation). An
// error ends the job (the hook's own policy: a rank cannot return alone from
// a collective its peers wait in).
class ContextAttentionHook {
 public:
  virtual ~ContextAttentionHook() = default;
  virtual void Forward(int layer, int window, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o,
                       const Tensor& lse) = 0;
  virtual void Backward(int layer, int window, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o,
                        const Tensor& lse, const Tensor& d_o, const Tensor& dq, const Tensor& dk,
                        const Tensor& dv) = 0;
};

struct LayerAttentionArgs {
  const ModelDims* dims = nullptr;
  int layer = 0;
  Tensor q;  // [nq, heads, head_dim] after QK-norm, before RoPE; rotated in place at q_positions
  Tensor k, v;  // [nk, kv_heads, head_dim], already in attention form (RotateKeysValues)
  Tensor q_positions;                         // I32 [nq], any device: the queries' true positions
  const int32_t* q_positions_host = nullptr;  // the same on the host; needed when STRING is active
  Tensor cu_seqlens;                          // I32, the queries' segments
  Tensor cu_seqlens_k;                        // optional: the keys' segments (bottom-right aligned, ops.h)
  Tensor o;    // [nq, heads, head_dim] output
  Tensor lse;  // [heads, nq] output
  StringOptions string;
  // Optional: context parallelism runs the attention op (not with STRING,
  // which is inference-only; CHECKed).
  ContextAttentionHook* context = nullptr;
};

// Runs one layer's attention (see the header comment). Holds STRING's scratch
// (a second q, o and lse), grown on demand and reused.
class LayerAttention {
 public:
  LayerAttention(Backend* backend, DType dtype) : backend_(backend), dtype_(dtype) {}
  void Forward(const LayerAttentionArgs& a);

 private:
  void EnsureScratch(int64_t nq, int64_t heads, int64_t head_dim);

  Backend* backend_;
  DType dtype_;
  int64_t scratch_rows_ = 0;
  DeviceBuffer scratch_;
  Tensor q2_, o2_, lse2_;
  std::vector<int32_t> shifted_positions_;
};

}  // namespace longctx

#endif  // LONGCTX_MODEL_LAYER_ATTENTION_H_
