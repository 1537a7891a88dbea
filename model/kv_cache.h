// Why: decoding one token at a time must not recompute the keys and values of
// every earlier token, so each layer keeps them: post-RoPE keys (and values,
// RoPER-rotated where the layer uses it), exactly what its attention reads.
// What a layer keeps depends on its kind: a full layer (RoPE or NoPE) keeps
// every key, a sliding-window layer of window w only the keys a later query
// can still see, so its memory is bounded by w - 1 plus the largest block of
// tokens appended at once, however long the sequence grows.
//
// Rows are stored in position order in backend memory, [rows, kv_heads,
// head_dim] per layer, so the attention op reads them as one contiguous key
// segment whose last row is the newest token. A sliding layer compacts (moves
// its last w - 1 rows to the front) only when an append would overflow its
// capacity; full layers grow geometrically.
#ifndef LONGCTX_MODEL_KV_CACHE_H_
#define LONGCTX_MODEL_KV_CACHE_H_

#include <cstdint>
#include <vector>

#include "kernels/backend.h"
#include "model/config.h"

namespace longctx {

class KvCache {
 public:
  KvCache(const ModelDims& dims, Backend* backend, DType dtype);

  // Forgets every row (capacity is kept).
  void Reset();

  // Makes room for `count` new rows at the end of layer l (first dropping, on
  // a sliding layer, rows no later query can see) and returns views of them,
  // [count, kv_heads, head_dim], for the caller to fill.
  struct Rows {
    Tensor k, v;
  };
  Rows Append(int layer, int64_t count);

  // Views of all rows layer l holds, [length, kv_heads, head_dim].
  Tensor keys(int layer) const;
  Tensor values(int layer) const;
  int64_t length(int layer) const { return layers_[layer].length; }
  // Position of row 0 (rows are consecutive positions).
  int64_t first_position(int layer) const { return layers_[layer].first_position; }
  int64_t capacity(int layer) const { return layers_[layer].capacity; }
  // Backend bytes held by all layers.
  size_t bytes() const;

 private:
  struct Layer {
    int window = 0;  // 0 = keep everything
    int64_t length = 0, capacity = 0, first_position = 0;
    DeviceBuffer k, v;
  };
  Tensor RowsOf(const DeviceBuffer& buf, int64_t begin, int64_t end) const;
  void Grow(Layer& c, int64_t capacity);
  void Compact(Layer& c, int64_t keep);

  ModelDims dims_;
  Backend* backend_;
  DType dtype_;
  std::vector<Layer> layers_;
};

}  // namespace longctx

#endif  // LONGCTX_MODEL_KV_CACHE_H_
