// Why: STRING's two attention parts (and any split-KV attention) are combined
// row by row through their log-sum-exps; the math is the shared functor of
// kernels/math/attention_merge.h, so the CPU and CUDA backends merge
// identically. One pass over [N, H] rows, each independent (in place allowed:
// a row's inputs are read before its outputs are written).
#include <cstdint>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/dispatch.h"
#include "kernels/math/attention_merge.h"

namespace longctx::cpu {
namespace {

template <class T>
void Merge(const AttentionMergeParams& p) {
  const int64_t n = p.o1.shape[0], heads = p.o1.shape[1], d = p.o1.shape[2];
  const int64_t s1 = p.o1.stride0(), s2 = p.o2.stride0(), so = p.o.stride0();
  const int64_t l1 = p.lse1.stride0(), l2 = p.lse2.stride0(), lo = p.lse.stride0();
  const T *o1 = p.o1.as<T>(), *o2 = p.o2.as<T>(), *lse1 = p.lse1.as<T>(), *lse2 = p.lse2.as<T>();
  T *o = p.o.as<T>(), *lse = p.lse.as<T>();
  const math::AttentionMerge merge;
#pragma omp parallel for schedule(static) if (n * heads * d >= (1 << 15))
  for (int64_t i = 0; i < n; ++i)
    for (int64_t h = 0; h < heads; ++h) {
      const math::AttentionMergeWeights<T> w = merge(lse1[h * l1 + i], lse2[h * l2 + i]);
      const T* a = o1 + i * s1 + h * d;
      const T* b = o2 + i * s2 + h * d;
      T* out = o + i * so + h * d;
      for (int64_t x = 0; x < d; ++x) out[x] = w.w1 * a[x] + w.w2 * b[x];
      lse[h * lo + i] = w.lse;
    }
}

}  // namespace

void AttentionMerge(const AttentionMergeParams& p) {
  DispatchFloat(p.o1.dtype, "AttentionMerge", [&](auto tag) { Merge<decltype(tag)>(p); });
}

}  // namespace longctx::cpu
