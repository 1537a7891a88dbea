// Why: see the header. Literal loops over (segment, head, query, key).
#include "tests/support/explicit_position_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace longctx::testing {

void RotateExplicit(double* x, int rotary_dim, double theta, double m) {
  const int half = rotary_dim / 2;
  for (int p = 0; p < half; ++p) {
    const double a = m * std::pow(theta, -2.0 * p / rotary_dim);
    const double x1 = x[p], x2 = x[p + half];
    x[p] = x1 * std::cos(a) - x2 * std::sin(a);
    x[p + half] = x2 * std::cos(a) + x1 * std::sin(a);
  }
}

void ExplicitPositionAttention(const ExplicitAttentionSpec& s, const std::vector<double>& q,
                               const std::vector<double>& k, const std::vector<double>& v,
                               const std::vector<int32_t>& cu, const PositionFn& position, std::vector<double>* o) {
  const int64_t d = s.head_dim, group = s.heads / s.kv_heads, n = cu.back();
  const double scale = s.scale > 0 ? s.scale : 1.0 / std::sqrt(static_cast<double>(d));
  o->assign(n * s.heads * d, 0.0);
  for (size_t seg = 0; seg + 1 < cu.size(); ++seg) {
    const int64_t b = cu[seg], len = cu[seg + 1] - b;
    for (int64_t h = 0; h < s.heads; ++h) {
      const int64_t g = h / group;
      for (int64_t i = 0; i < len; ++i) {
        std::vector<int64_t> keys, pos;
        std::vector<double> score;
        for (int64_t j = 0; j <= i; ++j) {
          const int64_t p = position(i, j);
          if (p < 0) continue;
          std::vector<double> qr(q.begin() + ((b + i) * s.heads + h) * d, q.begin() + ((b + i) * s.heads + h + 1) * d);
          if (s.rope_dim > 0) RotateExplicit(qr.data(), s.rope_dim, s.theta, static_cast<double>(p));
          const double* kr = k.data() + ((b + j) * s.kv_heads + g) * d;
          double rotated = 0, plain = 0;
          for (int64_t x = 0; x < d; ++x) (x < s.rope_dim ? rotated : plain) += qr[x] * kr[x];
          keys.push_back(j);
          pos.push_back(p);
          score.push_back(scale * (s.table_scale * s.table_scale * rotated + plain));
        }
        if (keys.empty()) continue;
        const double mx = *std::max_element(score.begin(), score.end());
        double sum = 0;
        for (double e : score) sum += std::exp(e - mx);
        double* orow = o->data() + ((b + i) * s.heads + h) * d;
        for (size_t t = 0; t < keys.size(); ++t) {
          const double a = std::exp(score[t] - mx) / sum;
          std::vector<double> vr(v.begin() + ((b + keys[t]) * s.kv_heads + g) * d,
                                 v.begin() + ((b + keys[t]) * s.kv_heads + g + 1) * d);
          if (s.roper_dim > 0) RotateExplicit(vr.data(), s.roper_dim, s.theta, -static_cast<double>(pos[t]));
          for (int64_t x = 0; x < d; ++x) orow[x] += a * vr[x];
        }
      }
    }
  }
}

}  // namespace longctx::testing
