// Why: the model-level context-parallel attention (model/context_parallel_
// attention.h) must make a C-way split of a layer's attention equal the
// unsplit layer, forward and backward, with every K/V byte that crosses
// ranks accounted for: a full layer fetches the visible part of the earlier
// chunks other ranks hold, a sliding-window layer only the halo (the w - 1
// keys before each chunk, where another rank holds them). Checked with the
// in-process exchange on fresh random packed rows, the zig-zag split of
// data/context_split, C = 2 and 4, against one full attention call, and the
// byte counts against a token-by-token count of what each rank's queries see.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "data/context_split.h"
#include "gtest/gtest.h"
#include "kernels/backend.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/ops.h"
#include "model/context_parallel_attention.h"
#include "tests/support/op_test_util.h"
#include "tests/support/test_seed.h"

namespace longctx {
namespace {

struct Case {
  std::string name;
  int cp = 2, chunk_len = 72, window = 0;
  uint32_t seed = 1;
  friend void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }
};

std::vector<int32_t> RandomDocuments(int t, int chunk_len, std::mt19937& rng) {
  std::vector<int32_t> cu = {0};
  std::uniform_real_distribution<double> u(0, 1);
  while (cu.back() < t) {
    const int len = u(rng) < 0.4 ? 1 + static_cast<int>(u(rng) * chunk_len / 4)
                                 : chunk_len / 2 + static_cast<int>(u(rng) * 3 * chunk_len);
    cu.push_back(std::min(t, cu.back() + len));
  }
  return cu;
}

double RelErr(const std::vector<double>& a, const std::vector<double>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num = std::max(num, std::abs(a[i] - b[i]));
    den = std::max(den, std::abs(b[i]));
  }
  return num / std::max(den, 1e-300);
}

void CheckCase(const Case& c) {
  std::mt19937 rng(test::FreshSeed(c.seed));
  const int64_t L = c.chunk_len, t = 2 * c.cp * L, h = 4, hkv = 2, d = 16;
  const std::vector<int32_t> cu = RandomDocuments(static_cast<int>(t), c.chunk_len, rng);
  auto normal = [&](int64_t n) { return op_test::RandomNormalIn<double>(n, rng); };
  std::vector<double> q = normal(t * h * d), k = normal(t * hkv * d), v = normal(t * hkv * d), g = normal(t * h * d);
  std::unique_ptr<Backend> be = MakeCpuBackend();
  // The unsplit layer.
  std::vector<double> o(t * h * d), lse(h * t), dq(q.size()), dk(k.size()), dv(v.size());
  std::vector<int32_t> cu_copy = cu;
  AttentionParams p;
  p.q = Tensor(q.data(), DType::kF64, {t, h, d});
  p.k = Tensor(k.data(), DType::kF64, {t, hkv, d});
  p.v = Tensor(v.data(), DType::kF64, {t, hkv, d});
  p.o = Tensor(o.data(), DType::kF64, {t, h, d});
  p.lse = Tensor(lse.data(), DType::kF64, {h, t});
  p.cu_seqlens = Tensor(cu_copy.data(), DType::kI32, {static_cast<int64_t>(cu.size())});
  p.window = c.window;
  be->AttentionForward(p);
  p.d_o = Tensor(g.data(), DType::kF64, {t, h, d});
  p.dq = Tensor(dq.data(), DType::kF64, {t, h, d});
  p.dk = Tensor(dk.data(), DType::kF64, {t, hkv, d});
  p.dv = Tensor(dv.data(), DType::kF64, {t, hkv, d});
  be->AttentionBackward(p);

  // The split: each rank's arrays gathered from the row, chunk by chunk.
  absl::StatusOr<ContextAssignment> a = ZigZagAssignment(static_cast<int32_t>(t), c.cp);
  ASSERT_TRUE(a.ok());
  ContextLayout layout;
  layout.chunk_len = L;
  layout.chunks_of_rank = a->chunks_of_rank;
  ASSERT_TRUE(layout.Validate().ok());
  struct Rank {
    std::vector<double> q, k, v, g, o, lse, dq, dk, dv;
  };
  std::vector<Rank> ranks(c.cp);
  auto gather = [&](const std::vector<double>& row, int rank, int64_t width) {
    std::vector<double> out;
    for (int32_t ch : layout.chunks_of_rank[rank])
      out.insert(out.end(), row.begin() + ch * L * width, row.begin() + (ch + 1) * L * width);
    return out;
  };
  InProcessKvExchange exchange(be.get(), &layout);
  const int64_t n = 2 * L;  // tokens per rank
  for (int r = 0; r < c.cp; ++r) {
    Rank& x = ranks[r];
    x.q = gather(q, r, h * d);
    x.k = gather(k, r, hkv * d);
    x.v = gather(v, r, hkv * d);
    x.g = gather(g, r, h * d);
    x.o.assign(n * h * d, 0);
    x.lse.assign(h * n, 0);
    x.dq.assign(n * h * d, 0);
    x.dk.assign(n * hkv * d, 0);  // zeroed before any rank's backward
    x.dv.assign(n * hkv * d, 0);
    exchange.Register(r, Tensor(x.k.data(), DType::kF64, {n, hkv, d}), Tensor(x.v.data(), DType::kF64, {n, hkv, d}),
                      Tensor(x.dk.data(), DType::kF64, {n, hkv, d}), Tensor(x.dv.data(), DType::kF64, {n, hkv, d}));
  }
  auto args = [&](int r) {
    Rank& x = ranks[r];
    ContextAttentionArgs ca;
    ca.rank = r;
    ca.layout = &layout;
    ca.row_cu_seqlens = cu;
    ca.window = c.window;
    ca.q = Tensor(x.q.data(), DType::kF64, {n, h, d});
    ca.k = Tensor(x.k.data(), DType::kF64, {n, hkv, d});
    ca.v = Tensor(x.v.data(), DType::kF64, {n, hkv, d});
    ca.o = Tensor(x.o.data(), DType::kF64, {n, h, d});
    ca.lse = Tensor(x.lse.data(), DType::kF64, {h, n});
    return ca;
  };
  ContextParallelAttention cpa(be.get(), DType::kF64);
  std::vector<int64_t> fwd_bytes(c.cp);
  for (int r = 0; r < c.cp; ++r) {
    ContextAttentionStats st;
    ASSERT_TRUE(cpa.Forward(args(r), exchange, &st).ok());
    fwd_bytes[r] = exchange.bytes_received(r);
    EXPECT_EQ(fwd_bytes[r], st.keys_fetched * 2 * hkv * d * 8);
    // Independently: each own chunk's queries see, before the chunk, the
    // keys [max(doc start, q0 - w + 1), q0) of the document holding q0; the
    // ones another rank holds are fetched, once per chunk.
    int64_t want = 0;
    for (int32_t ch : layout.chunks_of_rank[r]) {
      const int64_t q0 = ch * L;
      int64_t ds = 0;
      for (size_t y = 0; y + 1 < cu.size(); ++y)
        if (cu[y] <= q0 && q0 < cu[y + 1]) ds = cu[y];
      const int64_t from = c.window > 0 ? std::max(ds, q0 - c.window + 1) : ds;
      for (int64_t j = from; j < q0; ++j) want += layout.OwnerOf(j / L) != r;
    }
    EXPECT_EQ(st.keys_fetched, want) << c.name << " rank " << r;
    if (c.window > 0) {
      EXPECT_LE(st.keys_fetched, 2 * (c.window - 1)) << "a window layer fetches only halos";
    }
  }
  exchange.ResetCounts();
  for (int r = 0; r < c.cp; ++r) {
    Rank& x = ranks[r];
    ASSERT_TRUE(cpa.Backward(args(r), Tensor(x.g.data(), DType::kF64, {n, h, d}),
                             Tensor(x.dq.data(), DType::kF64, {n, h, d}), Tensor(x.dk.data(), DType::kF64, {n, hkv, d}),
                             Tensor(x.dv.data(), DType::kF64, {n, hkv, d}), exchange)
                    .ok());
    // The backward fetches the same keys again and returns their gradients.
    EXPECT_EQ(exchange.bytes_received(r), fwd_bytes[r]);
    EXPECT_EQ(exchange.bytes_returned(r), fwd_bytes[r]);
  }
  std::vector<double> o2, lse2(h * t), dq2, dk2, dv2;
  for (int64_t ch = 0; ch < 2 * c.cp; ++ch) {
    const int r = layout.OwnerOf(ch);
    const int64_t lr = layout.LocalRow(r, ch * L);
    const Rank& x = ranks[r];
    o2.insert(o2.end(), x.o.begin() + lr * h * d, x.o.begin() + (lr + L) * h * d);
    dq2.insert(dq2.end(), x.dq.begin() + lr * h * d, x.dq.begin() + (lr + L) * h * d);
    dk2.insert(dk2.end(), x.dk.begin() + lr * hkv * d, x.dk.begin() + (lr + L) * hkv * d);
    dv2.insert(dv2.end(), x.dv.begin() + lr * hkv * d, x.dv.begin() + (lr + L) * hkv * d);
    for (int64_t hh = 0; hh < h; ++hh)
      std::copy_n(x.lse.begin() + hh * n + lr, L, lse2.begin() + hh * t + ch * L);
  }
  EXPECT_LT(RelErr(o2, o), 1e-12) << c.name;
  EXPECT_LT(RelErr(lse2, lse), 1e-12) << c.name;
  EXPECT_LT(RelErr(dq2, dq), 1e-12) << c.name;
  EXPECT_LT(RelErr(dk2, dk), 1e-12) << c.name;
  EXPECT_LT(RelErr(dv2, dv), 1e-12) << c.name;
}

class ContextParallelAttentionTest : public ::testing::TestWithParam<Case> {};
TEST_P(ContextParallelAttentionTest, SplitLayerEqualsUnsplit) { CheckCase(GetParam()); }
INSTANTIATE_TEST_SUITE_P(Cases, ContextParallelAttentionTest,
                         ::testing::Values(Case{"C2Full", 2, 72, 0, 1}, Case{"C4Full", 4, 72, 0, 2},
                                           Case{"C2WindowSmall", 2, 72, 25, 3}, Case{"C4WindowSmall", 4, 72, 25, 4},
                                           Case{"C2WindowLarge", 2, 72, 160, 5}, Case{"C4WindowLarge", 4, 72, 160, 6}),
                         [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

TEST(ContextParallelAttention, BadLayoutIsRefused) {
  ContextLayout layout;
  layout.chunk_len = 8;
  layout.chunks_of_rank = {{0, 3}, {1, 3}};
  EXPECT_FALSE(layout.Validate().ok());
  layout.chunks_of_rank = {{0, 3}, {2, 1}};
  EXPECT_FALSE(layout.Validate().ok());
}

}  // namespace
}  // namespace longctx
