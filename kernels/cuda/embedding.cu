// Why: embedding lookup and its gradient on the GPU. The backward must be
// deterministic (gradients are compared bitwise across runs), so it uses no
// float atomics: the tokens are sorted by (id, token index) — one 64-bit key
// each, unique, so any sort gives the same order — and each run of equal ids is
// summed by one thread block in token order, starting from the existing
// d_table row, which is exactly the CPU backend's summation order. The sort is
// a bitonic network (shared-memory tiles for the short strides, global passes
// for the long ones): O(N log^2 N), a few dozen launches, and no CUB templates
// to compile. Invalid ids set kErrEmbeddingId and are skipped.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_kernels.h"

namespace longctx::cuda {
namespace {

constexpr uint64_t kNoKey = ~uint64_t{0};  // padding and invalid ids: sorts last
constexpr int kSortTile = 1024;            // keys per shared-memory tile (power of 2)

template <class T>
__global__ void EmbeddingForwardKernel(const int32_t* ids, const T* table, int64_t ts, T* out, int64_t os, int64_t n,
                                       int64_t d, int64_t vocab, int* error_word) {
  const int64_t total = n * d;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t t = i / d, c = i - t * d;
    const int64_t id = ids[t];
    if (id < 0 || id >= vocab) {
      if (c == 0) atomicOr(error_word, kErrEmbeddingId);
      continue;
    }
    out[t * os + c] = table[id * ts + c];
  }
}

__global__ void MakeKeysKernel(const int32_t* ids, int64_t n, int64_t padded, int64_t vocab, uint64_t* keys,
                               int* error_word) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < padded; i += int64_t(gridDim.x) * blockDim.x) {
    uint64_t key = kNoKey;
    if (i < n) {
      const int64_t id = ids[i];
      if (id < 0 || id >= vocab) {
        atomicOr(error_word, kErrEmbeddingId);
      } else {
        key = (static_cast<uint64_t>(id) << 32) | static_cast<uint64_t>(i);
      }
    }
    keys[i] = key;
  }
}

// One compare-exchange of the bitonic network: the pair (i, i + j) with
// (i & j) == 0, ascending when (i & k) == 0.
__device__ __forceinline__ void CompareExchange(uint64_t& a, uint64_t& b, bool ascending) {
  if ((a > b) == ascending) {
    const uint64_t t = a;
    a = b;
    b = t;
  }
}

// Steps (k, j) for every k in [k_first, k_last] (powers of 2) and every
// j = min(k/2, kSortTile/2) .. 1, inside one tile of kSortTile keys.
// k_first = 2, k_last = kSortTile sorts the tiles; k_first = k_last = k > tile
// finishes merge step k once the global passes have brought j below a tile.
__global__ void BitonicTileKernel(uint64_t* keys, int64_t k_first, int64_t k_last) {
  __shared__ uint64_t s[kSortTile];
  const int64_t base = static_cast<int64_t>(blockIdx.x) * kSortTile;
  for (int x = threadIdx.x; x < kSortTile; x += blockDim.x) s[x] = keys[base + x];
  __syncthreads();
  for (int64_t k = k_first; k <= k_last; k <<= 1) {
    for (int j = static_cast<int>(k / 2 < kSortTile / 2 ? k / 2 : kSortTile / 2); j > 0; j >>= 1) {
      for (int t = threadIdx.x; t < kSortTile / 2; t += blockDim.x) {
        const int i = 2 * j * (t / j) + (t % j);  // lower index of pair t
        CompareExchange(s[i], s[i + j], ((base + i) & k) == 0);
      }
      __syncthreads();
    }
  }
  for (int x = threadIdx.x; x < kSortTile; x += blockDim.x) keys[base + x] = s[x];
}

// One global step (k, j) with j >= kSortTile.
__global__ void BitonicGlobalStepKernel(uint64_t* keys, int64_t padded, int64_t k, int64_t j) {
  const int64_t pairs = padded / 2;
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < pairs; t += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = 2 * j * (t / j) + (t % j);
    CompareExchange(keys[i], keys[i + j], (i & k) == 0);
  }
}

// Block per run of equal ids (the block at the run's first sorted position;
// the others return at once): d_table[id, c] += d_out[t, c] over the run's
// tokens in increasing t.
template <class T>
__global__ void AccumulateRunsKernel(const uint64_t* keys, int64_t n, const T* d_out, int64_t os, T* d_table,
                                     int64_t ts, int64_t d) {
  for (int64_t p = blockIdx.x; p < n; p += gridDim.x) {
    const uint64_t key = keys[p];
    if (key == kNoKey) break;  // invalid ids sort last
    const uint64_t id = key >> 32;
    if (p > 0 && (keys[p - 1] >> 32) == id) continue;  // not the head of its run
    T* dst = d_table + static_cast<int64_t>(id) * ts;
    for (int64_t c = threadIdx.x; c < d; c += blockDim.x) {
      T acc = dst[c];
      for (int64_t q = p; q < n; ++q) {
        const uint64_t kq = keys[q];
        if ((kq >> 32) != id || kq == kNoKey) break;
        acc += d_out[static_cast<int64_t>(kq & 0xffffffffu) * os + c];
      }
      dst[c] = acc;
    }
  }
}

}  // namespace

void EmbeddingForward(const Context& c, const Tensor& ids, const Tensor& table, const Tensor& out) {
  const int64_t n = out.shape[0], d = out.shape[1], vocab = table.shape[0];
  if (n * d == 0) return;
  DispatchFloat(table.dtype, "EmbeddingForward", [&](auto tag) {
    using T = decltype(tag);
    EmbeddingForwardKernel<T><<<GridFor(n * d), kThreads, 0, c.stream>>>(
        ids.as<const int32_t>(), table.as<const T>(), table.stride0(), out.as<T>(), out.stride0(), n, d, vocab,
        c.error_word);
    LONGCTX_CUDA_LAUNCHED();
  });
}

void EmbeddingBackward(const Context& c, const Tensor& ids, const Tensor& d_table, const Tensor& d_out) {
  const int64_t n = d_out.shape[0], d = d_out.shape[1], vocab = d_table.shape[0];
  if (n == 0 || d == 0) return;
  CHECK_LE(n, int64_t{1} << 32) << "EmbeddingBackward: token index must fit the sort key's 32 bits";
  int64_t padded = kSortTile;
  while (padded < n) padded <<= 1;
  uint64_t* keys = static_cast<uint64_t*>(c.workspace->Get(Slot::kSortKeys, padded * sizeof(uint64_t)));
  MakeKeysKernel<<<GridFor(padded), kThreads, 0, c.stream>>>(ids.as<const int32_t>(), n, padded, vocab, keys,
                                                              c.error_word);
  LONGCTX_CUDA_LAUNCHED();
  const unsigned tiles = static_cast<unsigned>(padded / kSortTile);
  BitonicTileKernel<<<tiles, 512, 0, c.stream>>>(keys, 2, kSortTile);
  LONGCTX_CUDA_LAUNCHED();
  for (int64_t k = 2 * kSortTile; k <= padded; k <<= 1) {
    for (int64_t j = k / 2; j >= kSortTile; j >>= 1) {
      BitonicGlobalStepKernel<<<GridFor(padded / 2), kThreads, 0, c.stream>>>(keys, padded, k, j);
      LONGCTX_CUDA_LAUNCHED();
    }
    BitonicTileKernel<<<tiles, 512, 0, c.stream>>>(keys, k, k);
    LONGCTX_CUDA_LAUNCHED();
  }
  DispatchFloat(d_table.dtype, "EmbeddingBackward", [&](auto tag) {
    using T = decltype(tag);
    const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(n, 16384));
    AccumulateRunsKernel<T><<<blocks, 128, 0, c.stream>>>(keys, n, d_out.as<const T>(), d_out.stride0(),
                                                           d_table.as<T>(), d_table.stride0(), d);
    LONGCTX_CUDA_LAUNCHED();
  });
}

}  // namespace longctx::cuda
