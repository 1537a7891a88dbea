// Why: every op in longctx takes non-owning tensor views. A view is a pointer,
// a dtype, a device and a shape whose dimension 0 may be strided (so a column
// slice of a fused [tokens, q|k|v] matrix is a view, not a copy). Memory is
// owned by whoever allocated it through a Backend (see backend.h).
#ifndef LONGCTX_KERNELS_TENSOR_H_
#define LONGCTX_KERNELS_TENSOR_H_

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>

namespace longctx {

enum class DType : uint8_t { kF32 = 0, kF64 = 1, kBF16 = 2, kI32 = 3 };
enum class Device : uint8_t { kCpu = 0, kCuda = 1 };

inline size_t DTypeSize(DType t) {
  switch (t) {
    case DType::kF32: return 4;
    case DType::kF64: return 8;
    case DType::kBF16: return 2;
    case DType::kI32: return 4;
  }
  return 0;
}
const char* DTypeName(DType t);

inline constexpr int kMaxDims = 4;

struct Tensor {
  void* data = nullptr;
  DType dtype = DType::kF32;
  Device device = Device::kCpu;
  int ndim = 0;
  int64_t shape[kMaxDims] = {0, 0, 0, 0};
  // Elements between consecutive indices of dimension 0. Dimensions 1.. are
  // always contiguous. 0 means "dense" (product of dims 1..).
  int64_t row_stride = 0;

  Tensor() = default;
  Tensor(void* p, DType t, std::initializer_list<int64_t> dims, Device dev = Device::kCpu);

  bool defined() const { return data != nullptr; }
  int64_t dim(int i) const { return shape[i < 0 ? ndim + i : i]; }
  int64_t numel() const;
  // Elements in one index of dimension 0 (product of dims 1..).
  int64_t row_size() const;
  int64_t stride0() const { return row_stride != 0 ? row_stride : row_size(); }
  bool contiguous() const { return row_stride == 0 || row_stride == row_size(); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * DTypeSize(dtype); }

  template <class T> T* as() const { return static_cast<T*>(data); }

  // A view of rows [begin, end) of dimension 0.
  Tensor Rows(int64_t begin, int64_t end) const;
  // A view of a 2-D tensor's columns [begin, end): same rows, strided.
  Tensor Cols(int64_t begin, int64_t end) const;
  // Same memory, new dense shape (requires contiguous()).
  Tensor Reshape(std::initializer_list<int64_t> dims) const;
  std::string DebugString() const;
};

}  // namespace longctx

#endif  // LONGCTX_KERNELS_TENSOR_H_
