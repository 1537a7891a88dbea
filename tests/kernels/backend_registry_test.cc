// Why: backend names and each backend's own options meet in the registry
// (kernels/backend_registry.h) and nowhere else: the config check, the memory
// check and the choice of communicator ask FindBackend what a name is, and
// the memory plan asks what a backend's bf16 products copy. Those answers must
// be right without making the backend, agree with the backend once made, and
// a backend must never silently drop options that are not its own.
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/backend.h"
#include "kernels/backend_registry.h"
#include "kernels/cpu/cpu_backend.h"
#include "train/bench/bench_profile.h"

namespace longctx {
namespace {

bool SameCopies(const Bf16OperandCopies& a, const Bf16OperandCopies& b) {
  return a.f32_element_bytes == b.f32_element_bytes && a.bf16_element_bytes == b.bf16_element_bytes &&
         a.pad_bytes == b.pad_bytes && a.align_bytes == b.align_bytes && a.dlogits_unpadded == b.dlogits_unpadded;
}

TEST(BackendRegistryTest, FindBackendKnowsEachNameAndItsDevice) {
  absl::StatusOr<BackendInfo> cpu = FindBackend("cpu");
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  EXPECT_EQ(cpu->name, "cpu");
  EXPECT_EQ(cpu->device, Device::kCpu);
  // Known whether or not this build has it: a config naming it is valid everywhere.
  absl::StatusOr<BackendInfo> cuda = FindBackend("cuda");
  ASSERT_TRUE(cuda.ok()) << cuda.status();
  EXPECT_EQ(cuda->device, Device::kCuda);
  for (const char* bad : {"tpu", "", "CPU", "cpu "}) {
    absl::StatusOr<BackendInfo> b = FindBackend(bad);
    ASSERT_FALSE(b.ok()) << "'" << bad << "'";
    EXPECT_EQ(b.status().code(), absl::StatusCode::kNotFound);
    EXPECT_EQ(b.status().message(), absl::StrCat("unknown backend '", bad, "' (expected cpu or cuda)"));
  }
  EXPECT_EQ(KnownBackendNames(), "\"cpu\" or \"cuda\"");
}

TEST(BackendRegistryTest, MakeBackendPassesTheCommonAndTheCpuOptions) {
  BackendSettings s;
  s.threads = 1;
  s.cpu.gemm = GemmLibrary::kOpenBlas;
  s.cpu.bf16_gemm = Bf16GemmLibrary::kRoundedSgemm;
  s.cpu.attention_key_parts = 3;
  absl::StatusOr<std::unique_ptr<Backend>> be = MakeBackend("cpu", s);
  ASSERT_TRUE(be.ok()) << be.status();
  EXPECT_EQ((*be)->device(), Device::kCpu);
  EXPECT_EQ((*be)->options().threads, 1);
  std::optional<CpuBackendOptions> cpu = CpuBackendOptionsOf(**be);
  ASSERT_TRUE(cpu.has_value());
  EXPECT_EQ(cpu->gemm, GemmLibrary::kOpenBlas);
  EXPECT_EQ(cpu->bf16_gemm, Bf16GemmLibrary::kRoundedSgemm);
  EXPECT_EQ(cpu->attention_key_parts, 3);

  absl::StatusOr<std::unique_ptr<Backend>> unknown = MakeBackend("tpu");
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound);
  s.cpu.attention_key_parts = kMaxAttentionKeyParts + 1;  // refused as an error, not an abort
  EXPECT_EQ(MakeBackend("cpu", s).status().code(), absl::StatusCode::kInvalidArgument);
  s = {};
  s.threads = -1;
  EXPECT_EQ(MakeBackend("cpu", s).status().code(), absl::StatusCode::kInvalidArgument);
}

// The CUDA backend refuses a CPU option (before it looks for a device); a
// build without CUDA says it is not built.
TEST(BackendRegistryTest, AnotherBackendRefusesCpuOptions) {
  BackendSettings s;
  s.cpu.gemm = GemmLibrary::kOpenBlas;
  absl::StatusOr<std::unique_ptr<Backend>> be = MakeBackend("cuda", s);
  ASSERT_FALSE(be.ok());
  if (be.status().code() == absl::StatusCode::kUnavailable) {
    EXPECT_NE(be.status().message().find("not built"), std::string::npos) << be.status();
  } else {
    EXPECT_EQ(be.status().code(), absl::StatusCode::kInvalidArgument) << be.status();
    EXPECT_EQ(be.status().message(), "cuda backend: GEMM library 'openblas' is a CPU option (the backend's own "
                                     "library computes products here)");
  }
}

// What the registry says a backend's bf16 products copy, without making it,
// is what the backend says once made, for each CPU library; the CUDA kernels
// keep none; a wrapper reports its inner backend's.
TEST(BackendRegistryTest, Bf16OperandCopiesWithoutAndWithTheBackend) {
  for (Bf16GemmLibrary lib : {Bf16GemmLibrary::kAuto, Bf16GemmLibrary::kRoundedSgemm, Bf16GemmLibrary::kOneDnn}) {
    SCOPED_TRACE(Bf16GemmLibraryName(lib));
    BackendSettings s;
    s.cpu.bf16_gemm = lib;
    absl::StatusOr<Bf16OperandCopies> planned = BackendBf16OperandCopies("cpu", s);
    ASSERT_TRUE(planned.ok()) << planned.status();
    const Bf16GemmLibrary resolved = CpuBf16GemmLibrary(lib);
    EXPECT_EQ(planned->f32_element_bytes, resolved == Bf16GemmLibrary::kOneDnn ? 2 : 4);
    EXPECT_EQ(planned->bf16_element_bytes, resolved == Bf16GemmLibrary::kOneDnn ? 0 : 4);
    EXPECT_STREQ(planned->name(), resolved == Bf16GemmLibrary::kOneDnn ? "bf16 copies" : "fp32 copies");
    absl::StatusOr<std::unique_ptr<Backend>> be = MakeBackend("cpu", s);
    if (!be.ok()) {  // the oneDNN path on a CPU without a oneDNN bf16 matmul
      EXPECT_EQ(lib, Bf16GemmLibrary::kOneDnn) << be.status();
      continue;
    }
    EXPECT_TRUE(SameCopies((*be)->bf16_operand_copies(), *planned));
    ProfilingBackend wrapped(be->get());
    EXPECT_TRUE(SameCopies(wrapped.bf16_operand_copies(), *planned));
    EXPECT_FALSE(CpuBackendOptionsOf(wrapped).has_value());  // not itself a CPU backend
  }
  absl::StatusOr<Bf16OperandCopies> cuda = BackendBf16OperandCopies("cuda");
  ASSERT_TRUE(cuda.ok()) << cuda.status();
  EXPECT_FALSE(cuda->any());
  EXPECT_STREQ(cuda->name(), "none");
  EXPECT_EQ(BackendBf16OperandCopies("tpu").status().code(), absl::StatusCode::kNotFound);
}

// A kept buffer: the copy plus the pad, rounded to the alignment; nothing
// copied, no buffer.
TEST(BackendRegistryTest, Bf16OperandCopiesBufferArithmetic) {
  const Bf16OperandCopies c = CpuBf16OperandCopies();
  EXPECT_EQ(c.Buffer(0), 0);
  EXPECT_EQ(c.Buffer(1), 64);
  EXPECT_EQ(c.Buffer(63), 64);
  EXPECT_EQ(c.Buffer(64), 128);         // 64 + the pad byte
  EXPECT_EQ(c.Buffer(64, false), 64);   // unpadded
  EXPECT_EQ(c.element_bytes(DType::kF32), c.f32_element_bytes);
  EXPECT_EQ(c.element_bytes(DType::kBF16), c.bf16_element_bytes);
  EXPECT_EQ(Bf16OperandCopies{}.Buffer(100), 100);  // no pad, alignment 1
}

}  // namespace
}  // namespace longctx
