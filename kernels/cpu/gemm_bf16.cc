// Why: see gemm_bf16.h. This file owns the choice of path and the rounding
// copies; the oneDNN call itself lives in gemm_onednn.cc.
#include "kernels/cpu/gemm_bf16.h"

#include <cblas.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/huge_pages.h"
#include "base/log.h"
#include "kernels/math/bf16.h"

namespace longctx::cpu {
namespace {

// Rows of `rows` x `cols` elements are independent: threads split rows when
// the copy is large enough to be worth waking them.
constexpr int64_t kParallelElements = int64_t{1} << 16;

// dst (dense rows of cols) = convert_row(each row of src, any row stride).
template <class In, class Out, class ConvertRow>
void ConvertRows(const Tensor& src, Out* dst, ConvertRow convert_row) {
  const int64_t rows = src.shape[0], cols = src.shape[1], ld = src.stride0();
  const In* s = src.as<const In>();
#pragma omp parallel for schedule(static) if (rows * cols >= kParallelElements && rows > 1)
  for (int64_t r = 0; r < rows; ++r) convert_row(s + r * ld, dst + r * cols, cols);
}

void RoundRowsToF32(const Tensor& src, float* dst) {
  ConvertRows<float>(src, dst, [](const float* in, float* out, int64_t cols) {
#pragma omp simd
    for (int64_t c = 0; c < cols; ++c) out[c] = math::RoundToBf16(in[c]);
  });
}

void RoundRowsToBf16(const Tensor& src, uint16_t* dst) {
  // The conversion Copy uses (elementwise.cc: vcvtneps2bf16 where the CPU has
  // it, else F32ToBf16Bits; the same bits either way).
  ConvertRows<float>(src, dst,
                     [](const float* in, uint16_t* out, int64_t cols) { ConvertF32ToBf16(out, in, cols); });
}

void RowsBf16ToF32(const Tensor& src, float* dst) {
  ConvertRows<uint16_t>(src, dst, [](const uint16_t* in, float* out, int64_t cols) {
#pragma omp simd
    for (int64_t c = 0; c < cols; ++c) out[c] = math::Bf16BitsToF32(in[c]);
  });
}

}  // namespace

Bf16GemmPath AutoBf16GemmPath() {
  static const Bf16GemmPath path = CpuHasBf16DotProducts() && OneDnnBf16Available() ? Bf16GemmPath::kOneDnn
                                                                                    : Bf16GemmPath::kRoundedSgemm;
  return path;
}

absl::Status CheckBf16GemmPath(Bf16GemmPath path) {
  if (path == Bf16GemmPath::kOneDnn && !OneDnnBf16Available())
    return absl::FailedPreconditionError("bf16 GEMM path onednn: oneDNN has no bf16 matmul on this CPU (ISA " +
                                         OneDnnCpuIsaName() + ")");
  return absl::OkStatus();
}

const char* Bf16GemmPathName(Bf16GemmPath path) {
  return path == Bf16GemmPath::kOneDnn ? "onednn" : "rounded-sgemm";
}

std::string Bf16GemmDescription(Bf16GemmPath path, bool chosen) {
  std::string why = chosen                    ? "chosen explicitly"
                    : CpuHasBf16DotProducts() ? "CPU has bf16 dot products"
                                              : "CPU lacks avx512_bf16/AMX";
  const char* what = path == Bf16GemmPath::kOneDnn ? "bf16 operands, oneDNN matmul"
                                                   : "operands rounded to bf16, OpenBLAS sgemm";
  std::string impls = OneDnnImplsUsed();
  return std::string(Bf16GemmPathName(path)) + " (" + what + "; " + why + "; oneDNN ISA " + OneDnnCpuIsaName() +
         (OneDnnBf16Available() ? "" : ", no oneDNN bf16 matmul here") +
         (impls.empty() ? "" : "; oneDNN kernels " + impls) + ")";
}

namespace {
std::atomic<int64_t> scratch_bytes{0};  // Bf16ScratchBytes
}  // namespace

void Bf16Scratch::Free::operator()(void* p) const { std::free(p); }

Bf16Scratch::~Bf16Scratch() { scratch_bytes.fetch_sub(static_cast<int64_t>(bytes_), std::memory_order_relaxed); }

void* Bf16Scratch::Reserve(size_t bytes) {
  if (bytes > bytes_) {
    const size_t rounded = (bytes + 63) / 64 * 64;
    p_.reset();  // the old buffer goes before the larger one comes
    void* p = std::aligned_alloc(64, rounded);
    CHECK(p != nullptr) << "bf16 operand scratch: allocation of " << rounded << " bytes failed";
    AdviseHugePages(p, rounded);
    p_.reset(p);
    scratch_bytes.fetch_add(static_cast<int64_t>(rounded - bytes_), std::memory_order_relaxed);
    bytes_ = rounded;
  }
  return p_.get();
}

int64_t Bf16ScratchBytes() { return scratch_bytes.load(std::memory_order_relaxed); }

Tensor PrepareBf16Operand(const Tensor& src, Bf16GemmPath path, Bf16Scratch* scratch) {
  CHECK((src.dtype == DType::kF32 || src.dtype == DType::kBF16) && src.ndim == 2)
      << "PrepareBf16Operand: want F32 or BF16 2-D, got " << src.DebugString();
  const DType dtype = path == Bf16GemmPath::kOneDnn ? DType::kBF16 : DType::kF32;
  if (src.dtype == DType::kBF16 && path == Bf16GemmPath::kOneDnn) return src;  // already oneDNN's operand
  const int64_t rows = src.shape[0], cols = src.shape[1];
  void* dst = scratch->Reserve(static_cast<size_t>(rows * cols) * DTypeSize(dtype) + 1);
  if (src.dtype == DType::kBF16) {
    RowsBf16ToF32(src, static_cast<float*>(dst));  // bf16 values, exactly
  } else if (path == Bf16GemmPath::kOneDnn) {
    RoundRowsToBf16(src, static_cast<uint16_t*>(dst));
  } else {
    RoundRowsToF32(src, static_cast<float*>(dst));
  }
  return Tensor(dst, dtype, {rows, cols}, src.device);
}

void GemmBf16Prepared(const GemmParams& p, SgemmLibrary sgemm) {
  CHECK(p.a.dtype == p.b.dtype && p.c.dtype == DType::kF32 &&
        (p.a.dtype == DType::kF32 || p.a.dtype == DType::kBF16))
      << "GemmBf16Prepared: a " << p.a.DebugString() << " b " << p.b.DebugString() << " c " << p.c.DebugString();
  if (p.a.dtype == DType::kBF16) {
    OneDnnGemmBf16(p);
  } else {
    Sgemm(p, sgemm);  // F32 operands that hold bf16 values: plain sgemm
  }
}

void GemmBf16(const GemmParams& p, Bf16GemmPath path, SgemmLibrary sgemm) {
  thread_local Bf16Scratch a_scratch, b_scratch;
  GemmParams q = p;
  q.a = PrepareBf16Operand(p.a, path, &a_scratch);
  q.b = PrepareBf16Operand(p.b, path, &b_scratch);
  GemmBf16Prepared(q, sgemm);
}

}  // namespace longctx::cpu
