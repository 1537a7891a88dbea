// Why: the few non-inline Tensor helpers, kept out of the header so kernels
// that include tensor.h from CUDA translation units stay light.
#include "kernels/tensor.h"

#include <cstdlib>
#include <sstream>

#include "base/log.h"

namespace longctx {

const char* DTypeName(DType t) {
  switch (t) {
    case DType::kF32: return "F32";
    case DType::kF64: return "F64";
    case DType::kBF16: return "BF16";
    case DType::kI32: return "I32";
  }
  return "?";
}

Tensor::Tensor(void* p, DType t, std::initializer_list<int64_t> dims, Device dev)
    : data(p), dtype(t), device(dev) {
  CHECK_LE(dims.size(), static_cast<size_t>(kMaxDims));
  for (int64_t d : dims) shape[ndim++] = d;
}

int64_t Tensor::row_size() const {
  int64_t n = 1;
  for (int i = 1; i < ndim; ++i) n *= shape[i];
  return n;
}

int64_t Tensor::numel() const {
  if (ndim == 0) return data ? 1 : 0;
  return shape[0] * row_size();
}

Tensor Tensor::Rows(int64_t begin, int64_t end) const {
  CHECK(ndim >= 1 && begin >= 0 && begin <= end && end <= shape[0]) << DebugString();
  Tensor t = *this;
  t.data = static_cast<char*>(data) + begin * stride0() * DTypeSize(dtype);
  t.shape[0] = end - begin;
  return t;
}

Tensor Tensor::Cols(int64_t begin, int64_t end) const {
  CHECK(ndim == 2 && begin >= 0 && begin <= end && end <= shape[1]) << DebugString();
  Tensor t = *this;
  t.row_stride = stride0();
  t.data = static_cast<char*>(data) + begin * DTypeSize(dtype);
  t.shape[1] = end - begin;
  return t;
}

Tensor Tensor::Reshape(std::initializer_list<int64_t> dims) const {
  CHECK(contiguous()) << "Reshape of a strided view " << DebugString();
  Tensor t(data, dtype, dims, device);
  CHECK_EQ(t.numel(), numel()) << DebugString();
  return t;
}

std::string Tensor::DebugString() const {
  std::ostringstream os;
  os << DTypeName(dtype) << "[";
  for (int i = 0; i < ndim; ++i) os << (i ? "," : "") << shape[i];
  os << "]";
  if (!contiguous()) os << " row_stride=" << row_stride;
  return os.str();
}

}  // namespace longctx
