// Why: CpuBackendOptions::attention_isa lets a benchmark (`bench attention
// --attention_isa=avx2`) or a user run the AVX2 or scalar attention tiles on a
// CPU that has better ones. The option must reach the kernels — the backend's
// outputs are the direct call's with that ISA, bit for bit, at both matmul
// precisions — a choice the CPU cannot run must be refused when the backend is
// made, naming it, and the names must parse both ways. CpuBackendOptions::
// attention_amx = false (`bench attention --attention_amx=false`) runs the bf16
// tiles on vdpbf16ps even on an AMX CPU, so that path can be measured there.
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/backend.h"
#include "kernels/backend_registry.h"
#include "kernels/cpu/attention_packed_bf16.h"
#include "kernels/cpu/attention_tiles.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_kernels.h"
#include "tests/support/attention_fixture.h"
#include "tests/support/hardware_skip.h"

namespace longctx {
namespace {

using attention_fixture::Buffers;
using attention_fixture::Case;
using attention_fixture::Inputs;
using attention_fixture::RandomInputs;
using attention_fixture::ShapeOf;

constexpr CpuAttentionIsa kAll[] = {CpuAttentionIsa::kAuto, CpuAttentionIsa::kAvx512, CpuAttentionIsa::kAvx2,
                                    CpuAttentionIsa::kScalar};

// o, lse, dq, dk, dv of one forward and backward.
std::vector<std::vector<double>> Outputs(const Buffers<float>& b) {
  return {Buffers<float>::Get(b.p.o), Buffers<float>::Get(b.p.lse), Buffers<float>::Get(b.p.dq),
          Buffers<float>::Get(b.p.dk), Buffers<float>::Get(b.p.dv)};
}

// What a run chooses: the tiles' ISA, the matmul precision, and whether
// bf16 tiles may use the AMX unit.
struct Choice {
  CpuAttentionIsa isa = CpuAttentionIsa::kAuto;
  bool bf16 = false;
  bool amx = true;
};

// One forward and backward of case c on inputs in, twice: by the direct call
// with the cpu::AttentionConfig of `choice`, and through a CPU backend made
// with the CpuBackendOptions of `choice` (at bf16 when it says so). Their
// outputs, the options the backend kept, and how many packed bf16 driver
// calls the backend's run made on the tile unit and on vdpbf16ps. False (a
// failure recorded) when the backend cannot be made.
struct BothWays {
  std::vector<std::vector<double>> direct, via;
  CpuBackendOptions kept;
  int64_t tiles = 0, dots = 0;
};
bool RunBothWays(const Case& c, const Inputs& in, const Choice& choice, BothWays& out) {
  cpu::AttentionConfig config;
  config.isa = choice.isa;
  config.bf16 = choice.bf16;
  config.bf16_amx = choice.amx;
  BackendSettings o;
  o.cpu.attention_isa = choice.isa;
  o.cpu.attention_amx = choice.amx;
  const bool bf16 = choice.bf16;
  Buffers<float> direct(c, in), via(c, in);
  direct.config = config;
  direct.Forward();
  direct.Backward();
  out.direct = Outputs(direct);
  absl::StatusOr<std::unique_ptr<Backend>> be = MakeBackend("cpu", o);
  if (!be.ok()) {
    ADD_FAILURE() << be.status();
    return false;
  }
  out.kept = CpuBackendOptionsOf(**be).value_or(CpuBackendOptions{});
  if (bf16 && !(*be)->SetMatmulPrecision(MatmulPrecision::kBF16).ok()) {
    ADD_FAILURE() << "SetMatmulPrecision(kBF16)";
    return false;
  }
  const int64_t tiles = cpu::PackedBf16AttentionCalls(true), dots = cpu::PackedBf16AttentionCalls(false);
  (*be)->AttentionForward(via.p);
  (*be)->AttentionBackward(via.p);
  out.tiles = cpu::PackedBf16AttentionCalls(true) - tiles;
  out.dots = cpu::PackedBf16AttentionCalls(false) - dots;
  out.via = Outputs(via);
  return true;
}

TEST(AttentionIsaOptionTest, TheBackendRunsTheChosenTiles) {
  // GQA, documents of several lengths, a window, head_dim 64 (the packed bf16
  // driver's shapes): every driver the choices reach.
  const Case c{"isa", {1, 5, 130, 1, 163}, 4, 2, 64, 37};
  const Inputs in = RandomInputs<float>(ShapeOf(c), 11);
  // The fp32 tile paths give the same bits by design (attention_tiles_scalar.cc),
  // so what shows the choice arriving is precision bf16: there avx2 and scalar
  // must run fp32 tiles (the packed bf16 driver never called, the fp32 bits),
  // while auto runs the bf16 tiles where the CPU has bf16 dot products.
  const bool bf16_tiles = cpu::AttentionTileKernelsBf16() != nullptr;
  std::vector<std::vector<double>> fp32_bits;
  int ran = 0;
  for (bool bf16 : {false, true}) {
    for (CpuAttentionIsa isa : kAll) {
      if (!cpu::AttentionIsaSupported(isa)) continue;
      const std::string what = std::string(CpuAttentionIsaName(isa)) + (bf16 ? " bf16" : " fp32");
      BothWays run;
      ASSERT_TRUE(RunBothWays(c, in, {.isa = isa, .bf16 = bf16}, run)) << what;
      EXPECT_EQ(run.kept.attention_isa, isa) << what;
      const int64_t packed_calls = run.tiles + run.dots;
      const std::vector<std::vector<double>>& got = run.via;
      EXPECT_TRUE(got == run.direct) << what << ": the backend's outputs are not the direct call's";
      if (!bf16) {
        if (fp32_bits.empty()) fp32_bits = got;
        EXPECT_TRUE(got == fp32_bits) << what << ": fp32 tiles of different ISAs disagree";
        EXPECT_EQ(packed_calls, 0) << what;
      } else if (isa == CpuAttentionIsa::kAvx2 || isa == CpuAttentionIsa::kScalar) {
        EXPECT_EQ(packed_calls, 0) << what << " ran the bf16 tiles";
        EXPECT_TRUE(got == fp32_bits) << what << ": not the fp32 tiles' bits";
      } else if (bf16_tiles) {
        EXPECT_EQ(packed_calls, 2) << what << " did not run the packed bf16 driver";
        EXPECT_FALSE(got == fp32_bits) << what << ": bf16 tiles gave the fp32 bits";
      }
      ++ran;
    }
  }
  EXPECT_GE(ran, 4);  // auto and scalar run everywhere, at both precisions
}

TEST(AttentionIsaOptionTest, AttentionAmxFalseRunsTheDotProductTiles) {
  if (cpu::AttentionTileKernelsBf16() == nullptr) LONGCTX_SKIP_WITHOUT(::longctx::test::kNoAvx512Bf16) << "this CPU has no bf16 dot products";
  const Case c{"amx-option", {1, 5, 130, 1, 163}, 4, 2, 64, 37};
  const Inputs in = RandomInputs<float>(ShapeOf(c), 12);
  const bool has_amx = cpu::AttentionTileKernelsBf16(true) != cpu::AttentionTileKernelsBf16(false);
  for (bool amx : {true, false}) {
    BothWays run;
    ASSERT_TRUE(RunBothWays(c, in, {.bf16 = true, .amx = amx}, run));
    EXPECT_EQ(run.kept.attention_amx, amx);
    EXPECT_TRUE(run.via == run.direct) << "attention_amx " << amx << ": not the direct call's outputs";
    if (amx && has_amx) {
      EXPECT_EQ(run.tiles, 2);
      EXPECT_EQ(run.dots, 0);
    } else {
      EXPECT_EQ(run.tiles, 0) << "attention_amx " << amx << " ran the tile unit";
      EXPECT_EQ(run.dots, 2);
    }
  }
}

TEST(AttentionIsaOptionTest, AChoiceThisCpuCannotRunIsRefusedAndNamesParse) {
  for (CpuAttentionIsa isa : kAll) {
    EXPECT_EQ(*ParseCpuAttentionIsa(CpuAttentionIsaName(isa)), isa);
    BackendSettings o;
    o.cpu.attention_isa = isa;
    absl::StatusOr<std::unique_ptr<Backend>> be = MakeBackend("cpu", o);
    if (cpu::AttentionIsaSupported(isa)) {
      EXPECT_TRUE(be.ok()) << CpuAttentionIsaName(isa) << ": " << be.status();
    } else {
      ASSERT_FALSE(be.ok()) << CpuAttentionIsaName(isa);
      EXPECT_EQ(be.status().message(), std::string("cpu backend: attention ISA ") + CpuAttentionIsaName(isa) +
                                           " is not supported by this CPU");
    }
  }
  const absl::StatusOr<CpuAttentionIsa> bad = ParseCpuAttentionIsa("avx3");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "attention ISA 'avx3': expected auto, avx512, avx2 or scalar");
}

}  // namespace
}  // namespace longctx
