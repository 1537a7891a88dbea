// Why: both CUDA attention implementations (attention.cu, the scalar kernels
// for every dtype and head_dim; attention_mma.cu, the bf16 tensor-core kernels)
// find a query row's visible keys and a key's last query the same way: by
// binary search in the device-resident cu_seqlens, then the one visibility
// rule of kernels/math/attention_visibility.h. Included only by .cu files.
#ifndef LONGCTX_KERNELS_CUDA_ATTENTION_ROWS_CUH_
#define LONGCTX_KERNELS_CUDA_ATTENTION_ROWS_CUH_

#include <cstdint>

#include "kernels/attention_args.h"
#include "kernels/math/attention_visibility.h"

namespace longctx::cuda {

// The first s >= 1 with cu[s] > i (cu[0] = 0 <= i < cu[segments] = n): token
// i lies in segment s - 1, i.e. [cu[s - 1], cu[s]).
__device__ __forceinline__ int SegmentEnd(const int32_t* cu, int segments, int i) {
  int a = 1, b = segments;
  while (a < b) {
    const int mid = (a + b) >> 1;
    if (cu[mid] <= i) {
      a = mid + 1;
    } else {
      b = mid;
    }
  }
  return a;
}

// Segment [begin, end) containing token i.
__device__ __forceinline__ void SegmentBounds(const int32_t* cu, int segments, int i, int& begin, int& end) {
  const int a = SegmentEnd(cu, segments, i);
  begin = cu[a - 1];
  end = cu[a];
}

// The keys [lo, hi) query row i sees (hi <= lo: none), by the rule of
// kernels/math/attention_visibility.h. The query sits at key index
// i + cu_k[s] - cu[s] of its segment's end s (bottom-right; 0 in training,
// where cu_k == cu). Every value is a token index, so it fits in int.
template <class T>
__device__ __forceinline__ void QueryKeyRange(const AttentionView<T>& p, int i, int& lo, int& hi) {
  const int s = SegmentEnd(p.cu, static_cast<int>(p.segments), i);
  const int64_t pos = math::QueryKeyIndex(i, p.cu[s], p.cu_k[s]);
  lo = static_cast<int>(math::FirstVisibleKey(p.mask, p.cu_k[s - 1], pos));
  hi = static_cast<int>(math::EndVisibleKey(p.mask, pos));
}

// One past the last query that sees key j (training: queries are the keys).
template <class T>
__device__ __forceinline__ int QueryHi(const AttentionView<T>& p, int j) {
  int b, e;
  SegmentBounds(p.cu, static_cast<int>(p.segments), j, b, e);
  return static_cast<int>(math::EndQuerySeeing(p.mask, e, j));
}

}  // namespace longctx::cuda

#endif  // LONGCTX_KERNELS_CUDA_ATTENTION_ROWS_CUH_
