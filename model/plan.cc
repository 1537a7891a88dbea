// Why: see plan.h. Everything here is closed-form arithmetic on ModelDims in
// int64 (doubles only where a mean is fractional), so the plan for an 8B model
// costs nothing to compute and never touches a Backend.
#include "model/plan.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kernels/ops.h"

namespace longctx {
namespace {

// The operand copies of bf16 products in one training step, as
// model/transformer.cc makes the products and the backend describes its
// copies (Bf16OperandCopies: bytes per element of an F32 and of a BF16
// operand's copy, 0 = read as it is; each kept buffer padded and aligned).
// The layers' products, with D = hidden, q = q_dim, F = ffn:
//   forward  xn1 x Wqkv^T, o x Wo^T, xn2 x Wgu^T, h x Wd^T;
//   backward dy x Wd, dy^T h, dgu^T xn2, dgu x Wgu, dy x Wo, dy^T o,
//            dqkv^T xn1, dqkv x Wqkv;
// xn1, xn2, h and dgu are bf16 tensors, and each dy (dx, dqkv) is rounded
// into a free backward buffer (Transformer::ProductOperand) where it fits:
// dx into d_o [T, q] and dh [T, F], dqkv into dh. The attention output o is
// F32 in the forward, and in dy^T o unless its layer stores it in bf16. The
// weights are F32. One kept buffer per side (A, B) holds the largest copy of
// that side; the LM head keeps its own three (weight, x, a chunk's dlogits).
void CountBf16Copies(const ModelDims& d, int64_t T, int64_t chunk_rows, bool backward_o_bf16,
                     const Bf16OperandCopies& c, MemoryPlan* m) {
  m->bf16_operands = c;
  if (!c.any()) return;
  const int64_t D = d.hidden, V = d.vocab, F = d.ffn, q = d.q_dim(), qkv = d.qkv_dim();
  constexpr DType kF = DType::kF32, kB = DType::kBF16;
  // Bytes of the copy of an operand of `elements` in `dtype` (0: read as it is).
  auto copy = [&c](DType dtype, int64_t elements) { return elements * c.element_bytes(dtype); };
  // dy as the products read it: bf16 where its bf16 copy fits the room it is rounded into.
  const DType dx_first = 2 * D <= 4 * q ? kB : kF, dx_second = 2 * D <= 4 * F ? kB : kF;  // into d_o, dh
  const DType dqkv = 2 * qkv <= 4 * F ? kB : kF;                                          // into dh
  const int64_t a = std::max({copy(kB, T * D),      // xn1, xn2
                              copy(kF, T * q),      // o (forward)
                              copy(kB, T * F),      // h
                              copy(dx_first, T * D), copy(dx_second, T * D),
                              copy(kB, T * 2 * F),  // dgu
                              copy(dqkv, T * qkv)});
  const int64_t b = std::max({copy(kF, qkv * D), copy(kF, D * q), copy(kF, 2 * F * D), copy(kF, D * F),  // weights
                              copy(kB, T * F),                                 // h (dy^T h)
                              copy(kB, T * D),                                 // xn2, xn1
                              copy(backward_o_bf16 ? kB : kF, T * q)});        // o (dy^T o)
  m->bf16_copies_layers = c.Buffer(a) + c.Buffer(b);
  // The LM head: its weight [V, D] and x [T, D] (F32) once per call, and one
  // chunk's dlogits [chunk, V] (F32; unpadded where the backend writes them
  // into their copy as it computes them).
  m->bf16_copies_lm_head = c.Buffer(copy(kF, V * D)) + c.Buffer(copy(kF, T * D)) +
                           c.Buffer(copy(kF, chunk_rows * V), !c.dlogits_unpadded);
  m->bf16_operand_copies = m->bf16_copies_layers + m->bf16_copies_lm_head;
}

}  // namespace

ParamCounts CountParams(const ModelDims& d) {
  ParamCounts p;
  const int64_t D = d.hidden, V = d.vocab, F = d.ffn, hd = d.head_dim;
  p.embedding = V * D;
  p.q = static_cast<int64_t>(d.q_dim()) * D;
  p.k = static_cast<int64_t>(d.kv_dim()) * D;
  p.v = p.k;
  p.o = D * d.q_dim();
  p.qk_norm = d.qk_norm ? 2 * hd : 0;
  p.attention_per_layer = p.q + p.k + p.v + p.o + p.qk_norm;
  p.gate = F * D;
  p.up = F * D;
  p.down = D * F;
  p.mlp_per_layer = p.gate + p.up + p.down;
  p.norms_per_layer = 2 * D;
  p.per_layer = p.attention_per_layer + p.mlp_per_layer + p.norms_per_layer;
  p.layers_total = p.per_layer * d.layers;
  p.final_norm = D;
  p.lm_head = d.tied ? 0 : V * D;
  p.total = p.embedding + p.layers_total + p.final_norm + p.lm_head;
  const int64_t layer_matmul = p.q + p.k + p.v + p.o + p.mlp_per_layer;
  p.matmul = layer_matmul * d.layers + V * D;  // the LM-head product (own matrix or the tied embedding)
  return p;
}

double MeanKeysPerQuery(int64_t T, int64_t w) {
  if (T <= 0) return 0;
  if (w <= 0 || w >= T) return (static_cast<double>(T) + 1.0) / 2.0;
  // Queries 0..w-1 see i+1 keys, the remaining T-w see w.
  const double sum = static_cast<double>(w) * (w + 1) / 2.0 + static_cast<double>(T - w) * w;
  return sum / static_cast<double>(T);
}

FlopCounts CountTrainingFlops(const ModelDims& d, int64_t T) {
  FlopCounts f;
  f.seq_len = T;
  const ParamCounts p = CountParams(d);
  f.matmul_per_token = 6.0 * static_cast<double>(p.matmul);
  // Per key: q·k (2 q_dim) and p·v (2 q_dim) forward; backward twice that.
  for (int l = 0; l < d.layers; ++l) {
    const double keys = MeanKeysPerQuery(T, d.layer_window(l));
    f.mean_keys.push_back(keys);
    f.attention_per_token += 12.0 * d.q_dim() * keys;
  }
  f.total_per_token = f.matmul_per_token + f.attention_per_token;
  f.standard_attention_per_token = 12.0 * d.layers * static_cast<double>(T) * d.hidden;
  f.standard_total_per_token = f.matmul_per_token + f.standard_attention_per_token;
  return f;
}

MemoryPlan EstimateTrainingMemory(const ModelDims& d, int64_t batch, int64_t seq_len,
                                  int64_t logits_chunk_tokens, int recompute_every, bool bf16_activations,
                                  bool bf16_products, const Bf16OperandCopies& bf16_operands) {
  MemoryPlan m;
  constexpr int64_t kF32 = 4, kI32 = 4;
  m.batch = batch;
  m.seq_len = seq_len;
  m.tokens = batch * seq_len;
  const ParamCounts p = CountParams(d);
  m.weights = p.total * kF32;
  m.grads = p.total * kF32;
  m.adam_m = p.total * kF32;
  m.adam_v = p.total * kF32;

  const int64_t D = d.hidden, F = d.ffn, H = d.heads, Hkv = d.kv_heads;
  // What Forward keeps per layer per token for Backward.
  int64_t per = 0;
  per += D;                // layer input x
  per += D + 1;            // norm1 output, rstd1
  per += d.qkv_dim();      // q|k|v (after RoPE / qk-norm)
  per += d.q_dim();        // attention output (before o_proj)
  per += H;                // log-sum-exp per head
  per += D;                // mid residual (x + attn)
  per += D + 1;            // norm2 output, rstd2
  per += 2 * F;            // gate|up
  per += F;                // swiglu output (before down_proj)
  if (d.qk_norm) {
    per += static_cast<int64_t>(H + Hkv) * d.head_dim;  // q, k before their norm
    per += H + Hkv;                                      // their rstd
  }
  m.layer_floats_per_token = per;
  // The part bf16 storage keeps in 2 bytes: norm outputs, q|k|v, attention
  // output, gate|up, swiglu output (and qk-norm's q, k before their norm).
  const int64_t conv = 2 * D + d.qkv_dim() + d.q_dim() + 3 * F +
                       (d.qk_norm ? static_cast<int64_t>(H + Hkv) * d.head_dim : 0);
  // bf16 products: xn1, xn2 and h are bf16 tensors (only products read them;
  // Transformer::product_input_dtype), in every layer and working set.
  // bf16 storage implies bf16 products (ResolveBf16Activations).
  const int64_t product_inputs = 2 * D + F;
  bf16_products = bf16_products || bf16_activations;
  m.bf16_activations = bf16_activations;
  m.bf16_products = bf16_products;
  m.bf16_floats_per_token = bf16_activations ? conv : bf16_products ? product_inputs : 0;
  // Recomputed layers (model/transformer.h) keep their input x; the rest of
  // their activations is one scratch set shared by all of them, which is also
  // the bf16-stored layers' working set.
  int recomputed = 0;
  for (int l = 0; l < d.layers; ++l) recomputed += recompute_every > 0 && l % recompute_every == 0;
  m.recomputed_layers = recomputed;
  const int64_t stored = d.layers - recomputed;
  constexpr int64_t kBF16 = 2;
  const int64_t bf16_floats = m.bf16_floats_per_token;
  const int64_t stored_layer_bytes = (per - bf16_floats) * kF32 + bf16_floats * kBF16;
  // The shared set: a recomputed layer's whole set (its product inputs bf16
  // with bf16 products), else the working copies of the bf16-stored kinds
  // other than the product inputs.
  const int64_t shared_inputs_bf16 = bf16_products ? product_inputs : 0;
  const int64_t shared_bytes = recomputed > 0 ? (per - D - shared_inputs_bf16) * kF32 + shared_inputs_bf16 * kBF16
                               : (bf16_activations && stored > 0) ? (conv - product_inputs) * kF32
                                                                  : 0;
  m.layer_activations = (stored * stored_layer_bytes + recomputed * D * kF32 + shared_bytes) * m.tokens;
  // The last layer's output (the final residual), the final norm's output and rstd.
  m.final_norm = m.tokens * (2 * D + 1) * kF32;
  m.token_buffers = m.tokens * 3 * kI32;
  m.logits_chunk_tokens = std::min(LmHeadChunkRows(logits_chunk_tokens, d.vocab), m.tokens);
  m.logits_chunk = m.logits_chunk_tokens * static_cast<int64_t>(d.vocab) * kF32;
  // Backward scratch, reused by every layer: dx and d_mid, dqkv, d_attn_out,
  // dgate_up, dh (gradient of the swiglu output).
  // dx, dxn, dqkv, d_o, dgate_up, dh; with qk_norm two more q-sized buffers
  // (dense copies for the per-head norm backward).
  m.scratch_floats_per_token = 2 * D + d.qkv_dim() + d.q_dim() + 2 * F + F + (d.qk_norm ? 2 * d.q_dim() : 0);
  m.backward_scratch = m.tokens * m.scratch_floats_per_token * kF32;
  // dy^T o reads a bf16 o where every layer stores o in bf16 (bf16 storage,
  // no recomputed layer: those keep F32 working copies).
  if (bf16_products)
    CountBf16Copies(d, m.tokens, m.logits_chunk_tokens, bf16_activations && recomputed == 0, bf16_operands, &m);
  m.activations = m.layer_activations + m.final_norm + m.token_buffers + m.logits_chunk + m.backward_scratch +
                  m.bf16_operand_copies;
  m.total = m.weights + m.grads + m.adam_m + m.adam_v + m.activations;
  return m;
}

Plan MakePlan(const ModelDims& dims, const PlanOptions& options) {
  Plan plan;
  plan.dims = dims;
  plan.options = options;
  plan.params = CountParams(dims);
  plan.flops = CountTrainingFlops(dims, options.seq_len);
  plan.memory = EstimateTrainingMemory(dims, options.batch, options.seq_len, options.logits_chunk_tokens,
                                       options.recompute_every, options.bf16_activations, options.bf16_products,
                                       options.bf16_operands);
  return plan;
}

namespace {

std::string Commas(int64_t n) {
  std::string digits = absl::StrCat(n < 0 ? -n : n);
  std::string out;
  const int len = static_cast<int>(digits.size());
  for (int i = 0; i < len; ++i) {
    if (i > 0 && (len - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

std::string Bytes(int64_t b) {
  const double x = static_cast<double>(b);
  if (x >= 1024.0 * 1024 * 1024) return absl::StrFormat("%.2f GiB", x / (1024.0 * 1024 * 1024));
  if (x >= 1024.0 * 1024) return absl::StrFormat("%.2f MiB", x / (1024.0 * 1024));
  if (x >= 1024.0) return absl::StrFormat("%.2f KiB", x / 1024.0);
  return absl::StrCat(b, " B");
}

std::string Short(double n) {
  if (n >= 1e9) return absl::StrFormat("%.2fB", n / 1e9);
  if (n >= 1e6) return absl::StrFormat("%.2fM", n / 1e6);
  if (n >= 1e3) return absl::StrFormat("%.1fk", n / 1e3);
  return absl::StrFormat("%.0f", n);
}

std::string Row(const std::string& label, const std::string& value, const std::string& note = "") {
  std::string s = absl::StrFormat("  %-30s %20s", label, value);
  if (!note.empty()) absl::StrAppend(&s, "   ", note);
  absl::StrAppend(&s, "\n");
  return s;
}

std::string Pct(double part, double whole) {
  return whole > 0 ? absl::StrFormat("%5.1f%%", 100.0 * part / whole) : "";
}

}  // namespace

std::string FormatPlanBytes(int64_t bytes) { return Bytes(bytes); }

std::string FormatPlan(const Plan& plan) {
  const ModelDims& d = plan.dims;
  const ParamCounts& p = plan.params;
  const FlopCounts& f = plan.flops;
  const MemoryPlan& m = plan.memory;
  std::string s;
  absl::StrAppend(&s, "Model ", d.name, ": ", d.layers, " layers, hidden ", d.hidden, ", heads ", d.heads,
                  " (kv ", d.kv_heads, ", head_dim ", d.head_dim, "), ffn ", d.ffn, ", vocab ", d.vocab, ", ",
                  d.tied ? "tied" : "untied", " embeddings", d.qk_norm ? ", qk-norm" : "", "\n");
  absl::StrAppend(&s, "Layers: ", LayerKindsString(d.kinds), "   (R = RoPE full",
                  d.any_sliding() ? absl::StrCat(", S = RoPE window ", d.window) : "", ", N = NoPE full; ",
                  d.any_rope() ? absl::StrCat("rope_dim ", d.rope_dim, ", theta ", d.theta) : "no RoPE", ")\n\n");

  const double total = static_cast<double>(p.total);
  absl::StrAppend(&s, "Parameters\n");
  s += Row("embedding", Commas(p.embedding), Pct(p.embedding, total));
  s += Row("attention / layer", Commas(p.attention_per_layer),
           absl::StrCat("q ", Commas(p.q), ", k ", Commas(p.k), ", v ", Commas(p.v), ", o ", Commas(p.o),
                        p.qk_norm ? absl::StrCat(", q/k norm ", Commas(p.qk_norm)) : ""));
  s += Row("mlp / layer", Commas(p.mlp_per_layer),
           absl::StrCat("gate ", Commas(p.gate), ", up ", Commas(p.up), ", down ", Commas(p.down)));
  s += Row("norms / layer", Commas(p.norms_per_layer));
  s += Row("one layer", Commas(p.per_layer));
  s += Row(absl::StrCat("all ", d.layers, " layers"), Commas(p.layers_total), Pct(p.layers_total, total));
  s += Row("final norm", Commas(p.final_norm));
  s += Row("lm head", Commas(p.lm_head), d.tied ? "tied to the embedding" : Pct(p.lm_head, total));
  s += Row("total", Commas(p.total), Short(total));
  s += Row("in matrix products (N)", Commas(p.matmul), "layer matrices + LM head");
  s += "\n";

  const int64_t tokens_per_step = plan.options.batch * plan.options.seq_len * plan.options.grad_accum;
  absl::StrAppend(&s, "Training FLOPs per token at T = ", f.seq_len, "\n");
  s += Row("matmul (6 N)", absl::StrFormat("%.4g", f.matmul_per_token));
  s += Row("attention (as computed)", absl::StrFormat("%.4g", f.attention_per_token),
           "12 x heads x head_dim x mean keys, per layer");
  s += Row("total", absl::StrFormat("%.4g", f.total_per_token));
  s += Row("standard 12 L T D attention", absl::StrFormat("%.4g", f.standard_attention_per_token));
  s += Row("standard total", absl::StrFormat("%.4g", f.standard_total_per_token));
  s += Row(absl::StrCat("per step (", Commas(tokens_per_step), " tok)"),
           absl::StrFormat("%.4g", f.total_per_token * static_cast<double>(tokens_per_step)),
           absl::StrCat("batch ", plan.options.batch, " x seq ", plan.options.seq_len, " x accum ",
                        plan.options.grad_accum));
  s += "\n";

  absl::StrAppend(&s, "Training memory, fp32",
                  m.bf16_activations ? " (activations bf16 where stored)"
                  : m.bf16_products  ? " (bf16 products: their inputs xn1, xn2, h in bf16)"
                                     : "",
                  ", micro-batch ", m.batch, " x ", m.seq_len, " = ", Commas(m.tokens), " tokens\n");
  const double mt = static_cast<double>(m.total);
  s += Row("weights", Bytes(m.weights), Pct(m.weights, mt));
  s += Row("grads", Bytes(m.grads), Pct(m.grads, mt));
  s += Row("adamw m", Bytes(m.adam_m), Pct(m.adam_m, mt));
  s += Row("adamw v", Bytes(m.adam_v), Pct(m.adam_v, mt));
  s += Row("activations: layers", Bytes(m.layer_activations),
           (m.recomputed_layers == 0
               ? absl::StrCat(Commas(m.layer_floats_per_token), " floats / token / layer")
               : absl::StrCat(Commas(m.layer_floats_per_token), " floats / token / stored layer; ",
                              m.recomputed_layers, " recomputed layers keep only their input")) +
               (m.bf16_floats_per_token > 0 ? absl::StrCat(" (", Commas(m.bf16_floats_per_token), " of them bf16)")
                                            : ""));
  s += Row("activations: final x + norm", Bytes(m.final_norm));
  s += Row("activations: token ids", Bytes(m.token_buffers), "ids, targets, positions (int32)");
  s += Row("activations: logits chunk", Bytes(m.logits_chunk), absl::StrCat(m.logits_chunk_tokens, " x vocab"));
  s += Row("activations: bwd scratch", Bytes(m.backward_scratch),
           absl::StrCat(Commas(m.scratch_floats_per_token), " floats / token, reused per layer"));
  if (m.bf16_operands.any())
    s += Row("activations: bf16 operands", Bytes(m.bf16_operand_copies),
             absl::StrCat(m.bf16_operands.name(), ": layers ", Bytes(m.bf16_copies_layers), ", LM head ",
                          Bytes(m.bf16_copies_lm_head)));
  s += Row("activations total", Bytes(m.activations), Pct(m.activations, mt));
  s += Row("total", Bytes(m.total), absl::StrCat(Commas(m.total), " bytes"));
  return s;
}

nlohmann::json PlanToJson(const Plan& plan) {
  const ModelDims& d = plan.dims;
  const ParamCounts& p = plan.params;
  const FlopCounts& f = plan.flops;
  const MemoryPlan& m = plan.memory;
  nlohmann::json j;
  std::vector<std::string> kinds;
  for (AttentionKind k : d.kinds) kinds.push_back(AttentionKind_Name(k));
  j["model"] = {{"name", d.name},         {"vocab", d.vocab},       {"hidden", d.hidden},
                {"layers", d.layers},     {"heads", d.heads},       {"kv_heads", d.kv_heads},
                {"head_dim", d.head_dim}, {"ffn", d.ffn},           {"rope_dim", d.rope_dim},
                {"window", d.window},     {"tied", d.tied},         {"qk_norm", d.qk_norm},
                {"layer_kinds", kinds}};
  j["options"] = {{"batch", plan.options.batch},
                  {"seq_len", plan.options.seq_len},
                  {"grad_accum", plan.options.grad_accum},
                  {"logits_chunk_tokens", plan.options.logits_chunk_tokens}};
  j["params"] = {{"embedding", p.embedding},
                 {"q", p.q},
                 {"k", p.k},
                 {"v", p.v},
                 {"o", p.o},
                 {"qk_norm", p.qk_norm},
                 {"attention_per_layer", p.attention_per_layer},
                 {"gate", p.gate},
                 {"up", p.up},
                 {"down", p.down},
                 {"mlp_per_layer", p.mlp_per_layer},
                 {"norms_per_layer", p.norms_per_layer},
                 {"per_layer", p.per_layer},
                 {"layers_total", p.layers_total},
                 {"final_norm", p.final_norm},
                 {"lm_head", p.lm_head},
                 {"total", p.total},
                 {"matmul", p.matmul}};
  j["flops_per_token"] = {{"seq_len", f.seq_len},
                          {"matmul", f.matmul_per_token},
                          {"attention", f.attention_per_token},
                          {"total", f.total_per_token},
                          {"standard_attention", f.standard_attention_per_token},
                          {"standard_total", f.standard_total_per_token},
                          {"mean_keys_per_layer", f.mean_keys}};
  j["flops_per_step"] = f.total_per_token * static_cast<double>(plan.options.batch * plan.options.seq_len *
                                                                plan.options.grad_accum);
  j["memory_bytes"] = {{"batch", m.batch},
                       {"seq_len", m.seq_len},
                       {"tokens", m.tokens},
                       {"weights", m.weights},
                       {"grads", m.grads},
                       {"adam_m", m.adam_m},
                       {"adam_v", m.adam_v},
                       {"layer_floats_per_token", m.layer_floats_per_token},
                       {"layer_activations", m.layer_activations},
                       {"recomputed_layers", m.recomputed_layers},
                       {"activation_dtype", m.bf16_activations ? "bf16" : "fp32"},
                       {"bf16_products", m.bf16_products},
                       {"bf16_floats_per_token", m.bf16_floats_per_token},
                       {"final_norm", m.final_norm},
                       {"token_buffers", m.token_buffers},
                       {"logits_chunk_tokens", m.logits_chunk_tokens},
                       {"logits_chunk", m.logits_chunk},
                       {"scratch_floats_per_token", m.scratch_floats_per_token},
                       {"backward_scratch", m.backward_scratch},
                       {"bf16_operands", m.bf16_operands.name()},
                       {"bf16_copies_layers", m.bf16_copies_layers},
                       {"bf16_copies_lm_head", m.bf16_copies_lm_head},
                       {"bf16_operand_copies", m.bf16_operand_copies},
                       {"activations", m.activations},
                       {"total", m.total}};
  return j;
}

}  // namespace longctx

namespace longctx {

const char* ParallelModeName(DataParallelMode m) {
  switch (m) {
    case DataParallelMode::kDdp: return "DDP";
    case DataParallelMode::kZero1: return "ZERO1";
    case DataParallelMode::kFsdp: return "FSDP";
  }
  return "?";
}

bool ParseParallelMode(const std::string& s, DataParallelMode* out) {
  std::string l = absl::AsciiStrToLower(s);
  if (l == "ddp") *out = DataParallelMode::kDdp;
  else if (l == "zero1") *out = DataParallelMode::kZero1;
  else if (l == "fsdp") *out = DataParallelMode::kFsdp;
  else return false;
  return true;
}

RankMemoryPlan PlanRankMemory(const Plan& plan, DataParallelMode mode, int world, bool reshard_after_forward,
                              int64_t rank_memory, bool grad_sum_fp64) {
  RankMemoryPlan r;
  r.mode = mode;
  r.world = std::max(1, world);
  r.reshard_after_forward = reshard_after_forward;
  r.rank_memory = rank_memory;
  const ParamCounts& p = plan.params;
  const int64_t top = p.embedding + p.final_norm + p.lm_head, layer = p.per_layer, L = plan.dims.layers;
  const int64_t W = r.world;
  auto shard = [&](int64_t n) { return (n + W - 1) / W; };  // the largest rank's share
  const int64_t shard_total = shard(top) + L * shard(layer), full = p.total;
  const int64_t f = 4;
  r.activations = plan.memory.activations;
  switch (mode) {
    case DataParallelMode::kDdp:
      r.weights = full * f;
      r.grads = full * f;
      r.optimizer = 2 * full * f;
      break;
    case DataParallelMode::kZero1:
      r.weights = full * f;
      r.grads = (full + shard_total) * f;
      r.optimizer = 2 * shard_total * f;
      break;
    case DataParallelMode::kFsdp:
      r.weights = shard_total * f;
      r.grads = (shard_total + shard(std::max(top, layer))) * f;
      r.optimizer = 2 * shard_total * f;
      r.gathered = 2 * top * f + (reshard_after_forward ? 2 * layer : L * layer + layer) * f;
      break;
  }
  if (grad_sum_fp64) {  // mirrors train/parallel/grad_sum64.cc
    const int64_t micro = std::max<int64_t>(1, plan.options.grad_accum), largest = std::max(top, layer);
    const bool sharded_state = mode == DataParallelMode::kFsdp;
    if (micro >= 2) {
      r.grad_sum64 += 8 * (sharded_state ? shard_total : full);                     // accumulator
      if (!sharded_state) r.grad_sum64 += 8 * std::min<int64_t>(largest, 1 << 20);  // conversion scratch
    }
    if (W > 1 && !(W == 2 && micro == 1)) {
      const int64_t c = std::min<int64_t>(std::max<int64_t>(1, (int64_t{4} << 20) / W), std::max<int64_t>(shard(largest), 1));
      r.grad_sum64 += 8 * (c * W + c);  // send + receive pieces
    }
  }
  r.total = r.weights + r.grads + r.optimizer + r.gathered + r.grad_sum64 + r.activations;
  return r;
}

std::string FormatRankMemory(const RankMemoryPlan& r) {
  std::string s = absl::StrFormat("per rank, %s x %d%s:\n", ParallelModeName(r.mode), r.world,
                                  r.mode == DataParallelMode::kFsdp
                                      ? (r.reshard_after_forward ? " (reshard after forward)" : " (keep gathered layers)")
                                      : "");
  auto row = [&](const char* name, int64_t b, const char* note) {
    s += absl::StrFormat("  %-22s %12s  %s\n", name, Bytes(b), note);
  };
  row("weights", r.weights, r.mode == DataParallelMode::kFsdp ? "shard (fp32 master)" : "full");
  row("grads", r.grads,
      r.mode == DataParallelMode::kDdp ? "full" : r.mode == DataParallelMode::kZero1 ? "full + reduce-scattered shard"
                                                                             : "shard accumulator + staging shard");
  row("adamw m + v", r.optimizer, r.mode == DataParallelMode::kDdp ? "full" : "shard");
  if (r.mode == DataParallelMode::kFsdp)
    row("gathered", r.gathered, r.reshard_after_forward ? "buffer 0 + one layer, weights and grads"
                                                         : "buffer 0 w+g, every layer's weights, one layer's grads");
  if (r.grad_sum64 > 0) row("fp64 gradient sum", r.grad_sum64, "grad_sum_fp64: accumulator + reduce buffers");
  row("activations", r.activations, "one micro-batch");
  row("total", r.total, "");
  if (r.rank_memory > 0)
    s += absl::StrFormat("  %s in %s per rank (%.1f%%)\n", r.fits() ? "fits" : "DOES NOT FIT", Bytes(r.rank_memory),
                         100.0 * static_cast<double>(r.total) / static_cast<double>(r.rank_memory));
  return s;
}

nlohmann::json RankMemoryToJson(const RankMemoryPlan& r) {
  nlohmann::json j = {{"mode", ParallelModeName(r.mode)}, {"world", r.world},
                      {"reshard_after_forward", r.reshard_after_forward},
                      {"weights", r.weights}, {"grads", r.grads}, {"optimizer", r.optimizer},
                      {"gathered", r.gathered}, {"grad_sum64", r.grad_sum64}, {"activations", r.activations}, {"total", r.total}};
  if (r.rank_memory > 0) j["rank_memory"] = r.rank_memory, j["fits"] = r.fits();
  return j;
}

}  // namespace longctx
