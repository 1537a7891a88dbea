// Why: the CPU and CUDA attention kernels take the same inputs and unpack them
// the same way (pointers, row strides, GQA group, default scale, which
// segments the keys use). Both backends read the one struct of fields here
// (AttentionParams in ops.h is this plus validation; the CUDA half, which must
// not see Abseil, takes it directly), and both unpack it with the one
// function here, so the two cannot drift. Includes neither Abseil nor CUDA
// headers: nvcc and g++ translation units both use it.
#ifndef LONGCTX_KERNELS_ATTENTION_ARGS_H_
#define LONGCTX_KERNELS_ATTENTION_ARGS_H_

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/math/attention_visibility.h"
#include "kernels/tensor.h"

namespace longctx {

// The fields of an attention op; their meaning is documented at
// AttentionParams (kernels/ops.h), which adds Validate.
struct AttentionArgs {
  Tensor q;           // [N, H, head_dim], row-strided allowed
  Tensor k;           // [N, Hkv, head_dim], row-strided allowed
  Tensor v;           // [N, Hkv, head_dim], row-strided allowed
  Tensor o;           // [N, H, head_dim] forward output, row-strided allowed
  Tensor lse;         // [H, N] log-sum-exp of scaled scores, forward output
  Tensor cu_seqlens;  // I32 [num_segments + 1], cu[0] = 0, cu[last] = N
  int window = 0;
  double scale = 0.0;  // 0 = 1/sqrt(head_dim)
  // Forward only (inference):
  Tensor cu_seqlens_k;  // I32 [num_segments + 1], cu_k[last] = Nk; unset = cu_seqlens
  int diagonal_offset = 0;
  // Context parallelism (forward and backward; CPU only): with query_offset_set
  // (and cu_seqlens_k), query row i sits at key index i + query_offset in
  // every segment, instead of bottom-right.
  bool query_offset_set = false;
  int64_t query_offset = 0;
  // Backward only (dq, dk, dv overwritten; row-strided allowed):
  Tensor d_o, dq, dk, dv;
};

// An AttentionArgs unpacked for a kernel of element type T: raw pointers and
// row strides in elements. Backward fields are null/0 in a forward view.
template <class T>
struct AttentionView {
  int64_t n = 0, heads = 0, kv_heads = 0, d = 0, group = 0;
  int64_t nk = 0;  // key rows (== n unless cu_seqlens_k is set)
  bool offset_aligned = false;  // query_offset_set
  int64_t query_offset = 0;
  int64_t segments = 0;
  math::AttentionMask mask;  // window and diagonal_offset
  T scale = T(0);
  const int32_t* cu = nullptr;
  const int32_t* cu_k = nullptr;  // keys' segments (== cu in training)
  const T *q = nullptr, *k = nullptr, *v = nullptr;
  T *o = nullptr, *lse = nullptr;
  int64_t sq = 0, sk = 0, sv = 0, so = 0, slse = 0;
  const T* d_o = nullptr;
  T *dq = nullptr, *dk = nullptr, *dv = nullptr;
  int64_t sdo = 0, sdq = 0, sdk = 0, sdv = 0;
};

// cu_seqlens(_k) must already be where the kernel reads them (host memory for
// the CPU, device memory for CUDA).
template <class T>
AttentionView<T> UnpackAttention(const AttentionArgs& a, bool backward) {
  AttentionView<T> c;
  c.n = a.q.shape[0];
  c.heads = a.q.shape[1];
  c.d = a.q.shape[2];
  c.kv_heads = a.k.shape[1];
  c.nk = a.k.shape[0];
  c.offset_aligned = a.query_offset_set;
  c.query_offset = a.query_offset;
  c.group = c.heads / c.kv_heads;
  c.segments = a.cu_seqlens.shape[0] - 1;
  c.mask.window = a.window;
  c.mask.diagonal_offset = a.diagonal_offset;
  c.scale = static_cast<T>(a.scale > 0 ? a.scale : 1.0 / std::sqrt(static_cast<double>(c.d)));
  c.cu = a.cu_seqlens.as<const int32_t>();
  c.cu_k = a.cu_seqlens_k.defined() ? a.cu_seqlens_k.as<const int32_t>() : c.cu;
  // A token-major tensor's data pointer and row stride (elements).
  auto rows = [](const Tensor& t, auto*& ptr, int64_t& stride) {
    ptr = t.as<std::remove_reference_t<decltype(*ptr)>>();
    stride = t.stride0();
  };
  rows(a.q, c.q, c.sq);
  rows(a.k, c.k, c.sk);
  rows(a.v, c.v, c.sv);
  rows(a.o, c.o, c.so);
  rows(a.lse, c.lse, c.slse);
  if (backward) {
    rows(a.d_o, c.d_o, c.sdo);
    rows(a.dq, c.dq, c.sdq);
    rows(a.dk, c.dk, c.sdk);
    rows(a.dv, c.dv, c.sdv);
  }
  return c;
}

}  // namespace longctx

#endif  // LONGCTX_KERNELS_ATTENTION_ARGS_H_
