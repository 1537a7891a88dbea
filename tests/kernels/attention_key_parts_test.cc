// Why: the attention backward cuts a (segment, head) item's keys into parts
// when its items hold more than their share of the threads
// (kernels/cpu/attention_driver.h, SegmentKeyParts): dK, dV per part, the
// parts' dQ rows summed after them. These tests check where it cuts, that
// the cut backward matches the double reference and finite differences, and
// that it happens on its own where it should; attention_test.cc runs every
// case with three parts and compares the two drivers at two and three.
#include <omp.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/attention_driver.h"
#include "kernels/cpu/attention_packed_bf16.h"
#include "kernels/cpu/cpu_kernels.h"
#include "tests/support/attention_fixture.h"

namespace longctx {
namespace {

using namespace attention_fixture;  // NOLINT(build/namespaces): Case, Buffers, the checks

// Parts per segment: by each segment's share of the work, so that a single
// long segment, or one long document among short ones, is cut while items
// that fit a thread's share are not; a forced count applies to every segment.
TEST(AttentionKeyParts, SegmentsWithMoreThanAThreadsShareAreCut) {
  auto parts = [](std::vector<int32_t> lens, int heads, int window, int threads, int forced = 0) {
    std::vector<int32_t> cu = {0};
    for (int32_t l : lens) cu.push_back(cu.back() + l);
    cpu::Ctx<float> c;
    c.cu = cu.data();
    c.segments = static_cast<int64_t>(lens.size());
    c.heads = heads;
    c.mask.window = window;
    return cpu::SegmentKeyParts(c, threads, forced);
  };
  using V = std::vector<int>;
  EXPECT_EQ(parts({16384}, 8, 0, 16), V({2}));   // ref-b's 8 heads on 16 threads
  EXPECT_EQ(parts({16384}, 8, 0, 2), V({1}));
  EXPECT_EQ(parts({16384}, 8, 1024, 16), V({2}));
  EXPECT_EQ(parts({16384}, 1, 0, 64), V({cpu::kMaxKeyParts}));
  // Causal work ~ L^2: the 8K document holds 64 / 88 of it, more than its 8
  // items' share of 16 threads; the others fit.
  EXPECT_EQ(parts({8192, 4096, 2048, 2048}, 8, 0, 16), V({2, 1, 1, 1}));
  EXPECT_EQ(parts({8192, 4096, 2048, 2048}, 8, 0, 4), V({1, 1, 1, 1}));
  EXPECT_EQ(parts({2000, 100, 0, 37}, 1, 0, 2), V({2, 1, 1, 1}));  // one head, two threads
  EXPECT_EQ(parts({2000, 100, 0, 37}, 2, 0, 2), V({1, 1, 1, 1}));
  EXPECT_EQ(parts({700, 3}, 4, 0, 1, 3), V({3, 3}));                // forced
}

// The per-segment choice at work: two threads, one head, a long document
// among short ones — the long one is cut in two on its own (no forced count),
// and the results match the double reference (F32, F64) and, on bf16 units,
// the two drivers agree bit for bit.
TEST(AttentionKeyParts, AutoPartsOfOneLongDocumentMatchTheReference) {
  const int saved = omp_get_max_threads();
  omp_set_num_threads(2);
  const Case c{"", {1500, 100, 37, 1}, 1, 1, 32, 0, 0, true, 108};
  CheckBackward<double>(c);
  CheckBackward<float>(c);
  const Case w{"", {1300, 60, 400}, 1, 1, 64, 250, 0, false, 109};
  CheckBackward<double>(w);
  CheckBackward<float>(w);
  // The cut happened: dQ differs (in rounding) from one part's, dK, dV of the
  // short documents are the same (one part each).
  for (const Case* cs : {&c, &w}) {
    const Inputs in = RandomInputs<float>(ShapeOf(*cs), cs->seed);
    Buffers<float> automatic(*cs, in), one(*cs, in);
    one.config.backward_key_parts = 1;
    automatic.Forward();
    automatic.Backward();
    one.Forward();
    one.Backward();
    EXPECT_NE(Buffers<float>::Get(automatic.p.dq), Buffers<float>::Get(one.p.dq)) << "no key parts were made";
    const int64_t long_rows = cs->seqlens[0] * cs->kv_heads * cs->head_dim;
    const std::vector<double> dk_auto = Buffers<float>::Get(automatic.p.dk), dk_one = Buffers<float>::Get(one.p.dk);
    EXPECT_EQ(std::vector<double>(dk_auto.begin() + long_rows, dk_auto.end()),
              std::vector<double>(dk_one.begin() + long_rows, dk_one.end()))
        << "a short document was cut";
  }
  for (bool amx : {false, true}) {
    const cpu::AttentionTileKernels<float>* k = cpu::AttentionTileKernelsBf16(amx);
    if (k == nullptr || amx != (std::string(k->name) == "amx-bf16")) continue;
    for (const Case* cs : {&c, &w}) {
      const Inputs in = RandomInputs<float>(ShapeOf(*cs), cs->seed);
      Buffers<float> generic(*cs, in), packed(*cs, in);
      generic.config.bf16 = packed.config.bf16 = true;
      generic.config.bf16_amx = packed.config.bf16_amx = amx;
      generic.config.bf16_packed = false;
      generic.Forward();
      generic.Backward();
      packed.Forward();
      packed.Backward();
      EXPECT_EQ(Buffers<float>::Get(generic.p.dq), Buffers<float>::Get(packed.p.dq)) << k->name;
      EXPECT_EQ(Buffers<float>::Get(generic.p.dk), Buffers<float>::Get(packed.p.dk)) << k->name;
      EXPECT_EQ(Buffers<float>::Get(generic.p.dv), Buffers<float>::Get(packed.p.dv)) << k->name;
    }
  }
  omp_set_num_threads(saved);
}

// Where a segment is cut: bounds on its 128-key grid, each part about an
// equal share of the work (causal: the first part is the shortest, as its
// keys are seen by the most queries).
TEST(AttentionKeyParts, BoundsOnTheGridWithEqualWork) {
  const int64_t sb = 300, len = 16384, se = sb + len;
  for (int window : {0, 1024}) {
    cpu::Ctx<float> c;
    c.mask.window = window;
    auto work = [&](int64_t k0, int64_t k1) {  // queries seeing each key, summed
      double w = 0;
      for (int64_t j = k0; j < k1; ++j) w += static_cast<double>((window > 0 ? std::min(se, j + window) : se) - j);
      return w;
    };
    const double total = work(sb, se), block = work(sb, sb + 128);  // the first block sees the most queries
    for (int parts : {1, 2, 3, 8}) {
      const std::vector<int64_t> b = cpu::KeyPartBounds(c, sb, se, parts);
      ASSERT_EQ(b.size(), static_cast<size_t>(parts + 1));
      EXPECT_EQ(b.front(), sb);
      EXPECT_EQ(b.back(), se);
      for (int p = 0; p < parts; ++p) {
        EXPECT_LT(b[p], b[p + 1]) << "window " << window << ", " << parts << " parts: part " << p << " empty";
        if (p > 0) {
          EXPECT_EQ((b[p] - sb) % cpu::kKeyPartAlign, 0) << "bound " << p << " off the grid";
        }
        EXPECT_NEAR(work(b[p], b[p + 1]), total / parts, block)
            << "window " << window << ", " << parts << " parts: part " << p << " [" << b[p] << ", " << b[p + 1] << ")";
      }
    }
    if (window == 0) {  // causal halves of the work: keys [0, L (1 - 1/sqrt 2)) and the rest
      const std::vector<int64_t> b = cpu::KeyPartBounds(c, sb, se, 2);
      EXPECT_NEAR(static_cast<double>(b[1] - sb), len * (1 - 1 / std::sqrt(2.0)), 128);
    }
  }
  // A segment shorter than the grid step has one non-empty part.
  cpu::Ctx<float> c;
  const std::vector<int64_t> b = cpu::KeyPartBounds(c, 0, 100, 3);
  EXPECT_EQ(b, (std::vector<int64_t>{0, 100, 100, 100}));
}

// The backward with key parts: a 700-token causal segment cut into four
// parts (128-key steps) and a window over documents cut into three.
TEST(AttentionFiniteDifferences, FullCausalKeyParts) {
  CheckFiniteDifferences({"", {700}, 2, 1, 16, 0, 0, false, 106}, 4);
}
TEST(AttentionFiniteDifferences, WindowDocumentsKeyParts) {
  CheckFiniteDifferences({"", {300, 1, 410}, 2, 2, 16, 150, 0, true, 107}, 3);
}

}  // namespace
}  // namespace longctx
