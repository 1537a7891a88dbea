// Why: context parallelism is only real over several ranks, so this program
// runs under mpirun (tests/parallel/CMakeLists.txt): the world is one
// context-parallel group of C = world ranks. Every rank computes, on its own,
// the unsplit forward and backward of a packed two-row batch (documents of
// 7, 33, 1 and 55 tokens in the first row, 34, 1 and 61 in the second: some
// longer than a chunk, some shorter, one across several ranks) — the
// reference — and then its share of the same batch through
// train/parallel/context_parallel.h: the zig-zag shard, each layer's key
// blocks swapped over the communicator, dK and dV returned. The losses and
// the gradients summed over the group must equal the reference: the loss
// within 1e-12 relative and every gradient element within 1e-10 of its
// buffer's norm in F64, 1e-6 and 1e-5 in F32 (the summation order differs),
// for full RoPE, RNoPE-SWA with a window inside a chunk and one longer than
// a chunk, ALL_NOPE_FULL, QK-norm + RoPER, layer recomputation (the
// exchange runs again for the recomputed forward) and the balanced split. It also prints the bytes
// each layer kind moved and checks a sliding-window layer moved only its halo:
// at most (w - 1) keys before each of the rank's chunks, per row and direction.
//   context_parallel_check            (every case; prints PASS on rank 0)
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kernels/backend.h"
#include "kernels/cpu/cpu_backend.h"
#include "launch/communicator.h"
#include "model/config.h"
#include "model/transformer.h"
#include "tests/support/small_model.h"
#include "train/device_batch.h"
#include "train/parallel/context_parallel.h"

namespace longctx {
namespace {

void Check(const absl::Status& st) {
  if (!st.ok()) AbortJob(st);
}

struct Case {
  std::string name;
  LayerPattern pattern;
  int window;  // RNOPE_SWA only
  bool qk_norm_roper;
  int recompute;
  DType dtype;
  bool balanced = false;
};

std::vector<double> HostBuffer(const ParamStore& s, int b, DType dtype) {
  const int64_t n = s.layout().buffer_size(b);
  std::vector<double> out(n);
  if (dtype == DType::kF64) {
    s.CopyToHost(b, out.data());
  } else {
    std::vector<float> f(n);
    s.CopyToHost(b, f.data());
    for (int64_t i = 0; i < n; ++i) out[i] = f[i];
  }
  return out;
}

int Main() {
  absl::StatusOr<std::unique_ptr<Communicator>> comm_or = MakeCommunicator();
  Check(comm_or.status());
  Communicator& comm = **comm_or;
  const int C = comm.world_size(), rank = comm.rank();
  std::unique_ptr<Backend> be = MakeCpuBackend();
  Check(be->SetThreads(1));
  // Two rows of 96 tokens (a multiple of 2C for C = 1, 2, 4: chunks of 24, 12).
  const std::vector<int32_t> cu = {0, 7, 40, 41, 96, 130, 131, 192};
  const int32_t T = 96;

  const std::vector<Case> cases = {
      {"rope_full", ALL_ROPE_FULL, 0, false, 0, DType::kF64},
      {"rnope_swa_w5", RNOPE_SWA, 5, false, 0, DType::kF64},
      {"rnope_swa_w40", RNOPE_SWA, 40, false, 0, DType::kF64},
      {"nope_full", ALL_NOPE_FULL, 0, false, 0, DType::kF64},
      {"rnope_swa_w9_qknorm_roper", RNOPE_SWA, 9, true, 0, DType::kF64},
      {"rnope_swa_w40_recompute", RNOPE_SWA, 40, false, 1, DType::kF64},
      {"rope_full_f32", ALL_ROPE_FULL, 0, false, 0, DType::kF32},
      {"rnope_swa_w40_f32", RNOPE_SWA, 40, true, 0, DType::kF32},
      {"rope_full_balanced", ALL_ROPE_FULL, 0, false, 0, DType::kF64, true},
      {"rnope_swa_w9_balanced", RNOPE_SWA, 9, true, 1, DType::kF64, true},
  };
  int failures = 0;
  for (const Case& c : cases) {
    ModelConfig mc = testing::SmallTestModelConfig(4, 2, c.pattern, c.qk_norm_roper, c.qk_norm_roper);
    if (c.pattern == RNOPE_SWA) mc.set_sliding_window(c.window);
    absl::StatusOr<ModelDims> dims = ResolveModelConfig(mc);
    Check(dims.status());
    testing::PackedTestBatch full = testing::MakePackedTestBatch(cu, dims->vocab);

    Transformer ref(*dims, be.get(), c.dtype);
    ref.InitParams(7);
    ref.set_recompute_every(c.recompute);
    ref.grads().Zero();
    const double loss_ref = ref.ForwardBackward(full.Tensors(), 1.0, true);

    std::vector<int32_t> windows;
    for (int l = 0; l < dims->layers; ++l) windows.push_back(dims->layer_window(l));
    absl::StatusOr<std::unique_ptr<ContextParallel>> cp = ContextParallel::Create(
        &comm, be.get(), c.dtype, C, c.balanced ? ContextParallel::Split::kBalanced : ContextParallel::Split::kZigZag,
        windows);
    Check(cp.status());
    PackedBatch pb;
    pb.batch_size = 2;
    pb.seq_len = T;
    pb.inputs = full.ids;
    pb.targets = full.targets;
    pb.positions = full.positions;
    pb.cu_seqlens = full.cu;
    for (int32_t t : pb.targets) pb.num_target_tokens += t >= 0;
    absl::StatusOr<PackedBatch> shard = (*cp)->Shard(pb);
    Check(shard.status());
    Transformer m(*dims, be.get(), c.dtype);
    m.InitParams(7);
    m.set_recompute_every(c.recompute);
    m.grads().Zero();
    DeviceBatch db(be.get());
    m.set_context_attention(cp->get());
    double loss = m.ForwardBackward(db.Upload(*shard), 1.0, true);
    m.set_context_attention(nullptr);
    Check(comm.AllReduceSum(&loss, 1));
    const double loss_rel = std::abs(loss - loss_ref) / std::abs(loss_ref);
    double worst = 0;
    for (int b = 0; b < m.layout().num_buffers(); ++b) {
      if (m.layout().buffer_size(b) == 0) continue;
      Check(comm.AllReduceSum(m.grads().buffer(b)));
      const std::vector<double> g = HostBuffer(m.grads(), b, c.dtype), r = HostBuffer(ref.grads(), b, c.dtype);
      double norm = 0, diff = 0;
      for (size_t i = 0; i < r.size(); ++i) norm += r[i] * r[i];
      norm = std::sqrt(norm);
      for (size_t i = 0; i < r.size(); ++i) diff = std::max(diff, std::abs(g[i] - r[i]));
      worst = std::max(worst, norm > 0 ? diff / norm : diff);
    }
    const bool f64 = c.dtype == DType::kF64;
    const bool ok = loss_rel <= (f64 ? 1e-12 : 1e-6) && worst <= (f64 ? 1e-10 : 1e-5);
    // The halo bound: a sliding-window layer receives per row at most w - 1
    // keys (K and V) before each of the rank's pieces (2 zig-zag chunks; up
    // to 8 balanced), forward and backward (and the recomputed forward).
    const std::vector<ContextTraffic> traffic = (*cp)->TakeTraffic();
    const int64_t esz = static_cast<int64_t>(DTypeSize(c.dtype)), kv_row = 2 * dims->kv_heads * dims->head_dim * esz;
    int swa_layers = 0;
    for (int l = 0; l < dims->layers; ++l) swa_layers += dims->layer_window(l) > 0;
    const int passes = 2 + (c.recompute > 0 ? 1 : 0);
    const int64_t halo_bound =
        c.pattern == RNOPE_SWA ? int64_t{2} * (c.balanced ? 8 : 2) * (c.window - 1) * kv_row * swa_layers * passes : 0;
    const bool halo_ok = traffic[1].kv_received <= halo_bound;
    if (!ok || !halo_ok) ++failures;
    if (rank == 0)
      std::printf("context_parallel_check: C %d %-26s loss %.17g vs %.17g (rel %.3g), worst grad %.3g of its norm; "
                  "rank 0 received K,V %lld B full layers, %lld B window layers (halo bound %lld); %s\n",
                  C, c.name.c_str(), loss, loss_ref, loss_rel, worst, static_cast<long long>(traffic[0].kv_received),
                  static_cast<long long>(traffic[1].kv_received), static_cast<long long>(halo_bound),
                  ok && halo_ok ? "ok" : "FAIL");
  }
  int64_t bad = failures;
  Check(comm.AllReduceMax(&bad, 1));
  if (rank == 0) std::printf("context_parallel_check: %s\n", bad == 0 ? "PASS" : "FAIL");
  std::fflush(stdout);
  return bad == 0 ? 0 : 1;
}

}  // namespace
}  // namespace longctx

int main() { return longctx::Main(); }
