// Why: rotary embeddings on the CPU, in place on [N, H, head_dim] (row-strided,
// so q and k can be column slices of the fused qkv projection). cos/sin depend
// only on (position, pair) and are shared by every head of a token, so they are
// computed once per token, in double. Exact sincos for every (token, pair) would
// cost more than the rotations themselves; consecutive positions (the common
// case: a packed segment is 0, 1, 2, ...) instead advance the previous token's
// cos/sin by angle addition, re-seeded exactly at every block of kBlockTokens
// tokens and at every position jump (segment start), so the error stays at a
// few ulps of double and the tiling (hence the result) is thread-count
// independent.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/dispatch.h"
#include "kernels/math/rope.h"

namespace longctx::cpu {
namespace {

constexpr int64_t kBlockTokens = 64;
constexpr int64_t kParallelMinElems = 1 << 14;

template <class T>
void RopeImpl(const RopeParams& p) {
  const int64_t n = p.x.shape[0], heads = p.x.shape[1], head_dim = p.x.shape[2];
  const int rd = p.rotary_dim == 0 ? static_cast<int>(head_dim) : p.rotary_dim;
  const int half = rd / 2;
  if (n == 0 || heads == 0 || half == 0) return;
  const int64_t xs = p.x.stride0();
  const int32_t* positions = p.positions.as<int32_t>();

  // Per pair: frequency, and the rotation by one position step.
  std::vector<double> inv_freq(half), step_c(half), step_s(half);
  for (int j = 0; j < half; ++j) {
    inv_freq[j] = math::RopeInvFreq(j, rd, p.theta);
    const double step = math::RopeAngle(1, inv_freq[j], p.position_scale, p.direction);
    step_c[j] = std::cos(step);
    step_s[j] = std::sin(step);
  }

  const int64_t blocks = (n + kBlockTokens - 1) / kBlockTokens;
#pragma omp parallel if (n * heads * rd >= kParallelMinElems && blocks > 1)
  {
    std::vector<double> cd(half), sd(half);
    std::vector<T> ct(half), st(half);
#pragma omp for schedule(static)
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t t0 = b * kBlockTokens, t1 = std::min(n, t0 + kBlockTokens);
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t pos = positions[t];
        if (t == t0 || pos != static_cast<int64_t>(positions[t - 1]) + 1) {
          for (int j = 0; j < half; ++j) {
            const double a = math::RopeAngle(pos, inv_freq[j], p.position_scale, p.direction);
            cd[j] = std::cos(a);
            sd[j] = std::sin(a);
          }
        } else {
          for (int j = 0; j < half; ++j) math::RopeAdvance(cd[j], sd[j], step_c[j], step_s[j]);
        }
        for (int j = 0; j < half; ++j) {
          ct[j] = static_cast<T>(cd[j]);
          st[j] = static_cast<T>(sd[j]);
        }
        const T* c = ct.data();
        const T* s = st.data();
        T* row = p.x.as<T>() + t * xs;
        for (int64_t h = 0; h < heads; ++h) {
          T* x1 = row + h * head_dim;
          T* x2 = x1 + half;
          for (int j = 0; j < half; ++j) math::RopeRotate(x1[j], x2[j], c[j], s[j]);
        }
      }
    }
  }
}

}  // namespace

void Rope(const RopeParams& p) {
  DispatchFloat(p.x.dtype, "Rope", [&](auto tag) { RopeImpl<decltype(tag)>(p); });
}

}  // namespace longctx::cpu
