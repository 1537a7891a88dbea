// Why: every floating op of both backends runs in F32 or F64 (F64 for the
// exact finite-difference checks) and picks its element type from a runtime
// DType the same way; one dispatcher, usable from .cc and .cu files (it
// includes no CUDA header), keeps the accepted types and the error the same.
#ifndef LONGCTX_KERNELS_DISPATCH_H_
#define LONGCTX_KERNELS_DISPATCH_H_

#include "base/log.h"
#include "kernels/tensor.h"

namespace longctx {

// f(float{}) or f(double{}) by t; any other dtype aborts naming op (params
// are validated before this, so that is a broken invariant).
template <class F>
void DispatchFloat(DType t, const char* op, F&& f) {
  switch (t) {
    case DType::kF32: f(float{}); break;
    case DType::kF64: f(double{}); break;
    default: LOG(FATAL) << op << ": unsupported dtype " << DTypeName(t);
  }
}

}  // namespace longctx

#endif  // LONGCTX_KERNELS_DISPATCH_H_
