// Why: on CPUs with AVX512-BF16 or AMX, bf16 products must run on those
// instructions; oneDNN's matmul primitive picks the best kernel for the CPU at
// run time. Transposes are expressed as strides of the memory descriptors
// (an op(A) = A^T operand of stored shape [K, M] with leading dimension lda has
// strides {1, lda}), so no operand is copied here; alpha is an output scale and
// beta a sum post-op. Building a primitive costs far more than a small product,
// so primitives are cached by (shape, strides, transposes, alpha, beta): a
// training step reuses the same few dozen.
#include <map>
#include <set>
#include <mutex>
#include <string>
#include <tuple>

#include <oneapi/dnnl/dnnl.hpp>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/gemm_bf16.h"
#include "base/log.h"

namespace longctx::cpu {
namespace {

using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, bool, bool, double, double>;

struct Entry {
  dnnl::memory::desc a, b, c;
  dnnl::matmul matmul;
};

struct OneDnn {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  std::mutex mu;
  std::map<Key, Entry> cache;
  std::set<std::string> impls;  // oneDNN's implementation names, e.g. "brg:avx512_core_amx"
};

OneDnn& Instance() {
  static OneDnn* d = new OneDnn();  // never destroyed: used until process exit
  return *d;
}

}  // namespace

bool CpuHasBf16DotProducts() {
  const unsigned isa = static_cast<unsigned>(dnnl_get_effective_cpu_isa());
  const unsigned bf16 = static_cast<unsigned>(dnnl_cpu_isa_avx512_core_bf16);
  return (isa & bf16) == bf16;  // avx512_core_amx includes every avx512_core_bf16 bit
}

std::string OneDnnCpuIsaName() {
  switch (dnnl_get_effective_cpu_isa()) {
    case dnnl_cpu_isa_sse41: return "sse41";
    case dnnl_cpu_isa_avx: return "avx";
    case dnnl_cpu_isa_avx2: return "avx2";
    case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
    case dnnl_cpu_isa_avx512_mic: return "avx512_mic";
    case dnnl_cpu_isa_avx512_mic_4ops: return "avx512_mic_4ops";
    case dnnl_cpu_isa_avx512_core: return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
    default: return "other";
  }
}

bool OneDnnBf16Available() {
  static const bool ok = [] {
    try {
      using dt = dnnl::memory::data_type;
      const dnnl::memory::desc a({4, 4}, dt::bf16, dnnl::memory::dims{4, 1});
      const dnnl::memory::desc c({4, 4}, dt::f32, dnnl::memory::dims{4, 1});
      dnnl::matmul::primitive_desc(dnnl::matmul::desc(a, a, c), Instance().engine);
      return true;
    } catch (const dnnl::error&) {
      return false;  // oneDNN 2.6 offers bf16 only from avx512_core up
    }
  }();
  return ok;
}

std::string OneDnnImplsUsed() {
  OneDnn& d = Instance();
  std::lock_guard<std::mutex> lock(d.mu);
  std::string out;
  for (const std::string& s : d.impls) out += (out.empty() ? "" : ",") + s;
  return out;
}

void OneDnnGemmBf16(const GemmParams& p) {
  CHECK(p.a.dtype == DType::kBF16 && p.b.dtype == DType::kBF16 && p.c.dtype == DType::kF32)
      << "OneDnnGemmBf16: a " << p.a.DebugString() << " b " << p.b.DebugString() << " c " << p.c.DebugString();
  const int64_t m = p.trans_a ? p.a.shape[1] : p.a.shape[0];
  const int64_t k = p.trans_a ? p.a.shape[0] : p.a.shape[1];
  const int64_t n = p.trans_b ? p.b.shape[0] : p.b.shape[1];
  if (m == 0 || n == 0) return;
  if (k == 0) {  // BLAS semantics: C = beta C
    if (p.beta == 0.0) {
      Fill(p.c, 0.0);
    } else if (p.beta != 1.0) {
      Scale(p.c, p.beta);
    }
    return;
  }
  const int64_t lda = p.a.stride0(), ldb = p.b.stride0(), ldc = p.c.stride0();
  const Key key{m, n, k, lda, ldb, ldc, p.trans_a, p.trans_b, p.alpha, p.beta};
  OneDnn& d = Instance();
  Entry e;
  try {
    std::lock_guard<std::mutex> lock(d.mu);
    auto it = d.cache.find(key);
    if (it == d.cache.end()) {
      using dt = dnnl::memory::data_type;
      Entry fresh;
      fresh.a = dnnl::memory::desc({m, k}, dt::bf16,
                                p.trans_a ? dnnl::memory::dims{1, lda} : dnnl::memory::dims{lda, 1});
      fresh.b = dnnl::memory::desc({k, n}, dt::bf16,
                                p.trans_b ? dnnl::memory::dims{1, ldb} : dnnl::memory::dims{ldb, 1});
      fresh.c = dnnl::memory::desc({m, n}, dt::f32, dnnl::memory::dims{ldc, 1});
      dnnl::primitive_attr attr;
      if (p.alpha != 1.0) attr.set_output_scales(0, {static_cast<float>(p.alpha)});
      if (p.beta != 0.0) {
        dnnl::post_ops ops;
        ops.append_sum(static_cast<float>(p.beta));
        attr.set_post_ops(ops);
      }
      const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(fresh.a, fresh.b, fresh.c), attr, d.engine);
      d.impls.insert(pd.impl_info_str());
      fresh.matmul = dnnl::matmul(pd);
      it = d.cache.emplace(key, std::move(fresh)).first;
    }
    e = it->second;
  } catch (const dnnl::error& err) {
    LOG(FATAL) << "oneDNN bf16 matmul " << m << "x" << n << "x" << k << (p.trans_a ? " A^T" : "")
               << (p.trans_b ? " B^T" : "") << ": " << err.what();
  }
  try {
    dnnl::stream stream(d.engine);
    dnnl::memory a_mem(e.a, d.engine, p.a.data), b_mem(e.b, d.engine, p.b.data), c_mem(e.c, d.engine, p.c.data);
    e.matmul.execute(stream, {{DNNL_ARG_SRC, a_mem}, {DNNL_ARG_WEIGHTS, b_mem}, {DNNL_ARG_DST, c_mem}});
    stream.wait();
  } catch (const dnnl::error& err) {
    LOG(FATAL) << "oneDNN bf16 matmul " << m << "x" << n << "x" << k << ": " << err.what();
  }
}

}  // namespace longctx::cpu
