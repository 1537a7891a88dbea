// Why: parameters live in one contiguous buffer per layer (plus one for the
// embedding, final norm and LM head). That buffer is the unit a later FSDP
// shards and gathers, the unit the optimizer steps, and the unit a checkpoint
// streams. A ParamLayout names every tensor inside those buffers with its
// Hugging Face Llama name, so gradients, AdamW moments and checkpoints all use
// the same map.
#ifndef LONGCTX_MODEL_PARAM_LAYOUT_H_
#define LONGCTX_MODEL_PARAM_LAYOUT_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "model/config.h"

namespace longctx {

struct ParamSlice {
  std::string name;            // Hugging Face name, e.g. model.layers.3.self_attn.q_proj.weight
  int buffer = 0;              // which buffer holds it
  int64_t offset = 0;          // in elements
  std::vector<int64_t> shape;  // [out, in] for matrices
  bool is_matrix = false;      // 2-D: decayed; 1-D norm weights are not (by default)
  int64_t numel() const;
};

class ParamLayout {
 public:
  explicit ParamLayout(const ModelDims& dims);

  // Buffer 0 = top (embedding, final norm, LM head if untied); buffer 1 + l = layer l.
  int num_buffers() const { return static_cast<int>(buffer_sizes_.size()); }
  int64_t buffer_size(int b) const { return buffer_sizes_[b]; }
  int64_t total() const;
  const std::vector<ParamSlice>& slices() const { return slices_; }
  // Index into slices() by name; -1 when absent.
  int Find(const std::string& name) const;

  // Offsets (elements) inside buffer 1 + l of the fused per-layer tensors.
  struct LayerOffsets {
    int64_t attn_norm, wqkv, wo, q_norm, k_norm, mlp_norm, w_gate_up, w_down;
  };
  const LayerOffsets& layer() const { return layer_; }
  int64_t embedding_offset() const { return 0; }
  int64_t final_norm_offset() const { return final_norm_; }
  int64_t lm_head_offset() const { return lm_head_; }  // -1 when tied

 private:
  void Add(const std::string& name, int buffer, std::vector<int64_t> shape, int64_t* cursor);
  std::vector<int64_t> buffer_sizes_;
  std::vector<ParamSlice> slices_;
  LayerOffsets layer_{};
  int64_t final_norm_ = 0, lm_head_ = -1;
};

// The parameters' initial values: norm weights 1, every other tensor
// N(0, dims.init_std) (o_proj and down_proj N(0, dims.out_init_std)), drawn
// from one mt19937_64(seed) stream buffer by buffer in slice order. `sink`
// receives them as consecutive pieces (b, offset in buffer b, values, count)
// of at most 65,536 values, so a caller can keep only what it needs — FSDP
// keeps its shard and never holds a whole buffer. The same values as
// Transformer::InitParams bit for bit once rounded to the model's dtype
// (tests/parallel/strategy_single_rank_test checks it).
using InitialValuesSink = std::function<void(int buffer, int64_t offset, const double* values, int64_t n)>;
void GenerateInitialParams(const ParamLayout& layout, const ModelDims& dims, uint64_t seed,
                           const InitialValuesSink& sink);

// The contiguous range [begin, end) of n elements that rank `rank` of `world`
// owns when a buffer is sharded: the first n % world ranks get one extra
// element. The same split as launch/'s ShardRange (checked in
// tests/parallel), defined here so model/ and optim/ need not link launch/.
struct ElementRange {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
};
ElementRange ShardOf(int64_t n, int rank, int world);

// One value per parameter of a layout (parameters, gradients, AdamW moments),
// in backend memory of one dtype. A buffer's storage can be released and
// allocated again (FSDP holds a layer's full parameters and gradients only
// while the layer runs); a released buffer must not be viewed.
class ParamStore {
 public:
  // allocate = false: every buffer starts released (Allocate before use).
  ParamStore(const ParamLayout* layout, Backend* backend, DType dtype, bool allocate = true);
  const ParamLayout& layout() const { return *layout_; }
  DType dtype() const { return dtype_; }
  Tensor buffer(int b) const;                 // 1-D view of a whole buffer
  Tensor slice(int index) const;              // shaped view of slices()[index]
  Tensor at(int buffer, int64_t offset, std::initializer_list<int64_t> shape) const;
  void Zero();                                // every allocated buffer
  double SumSquares() const;                  // over all allocated buffers
  // Storage of buffer b: Allocate gives it (contents undefined) when it has
  // none, Release frees it; both are no-ops when already in that state.
  void Allocate(int b);
  void Release(int b);
  bool allocated(int b) const { return buffers_[b].data() != nullptr || layout_->buffer_size(b) == 0; }
  int64_t allocated_bytes() const;
  // Host copies, in the store's dtype.
  void CopyFromHost(int buffer, const void* src);
  void CopyToHost(int buffer, void* dst) const;

 private:
  const ParamLayout* layout_;
  Backend* backend_;
  DType dtype_;
  std::vector<DeviceBuffer> buffers_;
};

}  // namespace longctx

#endif  // LONGCTX_MODEL_PARAM_LAYOUT_H_
