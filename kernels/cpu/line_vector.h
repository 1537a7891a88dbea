// Why: buffers that the CPU kernels stream through 64-byte vectors and AMX
// tile rows must start on a cache line. std::vector only guarantees 16 bytes
// (glibc malloc), so a buffer lands at a different offset in its line from run
// to run, and when it is off a line every 64-byte row load or store touches two
// lines. Line-aligned buffers make the bf16 attention's forward and backward
// and the GEMM peak benchmark's bf16 figure markedly faster
// (docs/history/benchmarks-2026.md, "Attention at GEMM speed").
#ifndef LONGCTX_KERNELS_CPU_LINE_VECTOR_H_
#define LONGCTX_KERNELS_CPU_LINE_VECTOR_H_

#include <cstddef>
#include <new>
#include <vector>

#include "kernels/cpu/huge_pages.h"

namespace longctx::cpu {

template <class T>
struct LineAllocator {
  using value_type = T;
  static constexpr std::align_val_t kLine{64};
  LineAllocator() = default;
  template <class U>
  LineAllocator(const LineAllocator<U>&) {}  // NOLINT(runtime/explicit): allocator rebinding
  T* allocate(size_t n) {
    T* p = static_cast<T*>(::operator new(sizeof(T) * n, kLine));
    AdviseHugePages(p, sizeof(T) * n);  // large scratch (packed K/V, partials): 2 MiB pages
    return p;
  }
  void deallocate(T* p, size_t) { ::operator delete(p, kLine); }
  template <class U>
  bool operator==(const LineAllocator<U>&) const {
    return true;
  }
};

// A std::vector whose data() starts on a 64-byte boundary.
template <class T>
using LineVector = std::vector<T, LineAllocator<T>>;

}  // namespace longctx::cpu

#endif  // LONGCTX_KERNELS_CPU_LINE_VECTOR_H_
