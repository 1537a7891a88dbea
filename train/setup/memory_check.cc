// Why: see memory_check.h. The exact figures come from model/plan.cc (what the
// trainer really stores); a double-precision estimate of the same terms guards
// the int64 arithmetic there against dims large enough to wrap it.
#include "train/setup/memory_check.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kernels/backend_registry.h"
#include "model/plan.h"
#include "train/setup/sft_config.h"

namespace longctx {
namespace {

std::string Gib(double bytes) { return absl::StrFormat("%.2f GiB", bytes / (1024.0 * 1024 * 1024)); }

DataParallelMode ModeOf(const TrainConfig& c) {
  switch (c.mode()) {
    case ZERO1: return DataParallelMode::kZero1;
    case FSDP: return DataParallelMode::kFsdp;
    default: return DataParallelMode::kDdp;
  }
}

}  // namespace

int64_t AvailableHostMemory() {
  int64_t avail = -1;
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("MemAvailable:", 0) != 0) continue;
    std::istringstream fields(line.substr(13));
    int64_t kib = -1;
    if (fields >> kib && kib >= 0) avail = kib * 1024;
    break;
  }
  if (avail < 0) {
    const long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0) avail = static_cast<int64_t>(pages) * page;
  }
  // A container's cgroup (v2) limit can be below what the host has free.
  int64_t max = -1, current = -1;
  std::ifstream cg_max("/sys/fs/cgroup/memory.max"), cg_cur("/sys/fs/cgroup/memory.current");
  if (cg_max >> max && cg_cur >> current && max > 0 && current >= 0) {
    const int64_t room = std::max<int64_t>(0, max - current);
    avail = avail < 0 ? room : std::min(avail, room);
  }
  return avail;
}

absl::Status CheckMemoryFits(const TrainConfig& config, const ModelDims& d, MemoryUse use, int world,
                             int ranks_on_node, int64_t available_bytes, const Bf16OperandCopies& bf16_operands) {
  if (available_bytes < 0) return absl::OkStatus();
  world = std::max(1, world);
  ranks_on_node = std::max(1, ranks_on_node);
  const double D = d.hidden, V = d.vocab, F = d.ffn, L = d.layers, q = d.q_dim(), kv = d.kv_dim();
  const double per_layer = 2 * D * q + 2 * D * kv + 3 * D * F + 2 * D;
  const double params = V * D * (d.tied ? 1 : 2) + L * per_layer + D;
  // The largest micro-batch of the run (SFT: of every schedule length; sft_config.h).
  // Context parallelism: world / C groups take micro-batches, and a rank
  // holds T / C tokens of each row.
  const int cp = std::max(1, config.context_parallel());
  std::vector<MicroBatchShape> shapes = TrainingMicroBatchShapes(config, std::max(1, world / cp));
  for (MicroBatchShape& m : shapes) m.seq_len /= cp;
  MicroBatchShape shape = shapes.front();
  for (const MicroBatchShape& m : shapes)
    if (m.batch * m.seq_len > shape.batch * shape.seq_len) shape = m;
  const double tokens = static_cast<double>(shape.batch) * static_cast<double>(shape.seq_len);
  // Per layer per token: as plan.cc's EstimateTrainingMemory (dominant terms).
  const double act_per_token_layer = 5 * D + 2 + (q + 2 * kv) + q + d.heads + 3 * F;
  double state = 0, activations = 0;
  if (use == MemoryUse::kTraining) {
    state = 16 * params;  // weights, grads, m, v (fp32)
    activations = 4 * tokens * (L * act_per_token_layer + 2 * D + 1 + 3 + 2 * D) +
                  4 * std::min(tokens, 256.0) * V;
  } else {
    state = 4 * params;
  }
  double need = state + activations;
  // Exact figures when int64 cannot overflow (2^62 leaves a factor of 2 for terms not modelled above).
  if (need < std::ldexp(1.0, 62) && use == MemoryUse::kTraining) {
    PlanOptions o;
    o.batch = shape.batch;
    o.seq_len = shape.seq_len;
    o.grad_accum = std::max(1, config.grad_accum());
    o.recompute_every = config.model().recompute_every();
    o.bf16_activations = ResolveBf16Activations(config.model(), config.precision() == BF16).value_or(false);
    o.bf16_products = config.precision() == BF16;
    o.bf16_operands = bf16_operands;
    Plan plan;
    plan.dims = d;
    plan.options = o;
    plan.params = CountParams(d);
    plan.memory = EstimateTrainingMemory(d, o.batch, o.seq_len, o.logits_chunk_tokens, o.recompute_every,
                                               o.bf16_activations, o.bf16_products, o.bf16_operands);
    // SFT: the micro-batch whose activations are largest (the arena grows to it).
    for (const MicroBatchShape& m : shapes) {
      MemoryPlan mp = EstimateTrainingMemory(d, m.batch, m.seq_len, o.logits_chunk_tokens, o.recompute_every,
                                               o.bf16_activations, o.bf16_products, o.bf16_operands);
      if (mp.activations > plan.memory.activations) {
        plan.memory = mp;
        plan.options.batch = m.batch;
        plan.options.seq_len = m.seq_len;
        shape = m;
      }
    }
    const RankMemoryPlan r =
        PlanRankMemory(plan, ModeOf(config), world, config.fsdp_reshard_after_forward(), 0, config.grad_sum_fp64());
    activations = static_cast<double>(r.activations);
    state = static_cast<double>(r.total - r.activations);
    need = static_cast<double>(r.total);
  } else if (need < std::ldexp(1.0, 62)) {
    state = 4.0 * static_cast<double>(CountParams(d).total);
    need = state;
  }
  const double total = need * ranks_on_node;
  if (total <= static_cast<double>(available_bytes)) return absl::OkStatus();

  const std::string ranks = ranks_on_node > 1 ? absl::StrCat(" × ", ranks_on_node, " ranks on this node") : "";
  const std::string model = absl::StrCat(
      absl::StrFormat("%.4g", params), " parameters (model.hidden_size ", d.hidden, ", model.ffn_hidden_size ", d.ffn,
      ", model.num_layers ", d.layers, ", model.vocab_size ", d.vocab, ") take ", Gib(state),
      use == MemoryUse::kTraining ? " as weights, grads and AdamW state" : " as fp32 weights");
  std::string parts = model, fix = "make the model smaller (the model fields above)";
  if (use == MemoryUse::kTraining) {
    if (IsSftConfig(config)) {
      absl::StrAppend(&parts, ", and the activations of the SFT schedule's largest micro-batch (", shape.batch,
                      " rows × ", shape.seq_len, " tokens, data.sft, model.recompute_every ",
                      config.model().recompute_every(), ") take ", Gib(activations));
      if (activations > state)
        fix = "set model.recompute_every (1 = every layer), lower data.sft.tokens_per_batch or the longest "
              "data.sft.seq_lens, raise grad_accum, or make the model narrower";
    } else {
      absl::StrAppend(&parts, ", and the activations of data.batch_size ", config.data().batch_size(),
                      " × data.seq_len ", config.data().seq_len(), " take ", Gib(activations));
      if (activations > state)
        fix = "lower data.batch_size (grad_accum keeps the global batch) or data.seq_len, or make the model narrower";
    }
  }
  return absl::ResourceExhaustedError(absl::StrCat(
      "memory: ", use == MemoryUse::kTraining ? "training" : "loading the model", " needs ", Gib(need), ranks,
      " but this machine has ", Gib(static_cast<double>(available_bytes)), " available (MemAvailable): ", parts,
      "; ", fix));
}

absl::Status CheckMemoryFitsMachine(const TrainConfig& config, const ModelDims& dims, MemoryUse use,
                                    const Bf16OperandCopies& bf16_operands, int world, int ranks_on_node) {
  // Host memory is what this checks: only a backend whose tensors live there.
  if (absl::StatusOr<BackendInfo> b = FindBackend(config.backend()); !b.ok() || b->device != Device::kCpu)
    return absl::OkStatus();
  return CheckMemoryFits(config, dims, use, world, ranks_on_node, AvailableHostMemory(), bf16_operands);
}

}  // namespace longctx
