// Why: the reference the attention kernels are judged by (see the header); it
// shares no code with them: no tiling, no online softmax, no D_i shortcut
// (the softmax backward uses rowsum(P * dP) computed from the matrices).
#include "tests/support/naive_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace longctx::testing {
namespace {

struct Scores {
  std::vector<double> p;  // [len, len] softmax probabilities (0 where masked)
  std::vector<double> lse;  // [len]
};

double Scale(const NaiveAttentionShape& s) {
  return s.scale > 0 ? s.scale : 1.0 / std::sqrt(static_cast<double>(s.head_dim));
}

// Probabilities of query head h over the segment [b, b + len).
Scores SegmentScores(const NaiveAttentionShape& s, const std::vector<bool>& mask, int64_t b, int64_t len,
                     int64_t h, const double* q, const double* k) {
  const int64_t d = s.head_dim, g = h / (s.heads / s.kv_heads);
  const double scale = Scale(s);
  Scores out{std::vector<double>(len * len), std::vector<double>(len)};
  std::vector<double> sc(len * len, -std::numeric_limits<double>::infinity());
  for (int64_t r = 0; r < len; ++r)
    for (int64_t c = 0; c < len; ++c) {
      if (!mask[r * len + c]) continue;
      const double* qr = q + ((b + r) * s.heads + h) * d;
      const double* kc = k + ((b + c) * s.kv_heads + g) * d;
      double dot = 0;
      for (int64_t x = 0; x < d; ++x) dot += qr[x] * kc[x];
      sc[r * len + c] = scale * dot;
    }
  for (int64_t r = 0; r < len; ++r) {
    double mx = -std::numeric_limits<double>::infinity();
    for (int64_t c = 0; c < len; ++c) mx = std::max(mx, sc[r * len + c]);
    double sum = 0;
    for (int64_t c = 0; c < len; ++c) sum += mask[r * len + c] ? std::exp(sc[r * len + c] - mx) : 0.0;
    for (int64_t c = 0; c < len; ++c)
      out.p[r * len + c] = mask[r * len + c] ? std::exp(sc[r * len + c] - mx) / sum : 0.0;
    out.lse[r] = mx + std::log(sum);
  }
  return out;
}

}  // namespace

std::vector<bool> NaiveAttentionMask(int64_t len, int window) {
  std::vector<bool> mask(len * len);
  for (int64_t r = 0; r < len; ++r)
    for (int64_t c = 0; c < len; ++c) mask[r * len + c] = c <= r && (window == 0 || c > r - window);
  return mask;
}

void NaiveAttentionForward(const NaiveAttentionShape& s, const double* q, const double* k, const double* v,
                           double* o, double* lse) {
  const int64_t d = s.head_dim, group = s.heads / s.kv_heads;
  for (size_t seg = 0; seg + 1 < s.cu_seqlens.size(); ++seg) {
    const int64_t b = s.cu_seqlens[seg], len = s.cu_seqlens[seg + 1] - b;
    const std::vector<bool> mask = NaiveAttentionMask(len, s.window);
    for (int64_t h = 0; h < s.heads; ++h) {
      const Scores sc = SegmentScores(s, mask, b, len, h, q, k);
      const int64_t g = h / group;
      for (int64_t r = 0; r < len; ++r) {
        double* orow = o + ((b + r) * s.heads + h) * d;
        for (int64_t x = 0; x < d; ++x) {
          double acc = 0;
          for (int64_t c = 0; c < len; ++c) acc += sc.p[r * len + c] * v[((b + c) * s.kv_heads + g) * d + x];
          orow[x] = acc;
        }
        lse[h * s.n + b + r] = sc.lse[r];
      }
    }
  }
}

void NaiveAttentionBackward(const NaiveAttentionShape& s, const double* q, const double* k, const double* v,
                            const double* d_o, double* dq, double* dk, double* dv) {
  const int64_t d = s.head_dim, group = s.heads / s.kv_heads;
  const double scale = Scale(s);
  std::fill(dq, dq + s.n * s.heads * d, 0.0);
  std::fill(dk, dk + s.n * s.kv_heads * d, 0.0);
  std::fill(dv, dv + s.n * s.kv_heads * d, 0.0);
  for (size_t seg = 0; seg + 1 < s.cu_seqlens.size(); ++seg) {
    const int64_t b = s.cu_seqlens[seg], len = s.cu_seqlens[seg + 1] - b;
    const std::vector<bool> mask = NaiveAttentionMask(len, s.window);
    for (int64_t h = 0; h < s.heads; ++h) {
      const Scores sc = SegmentScores(s, mask, b, len, h, q, k);
      const int64_t g = h / group;
      auto at = [&](const double* t, int64_t heads, int64_t hh, int64_t row) {
        return t + ((b + row) * heads + hh) * d;
      };
      // dP = dO V^T, dS = P * (dP - rowsum(P * dP)).
      std::vector<double> dp(len * len), ds(len * len);
      for (int64_t r = 0; r < len; ++r)
        for (int64_t c = 0; c < len; ++c) {
          double acc = 0;
          for (int64_t x = 0; x < d; ++x) acc += at(d_o, s.heads, h, r)[x] * at(v, s.kv_heads, g, c)[x];
          dp[r * len + c] = acc;
        }
      for (int64_t r = 0; r < len; ++r) {
        double rowsum = 0;
        for (int64_t c = 0; c < len; ++c) rowsum += sc.p[r * len + c] * dp[r * len + c];
        for (int64_t c = 0; c < len; ++c) ds[r * len + c] = sc.p[r * len + c] * (dp[r * len + c] - rowsum);
      }
      // dV += P^T dO, dQ = scale dS K, dK += scale dS^T Q.
      for (int64_t r = 0; r < len; ++r)
        for (int64_t c = 0; c < len; ++c) {
          const double p = sc.p[r * len + c], g_s = scale * ds[r * len + c];
          double* dvr = dv + ((b + c) * s.kv_heads + g) * d;
          double* dkr = dk + ((b + c) * s.kv_heads + g) * d;
          double* dqr = dq + ((b + r) * s.heads + h) * d;
          for (int64_t x = 0; x < d; ++x) {
            dvr[x] += p * at(d_o, s.heads, h, r)[x];
            dqr[x] += g_s * at(k, s.kv_heads, g, c)[x];
            dkr[x] += g_s * at(q, s.heads, h, r)[x];
          }
        }
    }
  }
}

void NaiveAttentionForwardInference(const NaiveInferenceShape& s, const double* q, const double* k,
                                    const double* v, double* o, double* lse) {
  const int64_t d = s.head_dim, group = s.heads / s.kv_heads;
  const double scale = s.scale > 0 ? s.scale : 1.0 / std::sqrt(static_cast<double>(d));
  for (size_t seg = 0; seg + 1 < s.cu_q.size(); ++seg) {
    const int64_t qb = s.cu_q[seg], lq = s.cu_q[seg + 1] - qb;
    const int64_t kb = s.cu_k[seg], lk = s.cu_k[seg + 1] - kb;
    for (int64_t r = 0; r < lq; ++r) {
      const int64_t i = lk - lq + r;  // key index of the query within the segment
      std::vector<int64_t> visible;
      for (int64_t j = 0; j < lk; ++j)
        if (j <= i - s.offset && (s.window == 0 || j > i - s.window)) visible.push_back(j);
      for (int64_t h = 0; h < s.heads; ++h) {
        const int64_t g = h / group;
        const double* qr = q + ((qb + r) * s.heads + h) * d;
        double* orow = o + ((qb + r) * s.heads + h) * d;
        std::vector<double> sc;
        double mx = -std::numeric_limits<double>::infinity();
        for (int64_t j : visible) {
          const double* kr = k + ((kb + j) * s.kv_heads + g) * d;
          double dot = 0;
          for (int64_t x = 0; x < d; ++x) dot += qr[x] * kr[x];
          sc.push_back(scale * dot);
          mx = std::max(mx, sc.back());
        }
        double sum = 0;
        for (double e : sc) sum += std::exp(e - mx);
        for (int64_t x = 0; x < d; ++x) {
          double acc = 0;
          for (size_t t = 0; t < visible.size(); ++t)
            acc += std::exp(sc[t] - mx) / sum * v[((kb + visible[t]) * s.kv_heads + g) * d + x];
          orow[x] = visible.empty() ? 0.0 : acc;
        }
        lse[h * s.nq + qb + r] = visible.empty() ? -std::numeric_limits<double>::infinity() : mx + std::log(sum);
      }
    }
  }
}

}  // namespace longctx::testing
