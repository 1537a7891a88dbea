// Why: the long-sequence tensors (q|k|v at 16,384 tokens and more, the
// activation arena, packed K/V) span tens of MiB, read a row every few KiB
// (one head's slice of a q|k|v row). With 4 KiB pages that is a TLB miss per
// row once the span passes the TLB's reach (fp32 full attention's GFLOP/s
// drops between 8K and 16K tokens without them: docs/history/benchmarks-2026.md, "Attention at GEMM speed").
// Linux backs such ranges with 2 MiB pages when asked
// (transparent huge pages in "madvise" mode, Debian's default), so large
// allocations ask.
#ifndef LONGCTX_KERNELS_CPU_HUGE_PAGES_H_
#define LONGCTX_KERNELS_CPU_HUGE_PAGES_H_

#include <cstddef>
#include <cstdint>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace longctx::cpu {

// Asks for 2 MiB pages over the whole 2 MiB pages inside [p, p + bytes)
// (allocations of at least 4 MiB; call before the memory is first touched).
// Advice only: where the kernel declines or THP is off, nothing changes.
inline void AdviseHugePages(void* p, size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  if (p == nullptr || bytes < 2 * kHuge) return;
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + kHuge - 1) & ~(kHuge - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + bytes) & ~(kHuge - 1);
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
#else
  (void)p;
  (void)bytes;
#endif
}

}  // namespace longctx::cpu

#endif  // LONGCTX_KERNELS_CPU_HUGE_PAGES_H_
