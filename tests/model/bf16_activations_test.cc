// Why: bf16 activation storage (docs/BF16_ACTIVATIONS.md) must halve what the
// stored layers keep without changing anything the bf16 step did not already
// round: the conversion must be exactly the bf16 GEMM operand rounding
// (math::F32ToBf16Bits, both Copy paths, tricky values included), storing only
// the tensors the backward reads through bf16 products (xn1, xn2, h) must give
// the fp32 storage's loss and gradients bit for bit on both bf16 GEMM paths,
// the full set must stay within bf16's rounding of them, the arena must be what
// the plan says, and the refused combinations must say why. Recomputation and
// FSDP (one rank) must compose with it.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/backend.h"
#include "kernels/backend_registry.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/math/bf16.h"
#include "launch/communicator.h"
#include "model/config.h"
#include "model/plan.h"
#include "model/transformer.h"
#include "tests/support/small_model.h"
#include "tests/support/test_seed.h"
#include "train/config_loader.h"
#include "train/parallel/parallel_strategy.h"

namespace longctx {
namespace {

float FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// An independent round-to-nearest-even: the two bf16 neighbours of a finite f
// (truncation and the next bf16 away from zero), the nearer in exact double
// arithmetic, ties to the even significand; NaN -> quiet NaN with sign and the
// high payload bits; beyond the largest bf16 by half an ulp or more -> inf.
uint16_t ReferenceRne(float f) {
  const uint32_t u = Bits(f);
  if (std::isnan(f)) return static_cast<uint16_t>((u >> 16) | 0x40);
  if (std::isinf(f)) return static_cast<uint16_t>(u >> 16);
  const uint32_t lo = u & 0xffff0000u;          // toward zero
  const uint32_t hi = lo + 0x10000u;            // away from zero (0x7f80 after the largest finite: inf)
  const double a = std::fabs(static_cast<double>(FromBits(lo)));
  const double x = std::fabs(static_cast<double>(f));
  const double b = (hi & 0x7fffffffu) == 0x7f800000u ? std::ldexp(1.0, 128) : std::fabs(static_cast<double>(FromBits(hi)));
  if (x - a < b - x) return static_cast<uint16_t>(lo >> 16);
  if (x - a > b - x) return static_cast<uint16_t>(hi >> 16);
  return static_cast<uint16_t>(((lo >> 16) & 1u) == 0 ? lo >> 16 : hi >> 16);
}

std::vector<cpu::Bf16ConvertPath> Paths() {
  std::vector<cpu::Bf16ConvertPath> p = {cpu::Bf16ConvertPath::kScalar};
  if (cpu::Avx512Bf16ConvertAvailable()) p.push_back(cpu::Bf16ConvertPath::kAvx512Bf16);
  return p;
}

// Hand-computed bits: ties to even both ways, just off the tie, negative ties,
// inf, overflow of the largest float and of the largest bf16's upper tie, NaNs
// (quiet, signalling, negative with payload, all-ones), zeros and denormals
// (which vcvtneps2bf16 alone would flush to zero).
TEST(Bf16ConvertTest, TrickyValuesGiveHandComputedBitsOnEveryPath) {
  const std::vector<std::pair<uint32_t, uint16_t>> cases = {
      {0x3f800000, 0x3f80},  // 1
      {0x3f808000, 0x3f80},  // 1 + 2^-8: tie, even below
      {0x3f818000, 0x3f82},  // tie, odd below: up
      {0x3f808001, 0x3f81},  // just above a tie
      {0x3f807fff, 0x3f80},  // just below a tie
      {0xbf818000, 0xbf82},  // negative tie, odd: away from zero
      {0xbf808000, 0xbf80},  // negative tie, even
      {0x7f800000, 0x7f80},  // +inf
      {0xff800000, 0xff80},  // -inf
      {0x7f7fffff, 0x7f80},  // largest float: rounds to inf
      {0x7f7f0000, 0x7f7f},  // largest bf16
      {0x7f7f7fff, 0x7f7f},  // just below its upper tie
      {0x7f7f8000, 0x7f80},  // its upper tie (odd): inf
      {0xff7f8000, 0xff80},  // negative: -inf
      {0x7fc00000, 0x7fc0},  // quiet NaN
      {0x7f800001, 0x7fc0},  // signalling NaN, payload only in the low half: quieted
      {0xff812345, 0xffc1},  // negative NaN with payload
      {0x7fffffff, 0x7fff},  // all-ones NaN (rounding would carry into the sign)
      {0x00000000, 0x0000},  // +0
      {0x80000000, 0x8000},  // -0
      {0x00000001, 0x0000},  // smallest denormal: down to 0
      {0x00008000, 0x0000},  // denormal tie, even: down
      {0x00018000, 0x0002},  // denormal tie, odd: up
      {0x80018000, 0x8002},  // negative denormal tie
      {0x007fffff, 0x0080},  // largest denormal: up to the smallest normal
      {0x00400000, 0x0040},  // denormal exactly representable
  };
  // Values at every lane position and in the tail of a 16-lane vector.
  const int64_t n = static_cast<int64_t>(cases.size()) * 3 + 5;
  std::vector<float> src(n);
  std::vector<uint16_t> want(n);
  for (int64_t i = 0; i < n; ++i) {
    src[i] = FromBits(cases[i % cases.size()].first);
    want[i] = cases[i % cases.size()].second;
  }
  for (const auto& [in, out] : cases) {
    EXPECT_EQ(ReferenceRne(FromBits(in)), out) << std::hex << in;
    EXPECT_EQ(math::F32ToBf16Bits(FromBits(in)), out) << std::hex << in;
  }
  for (cpu::Bf16ConvertPath path : Paths()) {
    for (int64_t len : {n, int64_t{16}, int64_t{17}, int64_t{3}}) {
      std::vector<uint16_t> got(len + 1, 0xabcd);
      cpu::ConvertF32ToBf16(got.data(), src.data(), len, path);
      for (int64_t i = 0; i < len; ++i)
        EXPECT_EQ(got[i], want[i]) << "path " << static_cast<int>(path) << " len " << len << " i " << i << std::hex
                                   << " in " << Bits(src[i]);
      EXPECT_EQ(got[len], 0xabcd) << "wrote past the end, len " << len;
    }
  }
  std::printf("AVX512-BF16 conversion path %s on this CPU\n",
              cpu::Avx512Bf16ConvertAvailable() ? "tested" : "not available (scalar only)");
}

// Random bit patterns (every class: normals, denormals, NaNs, infs) and random
// ordinary floats: both paths equal the independent reference.
TEST(Bf16ConvertTest, PathsAgreeWithReferenceOnRandomBits) {
  std::mt19937 rng(test::FreshSeed(7));
  const int64_t n = (1 << 20) + 13;
  std::vector<float> src(n);
  for (int64_t i = 0; i < n; ++i) {
    uint32_t u = rng();
    if (i % 4 == 1) u &= 0x807fffffu;  // denormals and zeros
    if (i % 4 == 2) u |= 0x7f800000u;  // NaN / inf
    src[i] = FromBits(u);
  }
  std::vector<uint16_t> want(n);
  for (int64_t i = 0; i < n; ++i) want[i] = ReferenceRne(src[i]);
  for (cpu::Bf16ConvertPath path : Paths()) {
    std::vector<uint16_t> got(n);
    cpu::ConvertF32ToBf16(got.data(), src.data(), n, path);
    int64_t bad = 0, first = -1;
    for (int64_t i = 0; i < n; ++i)
      if (got[i] != want[i] && bad++ == 0) first = i;
    EXPECT_EQ(bad, 0) << "path " << static_cast<int>(path) << " first mismatch at " << first << std::hex
                      << " in " << (first >= 0 ? Bits(src[first]) : 0) << " got " << (first >= 0 ? got[first] : 0)
                      << " want " << (first >= 0 ? want[first] : 0);
  }
}

// Backend::Copy F32 -> BF16 -> F32 on row-strided views: the bf16 bits are the
// reference's, the way back is exact (the bf16 value as a float), and the
// padding between rows is neither read nor written.
TEST(Bf16ConvertTest, BackendCopyConvertsBothWaysOnStridedViews) {
  std::unique_ptr<Backend> be = MakeCpuBackend();
  const int64_t rows = 37, cols = 50, ld = 64;  // 37 x 50 = 1850: parallel tiles below the threshold, tails
  std::mt19937 rng(test::FreshSeed(3));
  std::normal_distribution<float> normal(0.f, 3.f);
  std::vector<float> src(rows * ld, 12345.f), back(rows * ld, -7.f);
  std::vector<uint16_t> mid(rows * ld, 0xabcd);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) src[r * ld + c] = normal(rng);
  src[5] = FromBits(0x3f818000);
  src[6] = std::numeric_limits<float>::quiet_NaN();
  src[7] = FromBits(0x00018000);
  Tensor s(src.data(), DType::kF32, {rows, cols}), m(mid.data(), DType::kBF16, {rows, cols}),
      b(back.data(), DType::kF32, {rows, cols});
  s.row_stride = m.row_stride = b.row_stride = ld;
  be->Copy(m, s);
  be->Copy(b, m);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < ld; ++c) {
      const int64_t i = r * ld + c;
      if (c < cols) {
        ASSERT_EQ(mid[i], ReferenceRne(src[i])) << r << "," << c;
        ASSERT_EQ(Bits(back[i]), static_cast<uint32_t>(mid[i]) << 16) << r << "," << c;
      } else {
        ASSERT_EQ(mid[i], 0xabcd) << "padding written at " << r << "," << c;
        ASSERT_EQ(back[i], -7.f) << "padding written at " << r << "," << c;
      }
    }
  // Large dense copy (parallel tiles) equals the per-element conversion.
  const int64_t big = 3 * (1 << 16) + 7;
  std::vector<float> x(big), y(big);
  std::vector<uint16_t> z(big);
  for (float& v : x) v = normal(rng);
  be->Copy(Tensor(z.data(), DType::kBF16, {big}), Tensor(x.data(), DType::kF32, {big}));
  be->Copy(Tensor(y.data(), DType::kF32, {big}), Tensor(z.data(), DType::kBF16, {big}));
  for (int64_t i = 0; i < big; ++i) ASSERT_EQ(y[i], math::RoundToBf16(x[i])) << i;
}

// ------------------------------------------------------------ the model

struct Case {
  LayerPattern pattern;
  bool qk_norm;
  bool roper;
};

ModelConfig SmallConfig(const Case& c) {
  return testing::SmallTestModelConfig(4, 2, c.pattern, c.qk_norm, c.roper);
}

ModelDims Dims(const Case& c) {
  absl::StatusOr<ModelDims> d = ResolveModelConfig(SmallConfig(c));
  EXPECT_TRUE(d.ok()) << d.status();
  return *d;
}

struct Result {
  double loss = 0;
  std::vector<std::vector<float>> grads;
  size_t activation_bytes = 0;
};

struct Storage {
  bool bf16 = false;
  uint32_t set = Transformer::kActAll;
  int recompute_every = 0;
  bool bf16_product_inputs = true;  // Transformer::set_bf16_product_inputs
};

// Two passes (the second accumulates, so the arena's reuse is covered) over
// two rows of 24 tokens, the first holding two documents: n = 48, so every
// arena tensor is a multiple of 64 bytes and the plan is exact.
constexpr int64_t kTokens = 48;

Result RunPass(const ModelDims& dims, const Storage& st, Bf16GemmLibrary lib = Bf16GemmLibrary::kAuto) {
  BackendSettings o;
  o.cpu.bf16_gemm = lib;
  absl::StatusOr<std::unique_ptr<Backend>> be = MakeBackend("cpu", o);
  EXPECT_TRUE(be.ok()) << be.status();
  EXPECT_TRUE((*be)->SetMatmulPrecision(MatmulPrecision::kBF16).ok());
  Transformer model(dims, be->get(), DType::kF32);
  model.InitParams(11);
  model.set_recompute_every(st.recompute_every);
  if (st.bf16) model.set_activation_dtype(DType::kBF16);
  model.set_bf16_activation_set(st.set);
  model.set_bf16_product_inputs(st.bf16_product_inputs);
  const int64_t n = kTokens;
  testing::PackedTestBatch batch = testing::MakePackedTestBatch({0, 10, 24, static_cast<int32_t>(kTokens)});
  const BatchTensors b = batch.Tensors();
  Result r;
  model.grads().Zero();
  r.loss = model.ForwardBackward(b, 1.0 / n, /*backward=*/true);
  r.loss += model.ForwardBackward(b, 1.0 / n, /*backward=*/true);
  for (int i = 0; i < model.layout().num_buffers(); ++i) {
    r.grads.emplace_back(model.layout().buffer_size(i));
    model.grads().CopyToHost(i, r.grads.back().data());
  }
  r.activation_bytes = model.activation_bytes();
  return r;
}

bool BitEqual(const Result& a, const Result& b) {
  if (a.grads.size() != b.grads.size()) return false;
  for (size_t i = 0; i < a.grads.size(); ++i)
    if (a.grads[i].size() != b.grads[i].size() ||
        std::memcmp(a.grads[i].data(), b.grads[i].data(), a.grads[i].size() * sizeof(float)) != 0)
      return false;
  return true;
}

// ||a - b|| / ||b|| per gradient buffer, the largest.
double MaxRelativeL2(const Result& a, const Result& b) {
  double worst = 0;
  for (size_t i = 0; i < a.grads.size(); ++i) {
    double d = 0, s = 0;
    for (size_t j = 0; j < a.grads[i].size(); ++j) {
      const double x = a.grads[i][j], y = b.grads[i][j];
      d += (x - y) * (x - y);
      s += y * y;
    }
    worst = std::max(worst, std::sqrt(d / s));
  }
  return worst;
}

const std::vector<Case>& Cases() {
  static const std::vector<Case> cases = {{ALL_ROPE_FULL, false, false},
                                          {RNOPE_SWA, false, false},
                                          {RNOPE_SWA, true, false},
                                          {ALL_ROPE_FULL, true, true}};
  return cases;
}

std::vector<Bf16GemmLibrary> GemmPaths() {
  std::vector<Bf16GemmLibrary> libs = {Bf16GemmLibrary::kRoundedSgemm};
  BackendSettings o;
  o.cpu.bf16_gemm = Bf16GemmLibrary::kOneDnn;
  if (MakeBackend("cpu", o).ok()) libs.push_back(Bf16GemmLibrary::kOneDnn);
  return libs;
}

// (a) xn1, xn2 and h are read only by bf16 products (the forward's and the dW
// GEMMs; RMSNorm's backward does not read its output), so making them in bf16
// with the operand rounding (the default at bf16 precision) changes no bit of
// the loss or any gradient against F32 tensors the products round, on both
// bf16 GEMM paths, and saves 2 bytes per element in every layer; storing them
// "in bf16" on top (their Bf16Act bits) changes nothing more.
TEST(Bf16ActivationsTest, NormAndSwigluOutputsInBf16GiveTheFp32StorageBits) {
  for (Bf16GemmLibrary lib : GemmPaths()) {
    std::printf("bf16 GEMM path %s\n", Bf16GemmLibraryName(lib));
    for (const Case& c : Cases()) {
      SCOPED_TRACE(absl::StrCat("gemm ", Bf16GemmLibraryName(lib), " pattern ", LayerPattern_Name(c.pattern),
                                " qk_norm ", c.qk_norm, " roper ", c.roper));
      const ModelDims dims = Dims(c);
      Storage f32_inputs;
      f32_inputs.bf16_product_inputs = false;
      const Result f32 = RunPass(dims, f32_inputs, lib);
      const Result bf16_inputs = RunPass(dims, {}, lib);
      EXPECT_EQ(bf16_inputs.loss, f32.loss);
      EXPECT_TRUE(BitEqual(bf16_inputs, f32));
      const int64_t product_inputs = 2 * dims.hidden + dims.ffn;  // xn1, xn2, h per token
      EXPECT_EQ(static_cast<int64_t>(f32.activation_bytes) - static_cast<int64_t>(bf16_inputs.activation_bytes),
                dims.layers * product_inputs * kTokens * 2);
      // The same tensors "stored in bf16" as well, with F32 inputs (store and
      // working set) and without: still the same bits.
      const uint32_t inputs = Transformer::kActXn1 | Transformer::kActXn2 | Transformer::kActH;
      Storage stored_f32_inputs = {true, inputs};
      stored_f32_inputs.bf16_product_inputs = false;
      const Result stored = RunPass(dims, {true, inputs}, lib), stored_f32 = RunPass(dims, stored_f32_inputs, lib);
      EXPECT_TRUE(BitEqual(stored, f32));
      EXPECT_TRUE(BitEqual(stored_f32, f32));
      EXPECT_EQ(stored.activation_bytes, bf16_inputs.activation_bytes);
      EXPECT_LT(stored_f32.activation_bytes, f32.activation_bytes);
    }
  }
}

// (b) The full set: the forward is untouched (loss bit-equal), gradients move
// by bf16 rounding of gu, o, qkv (and qraw/kraw) only. Each stored value is off
// by at most u = 2^-8 relative (half of bf16's 2^-7 spacing at 1; RNE); a gradient
// is a sum of products with a few such factors, the errors of independent
// elements partly cancelling, so its relative L2 error is a few u: we allow
// 4u = 1.6e-2 (measured here: printed below, a few 1e-3), and require a
// visible change (the bf16 storage is really used).
TEST(Bf16ActivationsTest, FullBf16StorageIsCloseAndHalvesTheStoredTensors) {
  for (const Case& c : Cases()) {
    SCOPED_TRACE(absl::StrCat("pattern ", LayerPattern_Name(c.pattern), " qk_norm ", c.qk_norm, " roper ", c.roper));
    const ModelDims dims = Dims(c);
    const Result f32 = RunPass(dims, {});
    const Result full = RunPass(dims, {true});
    EXPECT_EQ(full.loss, f32.loss);
    EXPECT_FALSE(BitEqual(full, f32)) << "bf16 storage changed no gradient: is it used?";
    const double rel = MaxRelativeL2(full, f32);
    std::printf("%s qk_norm %d roper %d: largest relative L2 gradient change %.3g\n",
                LayerPattern_Name(c.pattern).c_str(), c.qk_norm, c.roper, rel);
    EXPECT_LT(rel, 4.0 / 256);

    // Bytes from the shapes: each layer's bf16-stored tensors lose half their
    // 4 bytes per element, and one F32 working set of them is added, except
    // for xn1, xn2 and h, which are bf16 already at this precision (a).
    const int64_t n = kTokens, F = dims.ffn, hd = dims.head_dim;
    const int64_t q = dims.heads * hd, kv = dims.kv_heads * hd;
    const int64_t conv = (q + 2 * kv) + q + 2 * F + (dims.qk_norm ? q + kv : 0);
    const int64_t saved = dims.layers * conv * n * 2 - conv * n * 4;
    EXPECT_EQ(static_cast<int64_t>(f32.activation_bytes) - static_cast<int64_t>(full.activation_bytes), saved);
    // And the plan knows both, exactly (n = 48 keeps every tensor 64-byte
    // aligned), and the F32 products' arena too.
    for (bool bf16 : {false, true}) {
      const MemoryPlan m = EstimateTrainingMemory(dims, 2, kTokens / 2, 256, 0, bf16, /*bf16_products=*/true);
      EXPECT_EQ(m.layer_activations + m.final_norm + m.backward_scratch,
                static_cast<int64_t>(bf16 ? full.activation_bytes : f32.activation_bytes))
          << "bf16 " << bf16;
    }
    Storage f32_inputs;
    f32_inputs.bf16_product_inputs = false;  // the arena of F32 products
    const MemoryPlan m = EstimateTrainingMemory(dims, 2, kTokens / 2, 256, 0, false, false);
    EXPECT_EQ(m.layer_activations + m.final_norm + m.backward_scratch,
              static_cast<int64_t>(RunPass(dims, f32_inputs).activation_bytes));
  }
}

// (d) With recompute_every: recomputed layers keep only x and use the shared
// F32 set (which is also the bf16 layers' working set); stored layers use bf16.
TEST(Bf16ActivationsTest, ComposesWithRecomputation) {
  for (const Case& c : Cases()) {
    SCOPED_TRACE(absl::StrCat("pattern ", LayerPattern_Name(c.pattern), " qk_norm ", c.qk_norm, " roper ", c.roper));
    const ModelDims dims = Dims(c);
    const Result f32 = RunPass(dims, {});
    // xn1/xn2/h with recomputation: still the fp32 storage's bits.
    const Result part =
        RunPass(dims, {true, Transformer::kActXn1 | Transformer::kActXn2 | Transformer::kActH, 2});
    EXPECT_EQ(part.loss, f32.loss);
    EXPECT_TRUE(BitEqual(part, f32));
    // Every layer recomputed: nothing is stored in bf16, the same bits and bytes as fp32 storage.
    const Result all_recomputed = RunPass(dims, {true, Transformer::kActAll, 1});
    const Result f32_all_recomputed = RunPass(dims, {false, Transformer::kActAll, 1});
    EXPECT_TRUE(BitEqual(all_recomputed, f32));
    EXPECT_EQ(all_recomputed.activation_bytes, f32_all_recomputed.activation_bytes);
    // Every other layer: the full set is close, below both fp32 with recomputation and bf16 without, and planned exactly.
    const Result r2 = RunPass(dims, {true, Transformer::kActAll, 2});
    const Result f32_r2 = RunPass(dims, {false, Transformer::kActAll, 2});
    const Result bf16_r0 = RunPass(dims, {true});
    EXPECT_EQ(r2.loss, f32.loss);
    EXPECT_LT(MaxRelativeL2(r2, f32), 4.0 / 256);
    EXPECT_LT(r2.activation_bytes, f32_r2.activation_bytes);
    EXPECT_LT(r2.activation_bytes, bf16_r0.activation_bytes);
    const MemoryPlan m = EstimateTrainingMemory(dims, 2, kTokens / 2, 256, 2, true);
    EXPECT_EQ(m.layer_activations + m.final_norm + m.backward_scratch, static_cast<int64_t>(r2.activation_bytes));
    // fp32 storage at bf16 precision with recomputation: xn1, xn2, h in bf16 in
    // the stored layers and in the shared set, planned exactly.
    const MemoryPlan m2 = EstimateTrainingMemory(dims, 2, kTokens / 2, 256, 2, false, /*bf16_products=*/true);
    EXPECT_EQ(m2.layer_activations + m2.final_norm + m2.backward_scratch,
              static_cast<int64_t>(f32_r2.activation_bytes));
  }
}

void BackwardWithFp32Products(const ModelDims& dims, Backend* be) {
  Transformer model(dims, be, DType::kF32);
  model.InitParams(1);
  model.set_activation_dtype(DType::kBF16);
  std::vector<int32_t> ids(8, 1), pos(8), cu = {0, 8};
  for (int i = 0; i < 8; ++i) pos[i] = i;
  BatchTensors b{Tensor(ids.data(), DType::kI32, {8}), Tensor(ids.data(), DType::kI32, {8}),
                 Tensor(pos.data(), DType::kI32, {8}), Tensor(cu.data(), DType::kI32, {2})};
  model.ForwardBackward(b, 1.0, true);
}

// (c) Refused combinations, with errors that name the field and the reason.
TEST(Bf16ActivationsTest, RefusedCombinationsSayWhy) {
  ModelConfig m = SmallConfig({RNOPE_SWA, false, false});
  m.set_activation_dtype("bf16");
  absl::StatusOr<bool> ok = ResolveBf16Activations(m, /*matmul_bf16=*/true);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_TRUE(*ok);
  absl::StatusOr<bool> fp32_products = ResolveBf16Activations(m, /*matmul_bf16=*/false);
  ASSERT_FALSE(fp32_products.ok());
  EXPECT_NE(fp32_products.status().message().find("model.activation_dtype"), std::string::npos)
      << fp32_products.status();
  EXPECT_NE(fp32_products.status().message().find("precision BF16"), std::string::npos) << fp32_products.status();
  absl::StatusOr<bool> f64 = ResolveBf16Activations(m, true, /*model_f32=*/false);
  ASSERT_FALSE(f64.ok());
  EXPECT_NE(f64.status().message().find("F32 model"), std::string::npos) << f64.status();
  m.set_activation_dtype("fp16");
  EXPECT_FALSE(ResolveModelConfig(m).ok());
  EXPECT_NE(ResolveModelConfig(m).status().message().find("must be fp32 or bf16 (got 'fp16')"), std::string::npos)
      << ResolveModelConfig(m).status();
  m.set_activation_dtype("fp32");
  ASSERT_TRUE(ResolveBf16Activations(m, false).ok());
  EXPECT_FALSE(*ResolveBf16Activations(m, false));

  // Through the train config (what train, bench and plan load).
  TrainConfig t;
  *t.mutable_model() = SmallConfig({RNOPE_SWA, false, false});
  t.mutable_model()->set_activation_dtype("bf16");
  t.mutable_data()->set_path("x.ltok");
  absl::Status st = ValidateTrainConfig(t);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("model.activation_dtype: bf16 needs precision BF16"), std::string::npos) << st;
  t.set_precision(BF16);
  EXPECT_TRUE(ValidateTrainConfig(t).ok()) << ValidateTrainConfig(t);

  // The model itself: no bf16 storage for an F64 model, and no bf16-stored
  // backward with fp32 products.
  const ModelDims dims = Dims({RNOPE_SWA, false, false});
  std::unique_ptr<Backend> be = MakeCpuBackend();
  EXPECT_DEATH(
      {
        Transformer f64(dims, be.get(), DType::kF64);
        f64.set_activation_dtype(DType::kBF16);
      },
      "needs an F32 model");
  EXPECT_DEATH(BackwardWithFp32Products(dims, be.get()), "needs the bf16 matmul precision");
}

// (d) FSDP on one rank (gathers and reduce-scatters are copies): four AdamW
// steps with xn1/xn2/h in bf16 give the fp32 storage's losses and parameters
// bit for bit, and the full set stays close.
std::vector<std::vector<float>> TrainFsdp(const Storage& st, std::vector<double>* losses) {
  TrainConfig c;
  *c.mutable_model() = SmallConfig({RNOPE_SWA, false, false});
  c.set_mode(FSDP);
  c.set_precision(BF16);
  absl::StatusOr<ModelDims> d = ResolveModelConfig(c.model());
  EXPECT_TRUE(d.ok());
  std::unique_ptr<Backend> be = MakeCpuBackend();
  EXPECT_TRUE(be->SetMatmulPrecision(MatmulPrecision::kBF16).ok());
  Transformer model(*d, be.get(), DType::kF32);
  model.InitParams(9);
  if (st.bf16) model.set_activation_dtype(DType::kBF16);
  model.set_bf16_activation_set(st.set);
  std::unique_ptr<Communicator> comm = MakeLocalCommunicator();
  absl::StatusOr<std::unique_ptr<ParallelStrategy>> s = MakeParallelStrategy(c, &model, comm.get());
  EXPECT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE((*s)->Setup(std::nullopt).ok());
  std::mt19937 rng(5);
  for (int step = 1; step <= 4; ++step) {
    (*s)->BeginStep();
    std::vector<int32_t> in, tg, pos, cu = {0, 9, 20};
    for (int seg = 0; seg < 2; ++seg)
      for (int t = cu[seg]; t < cu[seg + 1]; ++t) {
        in.push_back(rng() % 97);
        tg.push_back(rng() % 97);
        pos.push_back(t - cu[seg]);
      }
    BatchTensors b{Tensor(in.data(), DType::kI32, {20}), Tensor(tg.data(), DType::kI32, {20}),
                   Tensor(pos.data(), DType::kI32, {20}), Tensor(cu.data(), DType::kI32, {3})};
    (*s)->BeginMicroBatch();
    losses->push_back(model.ForwardBackward(b, 1.0 / 20, true));
    (*s)->EndMicroBatch();
    EXPECT_TRUE((*s)->FinishBackward().ok());
    EXPECT_TRUE((*s)->OptimizerStep(1e-2).ok());
  }
  return testing::FullParametersOnHost(**s, model);
}

TEST(Bf16ActivationsTest, FsdpOneRank) {
  std::vector<double> l32, lpart, lfull;
  const auto p32 = TrainFsdp({}, &l32);
  const auto ppart = TrainFsdp({true, Transformer::kActXn1 | Transformer::kActXn2 | Transformer::kActH}, &lpart);
  const auto pfull = TrainFsdp({true}, &lfull);
  EXPECT_EQ(lpart, l32);
  for (size_t b = 0; b < p32.size(); ++b)
    EXPECT_EQ(0, std::memcmp(ppart[b].data(), p32[b].data(), p32[b].size() * sizeof(float))) << "buffer " << b;
  ASSERT_EQ(lfull.size(), l32.size());
  EXPECT_EQ(lfull[0], l32[0]);  // the first forward is before any bf16-stored gradient
  for (size_t i = 0; i < l32.size(); ++i) EXPECT_NEAR(lfull[i], l32[i], 1e-2 * l32[i]) << "step " << i + 1;
}

}  // namespace
}  // namespace longctx
