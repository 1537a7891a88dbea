// Why: buffers that the CPU kernels stream through 64-byte vectors and AMX
// tile rows must start on a cache line. std::vector only guarantees 16 bytes
// (glibc malloc), so a buffer lands at a different offset in its line from run
// to run, and when it is off a line every 64-byte row load or store touches two
// lines. Measured (docs/BENCHMARKS.md, issue 16): the bf16 attention scratch
// moved from std::vector to this took a single-thread L = 8,192 forward from
// 292 to 243 ms and the backward from 549 to 382 ms, and the GEMM peak
// benchmark's bf16 figure from 1,412-1,496 to 1,475-1,661 GFLOP/s.
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
