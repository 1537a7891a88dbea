// Why: see context_plan.h. Closed-form int64 arithmetic on ModelDims, like
// model/plan.cc: nothing is allocated, nothing touches a Backend.
#include "model/context_plan.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/log.h"

namespace longctx {
namespace {

int ZigZagOwner(int64_t chunk, int cp) { return static_cast<int>(chunk < cp ? chunk : 2 * cp - 1 - chunk); }

}  // namespace

int64_t ZigZagReceivedTokens(int64_t T, int cp, int rank, int64_t window) {
  CHECK(cp >= 1 && T > 0 && T % (2 * cp) == 0 && rank >= 0 && rank < cp)
      << "T " << T << " cp " << cp << " rank " << rank;
  if (window <= 0) return T - T / cp;
  const int64_t L = T / (2 * cp);
  // The window before each own chunk, merged (the two may overlap).
  std::vector<std::pair<int64_t, int64_t>> want;
  for (int64_t c : {int64_t{rank}, int64_t{2 * cp - 1 - rank}}) {
    const int64_t begin = c * L;
    if (begin > 0) want.push_back({std::max<int64_t>(0, begin - (window - 1)), begin});
  }
  std::sort(want.begin(), want.end());
  std::vector<std::pair<int64_t, int64_t>> merged;
  for (const auto& iv : want) {
    if (!merged.empty() && iv.first <= merged.back().second)
      merged.back().second = std::max(merged.back().second, iv.second);
    else
      merged.push_back(iv);
  }
  int64_t tokens = 0;
  for (const auto& [a, b] : merged)
    for (int64_t j = a / L; j * L < b; ++j)
      if (ZigZagOwner(j, cp) != rank) tokens += std::min(b, (j + 1) * L) - std::max(a, j * L);
  return tokens;
}

absl::StatusOr<ContextParallelPlan> PlanContextParallel(const Plan& plan, int cp, DataParallelMode mode, int world,
                                                        bool reshard_after_forward, int64_t rank_memory,
                                                        bool grad_sum_fp64) {
  const ModelDims& d = plan.dims;
  const PlanOptions& o = plan.options;
  const int64_t T = o.seq_len;
  if (cp < 1) return absl::InvalidArgumentError(absl::StrCat("--cp ", cp, ": must be >= 1"));
  if (world < 1 || world % cp != 0)
    return absl::InvalidArgumentError(absl::StrCat("--cp ", cp, " must divide --world ", world,
                                                   " (world = data-parallel x context-parallel ranks)"));
  if (T <= 0 || T % (2 * cp) != 0)
    return absl::InvalidArgumentError(absl::StrCat("--cp ", cp, ": seq_len ", T, " is not divisible by 2 x cp = ",
                                                   2 * cp, " (each row is cut into 2C equal chunks)"));
  ContextParallelPlan p;
  p.cp = cp;
  p.world = world;
  p.dp = world / cp;
  p.seq_len = T;
  p.chunk_tokens = T / (2 * cp);
  p.rank_tokens = T / cp;
  p.rows_per_step = std::max<int64_t>(1, o.batch) * std::max<int64_t>(1, o.grad_accum);
  p.tokens_per_step = p.dp * p.rows_per_step * T;
  p.element_bytes = o.bf16_activations ? 2 : 4;
  p.memory = cp == 1 ? plan.memory
                     : EstimateTrainingMemory(d, o.batch, p.rank_tokens, o.logits_chunk_tokens, o.recompute_every,
                                              o.bf16_activations, o.bf16_products, o.bf16_operands);
  const int64_t kv_token_bytes = 2 * int64_t{d.kv_dim()} * p.element_bytes;  // K and V of one token
  // Layer kinds: full (window 0) and each distinct window.
  for (int l = 0; l < d.layers; ++l) {
    const int64_t w = d.layer_window(l);
    auto it = std::find_if(p.layers.begin(), p.layers.end(), [&](const ContextLayerComm& c) { return c.window == w; });
    if (it == p.layers.end()) {
      ContextLayerComm c;
      c.kind = w == 0 ? "full" : "swa";
      c.window = w;
      p.layers.push_back(c);
      it = p.layers.end() - 1;
    }
    ++it->layers;
    if (o.recompute_every > 0 && l % o.recompute_every == 0) ++it->recomputed;
  }
  std::stable_sort(p.layers.begin(), p.layers.end(),
                   [](const ContextLayerComm& a, const ContextLayerComm& b) { return a.window < b.window; });
  int64_t buffers = 0;
  for (ContextLayerComm& c : p.layers) {
    if (cp > 1)
      for (int r = 0; r < cp; ++r) c.tokens = std::max(c.tokens, ZigZagReceivedTokens(T, cp, r, c.window));
    c.forward = c.tokens * kv_token_bytes;
    c.backward = 2 * c.forward;
    c.per_row = c.forward + c.backward;
    c.per_row_all = c.layers * c.per_row + c.recomputed * c.forward;
    p.bytes_per_row += c.per_row_all;
    if (cp > 1) {
      const int64_t rows = std::max<int64_t>(1, o.batch);
      const int64_t b = c.window == 0
                            ? rows * (4 * p.rank_tokens * kv_token_bytes +
                                      p.rank_tokens * (int64_t{d.q_dim()} + d.heads) * 4)
                            : rows * 2 * c.tokens * kv_token_bytes;
      buffers = std::max(buffers, b);
    }
  }
  p.exchange_buffers = buffers;
  p.bytes_per_step = p.bytes_per_row * p.rows_per_step;
  Plan local = plan;
  local.memory = p.memory;
  local.memory.activations += p.exchange_buffers;
  local.memory.total += p.exchange_buffers;
  p.ranks = PlanRankMemory(local, mode, world, reshard_after_forward, rank_memory, grad_sum_fp64);
  return p;
}

std::string FormatContextParallelPlan(const ContextParallelPlan& p) {
  std::string s = absl::StrFormat(
      "context parallel: C = %d of world %d (data-parallel %d); T = %d cut into %d chunks of %d tokens, "
      "%d tokens per rank per row (zig-zag: rank r holds chunks r and 2C-1-r)\n",
      p.cp, p.world, p.dp, p.seq_len, 2 * p.cp, p.chunk_tokens, p.rank_tokens);
  s += absl::StrFormat("  step: %d groups x %d rows x %d tokens = %d tokens\n", p.dp, p.rows_per_step, p.seq_len,
                       p.tokens_per_step);
  s += absl::StrFormat("  activations per rank   %12s  one micro-batch of %d x %d tokens\n",
                       FormatPlanBytes(p.memory.activations), p.memory.batch, p.memory.seq_len);
  s += absl::StrFormat("  exchange buffers       %12s  K/V ring blocks + LSE merge (full), halo (swa); one layer at a time\n",
                       FormatPlanBytes(p.exchange_buffers));
  s += absl::StrFormat("  communication per rank, received (K/V and dK/dV in %d-byte elements; most loaded rank):\n",
                       p.element_bytes);
  s += absl::StrFormat("    %-12s %6s %14s %12s %12s %14s\n", "layer kind", "layers", "K/V tokens/row", "fwd/row",
                       "bwd/row", "kind/row");
  for (const ContextLayerComm& c : p.layers) {
    const std::string kind = c.window == 0 ? "full" : absl::StrCat("swa w=", c.window);
    s += absl::StrFormat("    %-12s %6d %14d %12s %12s %14s%s\n", kind, c.layers, c.tokens, FormatPlanBytes(c.forward),
                         FormatPlanBytes(c.backward), FormatPlanBytes(c.per_row_all),
                         c.recomputed > 0 ? absl::StrCat("  (", c.recomputed, " recomputed: fwd twice)") : "");
  }
  s += absl::StrFormat("    all layers: %s per row, %s per step (%d rows per group per step)\n",
                       FormatPlanBytes(p.bytes_per_row), FormatPlanBytes(p.bytes_per_step), p.rows_per_step);
  s += "\n" + FormatRankMemory(p.ranks);
  return s;
}

nlohmann::json ContextParallelPlanToJson(const ContextParallelPlan& p) {
  nlohmann::json layers = nlohmann::json::array();
  for (const ContextLayerComm& c : p.layers)
    layers.push_back({{"kind", c.kind}, {"window", c.window}, {"layers", c.layers}, {"recomputed", c.recomputed},
                      {"tokens_per_row", c.tokens}, {"forward_bytes_per_row", c.forward},
                      {"backward_bytes_per_row", c.backward}, {"bytes_per_row_all_layers", c.per_row_all}});
  return {{"cp", p.cp},
          {"world", p.world},
          {"dp", p.dp},
          {"seq_len", p.seq_len},
          {"chunk_tokens", p.chunk_tokens},
          {"rank_tokens", p.rank_tokens},
          {"rows_per_step", p.rows_per_step},
          {"tokens_per_step", p.tokens_per_step},
          {"element_bytes", p.element_bytes},
          {"activations", p.memory.activations},
          {"exchange_buffers", p.exchange_buffers},
          {"layers", layers},
          {"bytes_per_row", p.bytes_per_row},
          {"bytes_per_step", p.bytes_per_step},
          {"per_rank", RankMemoryToJson(p.ranks)}};
}

}  // namespace longctx
