// Why: the memory-bound ops of both backends (fill, copy, axpy, reductions,
// AdamW) walk their tensors as rows x contiguous columns: one flat row when
// every tensor is dense, else dimension 0 as rows at each tensor's own row
// stride. The CPU tiles and the CUDA 2-D views must agree on that layout, so it
// is computed here once; no CUDA header, so .cc and .cu files both use it.
#ifndef LONGCTX_KERNELS_TENSOR_LAYOUT_H_
#define LONGCTX_KERNELS_TENSOR_LAYOUT_H_

#include <cstdint>
#include <initializer_list>

#include "base/log.h"
#include "kernels/tensor.h"

namespace longctx {

// A tensor (or several of one shape) as rows x cols, cols contiguous.
struct Layout {
  int64_t rows = 0, cols = 0;
  bool flat = true;  // one dense row: every tensor contiguous
  int64_t total() const { return rows * cols; }
  // Elements between rows of t in this layout (0 when flat).
  int64_t Stride(const Tensor& t) const { return flat ? 0 : t.stride0(); }
};

// The layout of tensors that share the first one's shape. Flat when every one
// is contiguous (or 0-d, which has no row stride to speak of): then the whole
// tensor is one row, so the spans are as long as possible whatever the shape.
inline Layout MakeLayout(std::initializer_list<const Tensor*> ts) {
  CHECK(ts.size() > 0) << "MakeLayout: no tensor";
  const Tensor& first = **ts.begin();
  Layout l;
  for (const Tensor* t : ts) l.flat = l.flat && (t->contiguous() || t->ndim <= 0);
  if (l.flat || first.ndim == 0) {
    l.flat = true;
    l.rows = first.numel() > 0 ? 1 : 0;
    l.cols = first.numel();
  } else {
    l.rows = first.shape[0];
    l.cols = first.row_size();
  }
  return l;
}

}  // namespace longctx

#endif  // LONGCTX_KERNELS_TENSOR_LAYOUT_H_
