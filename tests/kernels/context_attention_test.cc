// Why: context-parallel attention is only right if, for every layer kind,
// the chunked computation — each rank's query chunks against the key blocks
// they need (kernels/context_attention.h: offset-aligned block calls),
// merged by log-sum-exp, and the block backwards given the merged (o, lse)
// summed back to the owners of dQ, dK, dV — equals one full attention call
// over the row. Checked here on fresh random packed rows (documents that span
// chunks and ranks, short documents inside a chunk) with the zig-zag split of
// data/context_split for C = 2 and 4, for full RoPE, sliding windows smaller
// and larger than a chunk, and NoPE, in F32 and F64, with GQA; the block
// backward against central differences of the merged output; and, for the
// sliding-window kind, that the blocks a chunk needs from earlier chunks are
// the w - 1 keys before it (the halo) and nothing else, with their bytes,
// cross-checked against data/context_split's ContextKeysToReceive.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "base/log.h"
#include "data/context_split.h"
#include "gtest/gtest.h"
#include "kernels/backend.h"
#include "kernels/context_attention.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/ops.h"
#include "tests/support/finite_diff.h"
#include "tests/support/op_test_util.h"
#include "tests/support/test_seed.h"

namespace longctx {
namespace {

using op_test::DTypeOf;

enum class Kind { kRopeFull, kRopeWindow, kNopeFull };

struct Case {
  std::string name;
  Kind kind = Kind::kRopeFull;
  int cp = 2;
  int chunk_len = 80;  // tokens per chunk (2C chunks a row)
  int window = 0;      // kRopeWindow only
  int heads = 4, kv_heads = 2, head_dim = 16;
  uint32_t seed = 1;
  friend void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }
};

// A packed row of t tokens: long documents (spanning chunks, sometimes
// ranks) mixed with short ones (inside a chunk), one boundary forced at a
// chunk start (so some chunk's earlier blocks are all skipped).
std::vector<int32_t> RandomDocuments(int t, int chunk_len, std::mt19937& rng) {
  std::vector<int32_t> cu = {0};
  std::uniform_real_distribution<double> u(0, 1);
  const int forced = 3 * chunk_len;
  while (cu.back() < t) {
    int len = u(rng) < 0.45 ? 1 + static_cast<int>(u(rng) * chunk_len / 4)
                            : chunk_len / 2 + static_cast<int>(u(rng) * 2.5 * chunk_len);
    const int at = cu.back();
    if (at < forced && at + len > forced) len = forced - at;
    cu.push_back(std::min(t, at + len));
  }
  return cu;
}

std::vector<int32_t> PositionsOf(const std::vector<int32_t>& cu) {
  std::vector<int32_t> pos(cu.back());
  for (size_t d = 0; d + 1 < cu.size(); ++d)
    for (int32_t i = cu[d]; i < cu[d + 1]; ++i) pos[i] = i - cu[d];
  return pos;
}

template <class T>
std::vector<T> Normal(int64_t n, std::mt19937& rng) {
  std::vector<double> x = op_test::RandomNormalIn<T>(n, rng);
  return std::vector<T>(x.begin(), x.end());
}

template <class T>
Tensor T3(std::vector<T>& v, int64_t n, int64_t h, int64_t d) {
  return Tensor(v.data(), DTypeOf<T>(), {n, h, d});
}

// Max |a - b| over max |b| (b the reference).
template <class T>
double RelErr(const std::vector<T>& a, const std::vector<T>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num = std::max(num, std::abs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
    den = std::max(den, std::abs(static_cast<double>(b[i])));
  }
  return num / std::max(den, 1e-300);
}

// The shapes of one row: T tokens, heads, kv heads, head dim, window.
struct Row {
  int64_t t = 0, h = 0, hkv = 0, d = 0;
  int window = 0;
  std::vector<int32_t> cu;
};

// What a chunked run reports besides its outputs.
struct Traffic {
  int64_t blocks = 0, skipped = 0;
  // Per rank: the key ranges of its blocks that other ranks hold (a range
  // two of its chunks need appears twice: it is received once).
  std::vector<std::vector<std::pair<int64_t, int64_t>>> received;
  // The keys a rank receives: the union of its ranges.
  int64_t ReceivedKeys(int rank) const {
    std::vector<std::pair<int64_t, int64_t>> r = received[rank];
    std::sort(r.begin(), r.end());
    int64_t keys = 0, covered = INT64_MIN;
    for (auto [b, e] : r) {
      b = std::max(b, covered);
      if (e > b) keys += e - b;
      covered = std::max(covered, e);
    }
    return keys;
  }
};

// The full attention over the row: o, lse, and with d_o the gradients.
template <class T>
void FullAttention(Backend& be, const Row& r, std::vector<T>& q, std::vector<T>& k, std::vector<T>& v,
                   std::vector<T>& o, std::vector<T>& lse, std::vector<T>* d_o = nullptr, std::vector<T>* dq = nullptr,
                   std::vector<T>* dk = nullptr, std::vector<T>* dv = nullptr) {
  std::vector<int32_t> cu = r.cu;
  o.assign(r.t * r.h * r.d, T(0));
  lse.assign(r.h * r.t, T(0));
  AttentionParams p;
  p.q = T3(q, r.t, r.h, r.d);
  p.k = T3(k, r.t, r.hkv, r.d);
  p.v = T3(v, r.t, r.hkv, r.d);
  p.o = T3(o, r.t, r.h, r.d);
  p.lse = Tensor(lse.data(), DTypeOf<T>(), {r.h, r.t});
  p.cu_seqlens = Tensor(cu.data(), DType::kI32, {static_cast<int64_t>(cu.size())});
  p.window = r.window;
  be.AttentionForward(p);
  if (d_o == nullptr) return;
  dq->assign(q.size(), T(0));
  dk->assign(k.size(), T(0));
  dv->assign(v.size(), T(0));
  p.d_o = T3(*d_o, r.t, r.h, r.d);
  p.dq = T3(*dq, r.t, r.h, r.d);
  p.dk = T3(*dk, r.t, r.hkv, r.d);
  p.dv = T3(*dv, r.t, r.hkv, r.d);
  be.AttentionBackward(p);
}

// The context-parallel computation of the same row in one process: rank r
// holds the chunks `assignment` gives it; each query chunk runs one block
// per earlier-or-same chunk that is not skipped, its K, V rows taken from the
// owner's (here: the row's) buffers, and merges them. o, lse come back in
// row order. With d_o: each block's backward on the merged (o, lse), dQ
// summed per chunk, dK, dV summed into the owner's rows.
template <class T>
void ChunkedAttention(Backend& be, const Row& r, const ContextAssignment& a, std::vector<T>& q, std::vector<T>& k,
                      std::vector<T>& v, std::vector<T>& o, std::vector<T>& lse, Traffic* traffic,
                      std::vector<T>* d_o = nullptr, std::vector<T>* dq = nullptr, std::vector<T>* dk = nullptr,
                      std::vector<T>* dv = nullptr) {
  const int64_t L = r.t / a.num_chunks, h = r.h, hkv = r.hkv, d = r.d;
  o.assign(r.t * h * d, T(0));
  lse.assign(h * r.t, T(0));
  if (d_o != nullptr) {
    dq->assign(q.size(), T(0));
    dk->assign(k.size(), T(0));
    dv->assign(v.size(), T(0));
  }
  Traffic local;
  local.received.resize(a.cp);
  const Tensor qt = T3(q, r.t, h, d), kt = T3(k, r.t, hkv, d), vt = T3(v, r.t, hkv, d);
  for (int rank = 0; rank < a.cp; ++rank)
    for (int32_t c : a.chunks_of_rank[rank]) {
      const int64_t q0 = c * L, q1 = q0 + L;
      std::vector<ContextBlockPlan> plans;
      for (int32_t kc = 0; kc <= c; ++kc) {
        absl::StatusOr<ContextBlockPlan> plan = PlanContextBlock(r.cu, q0, q1, kc * L, (kc + 1) * L, r.window);
        ASSERT_TRUE(plan.ok()) << plan.status();
        ++local.blocks;
        if (plan->skipped()) {
          ++local.skipped;
          continue;
        }
        if (a.OwnerOf(kc) != rank) local.received[rank].push_back({plan->k_begin, plan->k_end});
        plans.push_back(*std::move(plan));
      }
      ASSERT_FALSE(plans.empty()) << "the diagonal block is never skipped";
      // Per block (o_b, lse_b), then the merge into the chunk's rows.
      std::vector<std::vector<T>> ob(plans.size()), lb(plans.size());
      std::vector<Tensor> os, lses;
      for (size_t b = 0; b < plans.size(); ++b) {
        ob[b].assign(L * h * d, T(-7));
        lb[b].assign(h * L, T(-7));
        os.push_back(T3(ob[b], L, h, d));
        lses.push_back(Tensor(lb[b].data(), DTypeOf<T>(), {h, L}));
        const absl::Status s = ContextBlockForward(be, plans[b], qt.Rows(q0, q1),
                                                   kt.Rows(plans[b].k_begin, plans[b].k_end),
                                                   vt.Rows(plans[b].k_begin, plans[b].k_end), os[b], lses[b]);
        ASSERT_TRUE(s.ok()) << s;
      }
      std::vector<T> oc(L * h * d), lc(h * L);
      const Tensor oct = T3(oc, L, h, d), lct(lc.data(), DTypeOf<T>(), {h, L});
      ASSERT_TRUE(MergeAttentionParts(be, os, lses, oct, lct).ok());
      std::copy(oc.begin(), oc.end(), o.begin() + q0 * h * d);
      for (int64_t x = 0; x < h; ++x) std::copy_n(lc.begin() + x * L, L, lse.begin() + x * r.t + q0);
      if (d_o == nullptr) continue;
      std::vector<T> dqb(L * h * d);
      for (const ContextBlockPlan& plan : plans) {
        std::vector<T> dkb(plan.num_keys() * hkv * d), dvb(dkb.size());
        const absl::Status s = ContextBlockBackward(
            be, plan, qt.Rows(q0, q1), kt.Rows(plan.k_begin, plan.k_end), vt.Rows(plan.k_begin, plan.k_end), oct, lct,
            T3(*d_o, r.t, h, d).Rows(q0, q1), T3(dqb, L, h, d), T3(dkb, plan.num_keys(), hkv, d),
            T3(dvb, plan.num_keys(), hkv, d));
        ASSERT_TRUE(s.ok()) << s;
        for (int64_t i = 0; i < L * h * d; ++i) (*dq)[q0 * h * d + i] += dqb[i];
        for (size_t i = 0; i < dkb.size(); ++i) {
          (*dk)[plan.k_begin * hkv * d + i] += dkb[i];  // back to the keys' owner
          (*dv)[plan.k_begin * hkv * d + i] += dvb[i];
        }
      }
    }
  if (traffic != nullptr) *traffic = std::move(local);
}

// Rotates q, k by per-document positions (the RoPE kinds): each rank
// rotates its own tokens before any exchange, so the keys it sends are
// post-RoPE; here the whole row at once, which is the same per token.
template <class T>
void RotateRow(Backend& be, const Row& r, std::vector<T>& q, std::vector<T>& k) {
  std::vector<int32_t> pos = PositionsOf(r.cu);
  for (auto [x, heads] : {std::pair{&q, r.h}, std::pair{&k, r.hkv}}) {
    RopeParams p;
    p.x = T3(*x, r.t, heads, r.d);
    p.positions = Tensor(pos.data(), DType::kI32, {r.t});
    ASSERT_TRUE(p.Validate().ok());
    be.Rope(p);
  }
}

template <class T>
void CheckCase(const Case& c) {
  std::mt19937 rng(test::FreshSeed(c.seed));
  Row r;
  r.t = 2 * c.cp * c.chunk_len;
  r.h = c.heads;
  r.hkv = c.kv_heads;
  r.d = c.head_dim;
  r.window = c.kind == Kind::kRopeWindow ? c.window : 0;
  r.cu = RandomDocuments(static_cast<int>(r.t), c.chunk_len, rng);
  std::vector<T> q = Normal<T>(r.t * r.h * r.d, rng), k = Normal<T>(r.t * r.hkv * r.d, rng),
                 v = Normal<T>(r.t * r.hkv * r.d, rng), d_o = Normal<T>(r.t * r.h * r.d, rng);
  std::unique_ptr<Backend> be = MakeCpuBackend();
  if (c.kind != Kind::kNopeFull) RotateRow(*be, r, q, k);
  std::vector<T> o, lse, dq, dk, dv, o2, lse2, dq2, dk2, dv2;
  FullAttention(*be, r, q, k, v, o, lse, &d_o, &dq, &dk, &dv);
  absl::StatusOr<ContextAssignment> a = ZigZagAssignment(static_cast<int32_t>(r.t), c.cp);
  ASSERT_TRUE(a.ok()) << a.status();
  Traffic traffic;
  ChunkedAttention(*be, r, *a, q, k, v, o2, lse2, &traffic, &d_o, &dq2, &dk2, &dv2);
  const double tol = sizeof(T) == 4 ? 1e-5 : 1e-12;
  EXPECT_LT(RelErr(o2, o), tol) << c.name << " o";
  EXPECT_LT(RelErr(lse2, lse), tol) << c.name << " lse";
  EXPECT_LT(RelErr(dq2, dq), tol) << c.name << " dq";
  EXPECT_LT(RelErr(dk2, dk), tol) << c.name << " dk";
  EXPECT_LT(RelErr(dv2, dv), tol) << c.name << " dv";
  // The rows are what the case is about: documents across chunk edges, and
  // some block skipped.
  EXPECT_GT(traffic.skipped, 0) << c.name;
  // What each rank receives is exactly what data/context_split says its
  // queries need from other ranks (for a full layer, the earlier part of its
  // documents; for a sliding window, the halo).
  for (int rank = 0; rank < c.cp; ++rank) {
    PackedBatch batch;
    batch.batch_size = 1;
    batch.seq_len = static_cast<int32_t>(r.t);
    batch.inputs.assign(r.t, 1);
    batch.targets.assign(r.t, 1);
    batch.positions = PositionsOf(r.cu);
    batch.cu_seqlens = r.cu;
    absl::StatusOr<ContextShard> shard = SplitRowForContext(batch, 0, *a, rank);
    ASSERT_TRUE(shard.ok()) << shard.status();
    EXPECT_EQ(traffic.ReceivedKeys(rank), ContextKeysToReceiveCount(*shard, r.window)) << c.name << " rank " << rank;
  }
}

std::vector<Case> AllCases() {
  std::vector<Case> cs;
  for (int cp : {2, 4}) {
    const std::string cps = "C" + std::to_string(cp);
    cs.push_back({cps + "RopeFull", Kind::kRopeFull, cp, 80, 0, 4, 2, 16, 10u + cp});
    cs.push_back({cps + "NopeFull", Kind::kNopeFull, cp, 80, 0, 4, 1, 16, 20u + cp});
    cs.push_back({cps + "WindowSmallerThanChunk", Kind::kRopeWindow, cp, 80, 29, 4, 2, 16, 30u + cp});
    cs.push_back({cps + "WindowLargerThanChunk", Kind::kRopeWindow, cp, 80, 200, 4, 2, 16, 40u + cp});
    cs.push_back({cps + "MultiTileChunks", Kind::kRopeFull, cp, 150, 0, 2, 2, 32, 50u + cp});
  }
  cs.push_back({"C2WindowOfOne", Kind::kRopeWindow, 2, 40, 1, 2, 1, 8, 60});
  return cs;
}

class ContextAttentionTest : public ::testing::TestWithParam<Case> {};
TEST_P(ContextAttentionTest, F32ChunkedEqualsFull) { CheckCase<float>(GetParam()); }
TEST_P(ContextAttentionTest, F64ChunkedEqualsFull) { CheckCase<double>(GetParam()); }
INSTANTIATE_TEST_SUITE_P(Cases, ContextAttentionTest, ::testing::ValuesIn(AllCases()),
                         [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

// The sliding-window kind's block list: a chunk needs, from earlier chunks,
// only the w - 1 keys before it (fewer where its first document starts
// later), as blocks inside [q0 - w + 1, q0); every other earlier block is
// skipped. Its bytes are those keys' K and V, nothing more.
TEST(ContextAttention, SlidingWindowNeedsOnlyTheHalo) {
  std::mt19937 rng(test::FreshSeed(70));
  for (int cp : {2, 4})
    for (int window : {1, 17, 64, 65, 150}) {
      const int L = 64, t = 2 * cp * L;
      const std::vector<int32_t> cu = RandomDocuments(t, L, rng);
      for (int c = 0; c < 2 * cp; ++c) {
        const int64_t q0 = c * L;
        int64_t ds = 0;  // start of the document holding q0
        for (size_t x = 0; x + 1 < cu.size(); ++x)
          if (cu[x] <= q0 && q0 < cu[x + 1]) ds = cu[x];
        const int64_t halo = std::min<int64_t>(window - 1, q0 - ds);
        int64_t keys = 0, bytes = 0;
        for (int kc = 0; kc < c; ++kc) {
          absl::StatusOr<ContextBlockPlan> p = PlanContextBlock(cu, q0, q0 + L, kc * L, (kc + 1) * L, window);
          ASSERT_TRUE(p.ok()) << p.status();
          if (p->skipped()) continue;
          EXPECT_GE(p->k_begin, q0 - window + 1) << "window " << window << " chunk " << c << " block " << kc;
          EXPECT_GE(p->k_begin, ds);
          EXPECT_LE(p->k_end, q0);
          keys += p->num_keys();
          bytes += ContextBlockKvBytes(*p, 2, 16, 4);
        }
        EXPECT_EQ(keys, halo) << "window " << window << " chunk " << c;
        EXPECT_EQ(bytes, halo * 2 * 2 * 16 * 4);
      }
    }
}

// Exact block lists on a hand-made row: documents [0, 50) [50, 53) [53, 200)
// [200, 256), chunks of 64.
TEST(ContextAttention, PlansOnAKnownRow) {
  const std::vector<int32_t> cu = {0, 50, 53, 200, 256};
  // Chunk 3 [192, 256): document [53, 200) continues into it.
  auto plan = [&](int64_t q0, int64_t k0, int window) {
    absl::StatusOr<ContextBlockPlan> p = PlanContextBlock(cu, q0, q0 + 64, k0, k0 + 64, window);
    CHECK(p.ok()) << p.status();
    return *p;
  };
  ContextBlockPlan p = plan(192, 0, 0);  // keys [53, 64) of the continuing document
  EXPECT_EQ(p.k_begin, 53);
  EXPECT_EQ(p.k_end, 64);
  EXPECT_EQ(p.cu_q, (std::vector<int32_t>{0, 8, 64}));
  EXPECT_EQ(p.cu_k, (std::vector<int32_t>{0, 11, 11}));
  EXPECT_EQ(p.query_offset(), 192 - 53);
  EXPECT_TRUE(plan(192, 0, 100).skipped());      // beyond the window
  EXPECT_EQ(plan(192, 128, 10).k_begin, 183);    // the 9 keys before the chunk
  EXPECT_EQ(plan(192, 128, 10).k_end, 192);
  EXPECT_TRUE(plan(64, 0, 0).skipped() == false);  // [53, 64) again, for chunk 1
  // Chunk 1 [64, 128) against chunk 0 under a window of 12: keys [53, 64).
  EXPECT_EQ(plan(64, 0, 12).k_begin, 53);
  // A document starting at the chunk: nothing earlier is seen.
  const std::vector<int32_t> cu2 = {0, 64, 128};
  EXPECT_TRUE(PlanContextBlock(cu2, 64, 128, 0, 64, 0)->skipped());
  // Future keys are never seen.
  EXPECT_TRUE(PlanContextBlock(cu2, 0, 64, 64, 128, 0)->skipped());
  // Bad input says what and where.
  EXPECT_FALSE(PlanContextBlock(cu, 0, 300, 0, 64, 0).ok());
  EXPECT_FALSE(PlanContextBlock(cu, 0, 64, 0, 64, -1).ok());
  EXPECT_FALSE(PlanContextBlock(std::vector<int32_t>{1, 5}, 0, 4, 0, 4, 0).ok());
}

// The block backward against central differences: the loss sum(G * o) of
// the chunked, merged output, as a function of the whole row's q, k, v
// (every block's contribution to every gradient, including the blocks whose
// keys lie in other chunks), in F64.
void CheckFiniteDifferences(int window) {
  std::mt19937 rng(test::FreshSeed(80 + window));
  Row r;
  r.t = 4 * 12;
  r.h = 2;
  r.hkv = 1;
  r.d = 8;
  r.window = window;
  r.cu = {0, 5, 30, 31, 48};
  std::vector<double> q = Normal<double>(r.t * r.h * r.d, rng), k = Normal<double>(r.t * r.hkv * r.d, rng),
                      v = Normal<double>(r.t * r.hkv * r.d, rng), g = Normal<double>(r.t * r.h * r.d, rng);
  std::unique_ptr<Backend> be = MakeCpuBackend();
  // Hundreds of tiny calls: one thread, so no call waits for a team to start.
  ASSERT_TRUE(be->SetThreads(1).ok());
  absl::StatusOr<ContextAssignment> a = ZigZagAssignment(static_cast<int32_t>(r.t), 2);
  ASSERT_TRUE(a.ok());
  std::vector<double> o, lse, dq, dk, dv;
  ChunkedAttention(*be, r, *a, q, k, v, o, lse, nullptr, &g, &dq, &dk, &dv);
  auto loss = [&] {
    std::vector<double> o1, l1;
    ChunkedAttention(*be, r, *a, q, k, v, o1, l1, nullptr);
    return test::Dot(o1, g);
  };
  for (auto [x, grad, name] : {std::tuple{&q, &dq, "q"}, std::tuple{&k, &dk, "k"}, std::tuple{&v, &dv, "v"}}) {
    const test::GradCheckResult res =
        test::CheckGradient(loss, x->data(), static_cast<int64_t>(x->size()), grad->data());  // every coordinate
    EXPECT_LT(res.max_rel_error, op_test::kGradTol) << name << " window " << window << ": " << res.ToString();
  }
}
TEST(ContextAttention, BackwardMatchesFiniteDifferencesFull) { CheckFiniteDifferences(0); }
TEST(ContextAttention, BackwardMatchesFiniteDifferencesWindow) { CheckFiniteDifferences(7); }

// The offset form is refused where it cannot be right: without the keys'
// own segments.
TEST(ContextAttention, OffsetNeedsKeySegments) {
  std::vector<float> x(8 * 16, 1.f), lse(8, 0.f);
  std::vector<int32_t> cu = {0, 8};
  AttentionParams p;
  p.q = p.k = p.v = p.o = Tensor(x.data(), DType::kF32, {8, 1, 16});
  p.lse = Tensor(lse.data(), DType::kF32, {1, 8});
  p.cu_seqlens = Tensor(cu.data(), DType::kI32, {2});
  p.query_offset_set = true;
  EXPECT_FALSE(p.Validate(false).ok());
  p.query_offset_set = false;
  p.cu_seqlens_k = p.cu_seqlens;
  EXPECT_FALSE(p.Validate(true).ok()) << "cu_seqlens_k alone stays forward-only";
}

}  // namespace
}  // namespace longctx
