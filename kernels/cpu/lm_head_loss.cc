// Why: the LM head's cross-entropy fused and chunked, because the [N, V] logits
// of a long context (e.g. 128K tokens x 128K vocab) would not fit in memory.
// Per chunk of p.ChunkRows() rows: logits = x_chunk @ W^T (BLAS, from this serial
// code: OpenBLAS threads itself), a stable log-softmax per row (OpenMP over
// rows), then, for the backward, the logits buffer is overwritten in place with
// dlogits and two more GEMMs produce dx_chunk and accumulate dW. Only one
// [chunk, V] scratch exists; it is a per-thread buffer that grows and is kept
// across calls, so steady-state training never allocates (or page-faults) it.
// At MatmulPrecision::kBF16 the weight and x are rounded to bf16 once per call
// (not once per chunk: the [V, D] weight is the largest operand) and every
// chunk's products use those copies (kernels/cpu/gemm_bf16.h); the dlogits
// are rounded row by row as the row pass finishes each row.
#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/gemm_bf16.h"
#include "kernels/cpu/line_vector.h"
#include "kernels/dispatch.h"
#include "kernels/math/cross_entropy.h"
#include "kernels/math/online_softmax.h"

// The row passes below in 512-bit vectors where the CPU has them (GCC's
// default for -march=native on AVX-512 CPUs is 256): a bf16 LM head at
// 16,384 tokens is faster with them (docs/history/benchmarks-2026.md, "Attention at GEMM speed").
// Only a code-generation preference: the
// instruction set stays -march's, so a build for an AVX2 CPU is unchanged.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC target("prefer-vector-width=512")
#endif

namespace longctx::cpu {
namespace {

// exp of a shifted logit (<= 0). F32: the branch-free polynomial of
// online_softmax.h (< 3e-7 relative), which GCC vectorizes; libm's expf is a
// scalar call per element, 65 M of them per step at ref-b's shape. F64 (the
// gradient checks): libm exp.
template <class T>
inline T RowExp(T x) {
  if constexpr (std::is_same_v<T, float>) {
    return math::Exp(x);
  } else {
    return math::CeExp(x);
  }
}

template <class T>
DType DTypeOf() {
  return sizeof(T) == 4 ? DType::kF32 : DType::kF64;
}

// The [chunk, V] logits scratch: grown on demand, kept for the thread's life.
template <class T>
T* LogitsScratch(int64_t elems) {
  thread_local LineVector<T> buffer;  // on cache lines: the GEMMs' C and A
  if (static_cast<int64_t>(buffer.size()) < elems) {
    buffer.clear();
    buffer.shrink_to_fit();
    buffer.resize(static_cast<size_t>(elems));
  }
  return buffer.data();
}

template <class T>
double LmHeadLossImpl(const LmHeadLossParams& p, const MatmulConfig& m) {
  const int64_t n = p.x.shape[0], vocab = p.weight.shape[0];
  if (n == 0) return 0.0;
  const int64_t chunk = std::min<int64_t>(p.ChunkRows(), n);
  const int32_t* targets = p.targets.as<int32_t>();
  const bool want_dx = p.dx.defined(), want_dw = p.dweight.defined();
  const bool backward = want_dx || want_dw;
  const T grad_scale = static_cast<T>(p.grad_scale);
  T* logits = LogitsScratch<T>(chunk * vocab);
  std::vector<double> row_loss(static_cast<size_t>(chunk));
  T* losses = p.losses.defined() ? p.losses.as<T>() : nullptr;
  const int64_t losses_stride = p.losses.defined() ? p.losses.stride0() : 0;
  double total = 0.0;

  // The products' operands: p.weight and p.x, or their bf16 roundings.
  const bool bf16 = std::is_same_v<T, float> && m.precision == MatmulPrecision::kBF16;
  const Bf16GemmPath path = bf16 ? m.bf16 : Bf16GemmPath::kRoundedSgemm;
  thread_local Bf16Scratch w_scratch, x_scratch, dlogits_scratch;
  // With bf16 operands on the oneDNN path, each row's dlogits are converted
  // to bf16 right after the row pass, while the row is still in cache (a
  // separate pass over the [chunk, V] chunk afterwards read it back from
  // further away): the same conversion, row by row.
  const bool convert_rows = bf16 && backward && path == Bf16GemmPath::kOneDnn;
  uint16_t* dl_rows = convert_rows ? static_cast<uint16_t*>(dlogits_scratch.Reserve(
                                         static_cast<size_t>(chunk * vocab) * sizeof(uint16_t)))
                                   : nullptr;
  const Tensor w_op = bf16 ? PrepareBf16Operand(p.weight, path, &w_scratch) : p.weight;
  const Tensor x_op = bf16 ? PrepareBf16Operand(p.x, path, &x_scratch) : p.x;
  auto product = [bf16, &m](const GemmParams& g) {
    if (bf16) {
      GemmBf16Prepared(g, m.sgemm);
    } else {
      Gemm(g, MatmulConfig{.sgemm = m.sgemm});
    }
  };

  for (int64_t t0 = 0; t0 < n; t0 += chunk) {
    const int64_t m = std::min(chunk, n - t0);
    const int32_t* tgt = targets + t0;
    bool any_valid = false;
    for (int64_t r = 0; r < m; ++r) any_valid = any_valid || !math::CrossEntropyIgnored(tgt[r]);
    if (!any_valid) {  // zero loss and gradient: skip the GEMMs
      if (losses)
        for (int64_t r = 0; r < m; ++r) losses[(t0 + r) * losses_stride] = T(0);
      if (want_dx) Fill(p.dx.Rows(t0, t0 + m), 0.0);
      continue;
    }

    const Tensor x_chunk = x_op.Rows(t0, t0 + m);
    const Tensor l(logits, DTypeOf<T>(), {m, vocab});
    GemmParams fwd;
    fwd.a = x_chunk;
    fwd.b = w_op;
    fwd.c = l;
    fwd.trans_b = true;
    product(fwd);

#pragma omp parallel for schedule(static) if (m * vocab >= (1 << 15) && m > 1)
    for (int64_t r = 0; r < m; ++r) {
      T* row = logits + r * vocab;
      const int32_t target = tgt[r];
      if (math::CrossEntropyIgnored(target)) {
        row_loss[r] = 0.0;
        if (backward)
          for (int64_t v = 0; v < vocab; ++v) row[v] = T(0);
        if constexpr (std::is_same_v<T, float>)
          if (dl_rows != nullptr) ConvertF32ToBf16(dl_rows + r * vocab, row, vocab);
        continue;
      }
      T mx = row[0];
#pragma omp simd reduction(max : mx)
      for (int64_t v = 0; v < vocab; ++v) mx = row[v] > mx ? row[v] : mx;
      const T target_logit = row[target];
      double sum = 0.0;
      if (backward) {
#pragma omp simd reduction(+ : sum)
        for (int64_t v = 0; v < vocab; ++v) {
          const T e = RowExp(row[v] - mx);
          row[v] = e;
          sum += static_cast<double>(e);
        }
      } else {
#pragma omp simd reduction(+ : sum)
        for (int64_t v = 0; v < vocab; ++v) sum += static_cast<double>(RowExp(row[v] - mx));
      }
      const double lse = math::LogSumExpFromShifted<double>(static_cast<double>(mx), sum);
      row_loss[r] = math::CrossEntropyLoss<double>(lse, static_cast<double>(target_logit));
      if (backward) {
        const T inv_sum = static_cast<T>(1.0 / sum);
        const T target_prob = row[target] * inv_sum;
        for (int64_t v = 0; v < vocab; ++v) row[v] = math::CrossEntropyGrad(row[v] * inv_sum, false, grad_scale);
        row[target] = math::CrossEntropyGrad(target_prob, true, grad_scale);
        if constexpr (std::is_same_v<T, float>)
          if (dl_rows != nullptr) ConvertF32ToBf16(dl_rows + r * vocab, row, vocab);
      }
    }
    for (int64_t r = 0; r < m; ++r) {
      total += row_loss[r];
      if (losses) losses[(t0 + r) * losses_stride] = static_cast<T>(row_loss[r]);
    }

    Tensor dl = l;
    if (convert_rows) {
      dl = Tensor(dl_rows, DType::kBF16, {m, vocab}, p.x.device);
    } else if (bf16 && backward) {
      dl = PrepareBf16Operand(l, path, &dlogits_scratch);
    }
    if (want_dx) {  // dx_chunk = dlogits @ W
      GemmParams g;
      g.a = dl;
      g.b = w_op;
      g.c = p.dx.Rows(t0, t0 + m);
      product(g);
    }
    if (want_dw) {  // dW += dlogits^T @ x_chunk
      GemmParams g;
      g.a = dl;
      g.b = x_chunk;
      g.c = p.dweight;
      g.trans_a = true;
      g.beta = 1.0;
      product(g);
    }
  }
  return total;
}

}  // namespace

double LmHeadLoss(const LmHeadLossParams& p, const MatmulConfig& m) {
  double loss = 0.0;
  DispatchFloat(p.x.dtype, "LmHeadLoss", [&](auto tag) { loss = LmHeadLossImpl<decltype(tag)>(p, m); });
  return loss;
}

}  // namespace longctx::cpu
