// Why: see kv_cache.h.
#include "model/kv_cache.h"

#include <algorithm>

#include "base/log.h"
#include "kernels/math/attention_visibility.h"

namespace longctx {

KvCache::KvCache(const ModelDims& dims, Backend* backend, DType dtype)
    : dims_(dims), backend_(backend), dtype_(dtype), layers_(dims.layers) {
  for (int l = 0; l < dims.layers; ++l) layers_[l].window = dims.layer_window(l);
}

void KvCache::Reset() {
  for (Layer& c : layers_) c.length = c.first_position = 0;
}

Tensor KvCache::RowsOf(const DeviceBuffer& buf, int64_t begin, int64_t end) const {
  const int64_t row = static_cast<int64_t>(dims_.kv_heads) * dims_.head_dim;
  char* p = static_cast<char*>(buf.data()) + begin * row * DTypeSize(dtype_);
  return Tensor(p, dtype_, {end - begin, dims_.kv_heads, dims_.head_dim}, backend_->device());
}

Tensor KvCache::keys(int layer) const { return RowsOf(layers_[layer].k, 0, layers_[layer].length); }
Tensor KvCache::values(int layer) const { return RowsOf(layers_[layer].v, 0, layers_[layer].length); }

size_t KvCache::bytes() const {
  size_t b = 0;
  for (const Layer& c : layers_) b += c.k.bytes() + c.v.bytes();
  return b;
}

void KvCache::Grow(Layer& c, int64_t capacity) {
  const size_t bytes = static_cast<size_t>(capacity) * dims_.kv_heads * dims_.head_dim * DTypeSize(dtype_);
  DeviceBuffer k(backend_, bytes), v(backend_, bytes);
  if (c.length > 0) {
    backend_->Copy(RowsOf(k, 0, c.length), RowsOf(c.k, 0, c.length));
    backend_->Copy(RowsOf(v, 0, c.length), RowsOf(c.v, 0, c.length));
  }
  c.k = std::move(k);
  c.v = std::move(v);
  c.capacity = capacity;
}

// Moves the last `keep` rows to the front. Copies go in blocks no longer than
// the shift, lowest first, so no block overlaps its destination or a source
// still to be read.
void KvCache::Compact(Layer& c, int64_t keep) {
  const int64_t shift = c.length - keep;
  if (shift <= 0) return;
  for (int64_t b = 0; b < keep; b += shift) {
    const int64_t e = std::min(keep, b + shift);
    backend_->Copy(RowsOf(c.k, b, e), RowsOf(c.k, b + shift, e + shift));
    backend_->Copy(RowsOf(c.v, b, e), RowsOf(c.v, b + shift, e + shift));
  }
  c.length = keep;
  c.first_position += shift;
}

KvCache::Rows KvCache::Append(int layer, int64_t count) {
  CHECK(count >= 0) << "KvCache::Append: negative count";
  Layer& c = layers_[layer];
  if (c.length + count > c.capacity) {
    // Rows before the first key the next query (key index length) sees are
    // seen by no later query either (the rule's ranges only move forward).
    const math::AttentionMask mask{c.window, 0};
    Compact(c, c.length - math::FirstVisibleKey(mask, 0, c.length));
    if (c.length + count > c.capacity) {
      const int64_t want = c.length + count;
      // Full layers double; sliding layers take room for one more window of
      // single-token appends, so decoding compacts once every ~w tokens.
      const int64_t cap = c.window > 0 ? std::max<int64_t>(want, int64_t{2} * c.window)
                                       : std::max<int64_t>({want, 2 * c.capacity, 64});
      Grow(c, cap);
    }
  }
  Rows r{RowsOf(c.k, c.length, c.length + count), RowsOf(c.v, c.length, c.length + count)};
  c.length += count;
  return r;
}

}  // namespace longctx
