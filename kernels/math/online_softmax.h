// Why: flash attention never holds a whole row of scores; it folds them in
// tile by tile with a running max m and a running sum l = sum exp(s - m). This
// header is that bookkeeping (update, merge, log-sum-exp, recomputed
// probabilities) plus the exp it relies on, written once as LONGCTX_HD inline
// templates so the CPU kernel (kernels/cpu/attention.cc) and a CUDA kernel do
// the same math. m = -inf means "nothing seen yet"; every function handles it
// without producing NaN (exp(-inf - -inf) is never evaluated): scores are
// shifted by SoftmaxSafeMax(m), which maps -inf to 0.
#ifndef LONGCTX_KERNELS_MATH_ONLINE_SOFTMAX_H_
#define LONGCTX_KERNELS_MATH_ONLINE_SOFTMAX_H_

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#if !defined(__CUDA_ARCH__)
#include <bit>
#endif

#include "kernels/math/hd.h"

namespace longctx::math {

template <class T>
LONGCTX_HD T NegInf() {
  return -std::numeric_limits<T>::infinity();
}

// exp(x) for the softmax, where x <= 0 in practice (scores minus a running max
// or minus the log-sum-exp). The host float version is a branch-free Cephes
// polynomial (< 3e-7 relative, exactly 1 at 0) so that GCC vectorizes loops
// calling it: glibc's expf, and even floorf, are only inlined/vectorized under
// -ffast-math, and with the default -ftrapping-math GCC turns an early-out
// select into a branch that blocks vectorization. Rounding uses the
// 1.5 * 2^23 trick instead of floor. exp(-inf) and anything below -87.3 give
// exactly 0 (no subnormal results); anything above 88 gives +inf (true
// overflow is at 88.7, irrelevant for softmax arguments); NaN stays NaN.
// Double uses the libm exp (F64 runs only in tests: accuracy first).
LONGCTX_HD float Exp(float x) {
#if defined(__CUDA_ARCH__)
  return ::expf(x);
#else
  // Out-of-domain inputs are handled with bit masks, not selects: GCC turns a
  // select into a branch (it threads the constant path) and then refuses to
  // vectorize. xs = x inside the domain, 0 otherwise (so the conversion to int
  // below is always defined); the result is then patched to 0 / +inf / NaN.
  const bool tiny = x < -87.33654f;  // exp underflows (also -inf)
  const bool huge = x > 88.0f;       // exp overflows (also +inf)
  const bool nan = !(x == x);
  const int32_t in_domain = -static_cast<int32_t>(!(tiny || huge || nan));
  const float xs = std::bit_cast<float>(std::bit_cast<int32_t>(x) & in_domain);
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: t + kRound - kRound = nearest integer
  const float fx = (xs * 1.44269504088896341f + kRound) - kRound;
  float r = xs - fx * 0.693359375f;
  r = r - fx * -2.12194440e-4f;
  const float z = r * r;
  float y = 1.9875691500e-4f;
  y = y * r + 1.3981999507e-3f;
  y = y * r + 8.3334519073e-3f;
  y = y * r + 4.1665795894e-2f;
  y = y * r + 1.6666665459e-1f;
  y = y * r + 5.0000001201e-1f;
  y = y * z + r + 1.0f;
  const float e = y * std::bit_cast<float>((static_cast<int32_t>(fx) + 127) << 23);  // fx in [-126, 127]
  const int32_t bits = (std::bit_cast<int32_t>(e) & in_domain) |
                       (0x7f800000 & -static_cast<int32_t>(huge)) | (0x7fc00000 & -static_cast<int32_t>(nan));
  return std::bit_cast<float>(bits);
#endif
}

LONGCTX_HD double Exp(double x) {
#if defined(__CUDA_ARCH__)
  return ::exp(x);
#else
  return std::exp(x);
#endif
}

template <class T>
LONGCTX_HD T Log(T x) {
#if defined(__CUDA_ARCH__)
  return ::log(x);
#else
  return std::log(x);
#endif
}

// --- Scalar primitives (what vectorized loops over many rows call) ---

template <class T>
LONGCTX_HD T SoftmaxMax(T a, T b) {
  return b > a ? b : a;
}

// The max to subtract from scores: -inf (nothing seen) becomes 0, so that
// exp(s - max) is exp(-inf) = 0 for masked scores instead of NaN. On the host
// a bit mask rather than a select, which GCC would make a branch (see Exp).
template <class T>
LONGCTX_HD T SoftmaxSafeMax(T m) {
#if defined(__CUDA_ARCH__)
  return m == NegInf<T>() ? T(0) : m;
#else
  using I = std::conditional_t<sizeof(T) == 4, int32_t, int64_t>;
  const I keep = -static_cast<I>(m != NegInf<T>());
  return std::bit_cast<T>(static_cast<I>(std::bit_cast<I>(m) & keep));
#endif
}

// exp(m_old - m_new) for m_new >= m_old: the factor by which a sum (and an
// output accumulator) taken relative to m_old is rescaled to m_new. Exactly 1
// when the max did not move, 0 when nothing was seen before (m_old = -inf).
// Branch-free, so it vectorizes.
template <class T>
LONGCTX_HD T SoftmaxRescale(T m_old, T m_new) {
  return Exp(m_old - SoftmaxSafeMax(m_new));
}

// log(sum exp(s)) = m + log(l); -inf for an empty row (l = 0).
template <class T>
LONGCTX_HD T SoftmaxLse(T m, T l) {
  return SoftmaxSafeMax(m) + Log(l);
}

// 1 / l, the normalizer applied to the output accumulator (0 for an empty row).
template <class T>
LONGCTX_HD T SoftmaxInvSum(T l) {
  return l > T(0) ? T(1) / l : T(0);
}

// Backward recomputation: P = exp(s - lse) from the saved log-sum-exp.
template <class T>
LONGCTX_HD T SoftmaxProb(T score, T lse) {
  return Exp(score - lse);
}

// dS = P * (dP - D), D = rowsum(dO * O) = rowsum(P * dP): the softmax backward.
template <class T>
LONGCTX_HD T SoftmaxGradScore(T p, T dp, T d_row) {
  return p * (dp - d_row);
}

// --- The same as a per-row state (one thread per row, split-KV merges) ---

// Running state of one softmax row: max m of the scores seen so far and
// l = sum over them of exp(s - m).
template <class T>
struct SoftmaxState {
  T m;
  T l;
};

template <class T>
LONGCTX_HD SoftmaxState<T> SoftmaxInit() {
  return {NegInf<T>(), T(0)};
}

// First half of folding a tile with maximum block_max into the state: moves m
// to the new max, rescales l, and returns the factor the caller must apply to
// its output accumulator. The caller then adds exp(s - SoftmaxSafeMax(st.m))
// of the tile's scores to st.l (SoftmaxAccumulate).
template <class T>
LONGCTX_HD T SoftmaxAdvance(SoftmaxState<T>& st, T block_max) {
  const T m_new = SoftmaxMax(st.m, block_max);
  const T alpha = SoftmaxRescale(st.m, m_new);
  st.m = m_new;
  st.l *= alpha;
  return alpha;
}

template <class T>
LONGCTX_HD void SoftmaxAccumulate(SoftmaxState<T>& st, T block_sum) {
  st.l += block_sum;
}

// State of the union of two disjoint score sets (split-KV reductions).
template <class T>
LONGCTX_HD SoftmaxState<T> SoftmaxMerge(SoftmaxState<T> a, SoftmaxState<T> b) {
  const T m = SoftmaxMax(a.m, b.m);
  return {m, a.l * SoftmaxRescale(a.m, m) + b.l * SoftmaxRescale(b.m, m)};
}

template <class T>
LONGCTX_HD T SoftmaxLse(SoftmaxState<T> st) {
  return SoftmaxLse(st.m, st.l);
}

template <class T>
LONGCTX_HD T SoftmaxInvSum(SoftmaxState<T> st) {
  return SoftmaxInvSum(st.l);
}

}  // namespace longctx::math

#endif  // LONGCTX_KERNELS_MATH_ONLINE_SOFTMAX_H_
