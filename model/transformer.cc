// Why: see transformer.h. Every activation the backward pass reads is stored
// by the forward pass in one arena (Activations), sized once per token count
// and reused across steps, so a training step allocates nothing. The block's
// forward pieces are shared with the inference engine (model/block_forward.h,
// model/layer_attention.h). bf16 activation storage (transformer.h,
// docs/BF16_ACTIVATIONS.md) only adds Copy conversions at a layer's two ends:
// the layer code in between always runs on F32 tensors.
#include "model/transformer.h"

#include <random>

#include "absl/strings/match.h"
#include "base/log.h"
#include "model/block_forward.h"

namespace longctx {

struct Transformer::Activations {
  int64_t n = 0;
  int recompute_every = 0;                // the setting the arena was carved for
  DType activation_dtype = DType::kF32;   // and the storage
  uint32_t bf16_set = 0;
  DType product_input_dtype = DType::kF32;  // of xn1, xn2, h (Transformer::product_input_dtype)
  DeviceBuffer arena;
  // Per layer (x has layers + 1 entries: x[layers] is the final residual).
  // These are the tensors the layer computes with (F32, except xn1, xn2 and h
  // with bf16 products: product_input_dtype()); for a recomputed layer and for
  // a bf16-stored tensor they are the shared working set's.
  std::vector<Tensor> x, xn1, rstd1, qkv, o, lse, xmid, xn2, rstd2, gu, h;
  std::vector<Tensor> qraw, kraw, qrstd, krstd;  // qk_norm only
  // Per layer: the bf16 stores and the F32 working tensors they hold (empty for
  // recomputed layers and with F32 storage).
  struct Bf16Pair {
    Tensor store, work;
    uint32_t kind;  // a Bf16Act bit
  };
  std::vector<std::vector<Bf16Pair>> bf16;
  Tensor xf, rstdf;                              // final norm
  // Backward scratch, reused by every layer.
  Tensor dx, dxn, dh, dgu, d_o, dqkv, qk_tmp1, qk_tmp2;
};

namespace {

bool IsNormWeight(const std::string& name) { return absl::EndsWith(name, "norm.weight"); }

}  // namespace

Transformer::Transformer(const ModelDims& dims, Backend* backend, DType dtype)
    : dims_(dims),
      backend_(backend),
      dtype_(dtype),
      layout_(dims),
      params_(&layout_, backend, dtype),
      grads_(&layout_, backend, dtype),
      acts_(std::make_unique<Activations>()),
      attention_(backend, dtype) {}

Transformer::~Transformer() = default;

void Transformer::InitParams(uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (int b = 0; b < layout_.num_buffers(); ++b) {
    std::vector<double> host(layout_.buffer_size(b), 0.0);
    for (const ParamSlice& s : layout_.slices()) {
      if (s.buffer != b) continue;
      double* p = host.data() + s.offset;
      if (IsNormWeight(s.name)) {
        for (int64_t i = 0; i < s.numel(); ++i) p[i] = 1.0;
        continue;
      }
      const bool out_proj = absl::StrContains(s.name, "o_proj") || absl::StrContains(s.name, "down_proj");
      std::normal_distribution<double> normal(0.0, out_proj ? dims_.out_init_std : dims_.init_std);
      for (int64_t i = 0; i < s.numel(); ++i) p[i] = normal(rng);
    }
    if (dtype_ == DType::kF64) {
      params_.CopyFromHost(b, host.data());
    } else {
      std::vector<float> f(host.begin(), host.end());
      params_.CopyFromHost(b, f.data());
    }
  }
}

size_t Transformer::activation_bytes() const { return acts_->arena.bytes(); }

void Transformer::set_activation_dtype(DType d) {
  CHECK(d == DType::kF32 || d == DType::kBF16) << "activation dtype must be F32 or BF16, got " << DTypeName(d);
  CHECK(d == DType::kF32 || dtype_ == DType::kF32)
      << "bf16 activation storage needs an F32 model (this model is " << DTypeName(dtype_) << ")";
  activation_dtype_ = d;
}

void Transformer::EnsureActivations(int64_t n) {
  Activations& a = *acts_;
  const uint32_t set = activation_dtype_ == DType::kBF16 ? bf16_set_ : 0;
  const DType pdt = product_input_dtype();
  if (a.n == n && a.recompute_every == recompute_every_ && a.activation_dtype == activation_dtype_ &&
      a.bf16_set == set && a.product_input_dtype == pdt)
    return;
  const int L = dims_.layers;
  const int64_t D = dims_.hidden, hd = dims_.head_dim, H = dims_.heads, Hkv = dims_.kv_heads, F = dims_.ffn;
  const int64_t wqkv = (H + 2 * Hkv) * hd;
  bool any_recomputed = false, any_stored = false;
  for (int l = 0; l < L; ++l) (recomputes(l) ? any_recomputed : any_stored) = true;
  // Two passes: count, then carve (each tensor 64-byte aligned).
  size_t cursor = 0;
  char* base = nullptr;
  auto carve = [&](std::initializer_list<int64_t> shape, DType dt) {
    Tensor t(base ? base + cursor : nullptr, dt, shape, backend_->device());
    cursor += (t.numel() * DTypeSize(dt) + 63) / 64 * 64;
    return t;
  };
  auto carve_f = [&](std::initializer_list<int64_t> shape) { return carve(shape, dtype_); };
  // xn1, xn2 and h: read only by products, so made in their operand dtype.
  auto carve_p = [&](std::initializer_list<int64_t> shape) { return carve(shape, pdt); };
  // The shared working set: every activation of the recomputed layers (all of
  // them recompute into it), and the F32 working copy of each bf16-stored kind.
  struct Set {
    Tensor xn1, rstd1, qkv, o, lse, xmid, xn2, rstd2, gu, h, qraw, kraw, qrstd, krstd;
  };
  auto build = [&]() {
    a.x.clear(); a.xn1.clear(); a.rstd1.clear(); a.qkv.clear(); a.o.clear(); a.lse.clear();
    a.xmid.clear(); a.xn2.clear(); a.rstd2.clear(); a.gu.clear(); a.h.clear();
    a.qraw.clear(); a.kraw.clear(); a.qrstd.clear(); a.krstd.clear();
    a.bf16.clear();
    for (int l = 0; l <= L; ++l) a.x.push_back(carve_f({n, D}));
    Set w;
    // A bf16-stored kind needs an F32 working copy, except the product inputs
    // once they are bf16 themselves.
    auto shared = [&](uint32_t bit) {
      const bool own_bf16 = pdt == DType::kBF16 && (bit & kActProductInputs) != 0;
      return any_recomputed || (any_stored && (set & bit) != 0 && !own_bf16);
    };
    if (shared(kActXn1)) w.xn1 = carve_p({n, D});
    if (any_recomputed) w.rstd1 = carve_f({n});
    if (shared(kActQkv)) w.qkv = carve_f({n, wqkv});
    if (shared(kActO)) w.o = carve_f({n, H * hd});
    if (any_recomputed) w.lse = carve_f({H, n});
    if (any_recomputed) w.xmid = carve_f({n, D});
    if (shared(kActXn2)) w.xn2 = carve_p({n, D});
    if (any_recomputed) w.rstd2 = carve_f({n});
    if (shared(kActGu)) w.gu = carve_f({n, 2 * F});
    if (shared(kActH)) w.h = carve_p({n, F});
    if (dims_.qk_norm) {
      if (shared(kActQkRaw)) w.qraw = carve_f({n, H * hd});
      if (shared(kActQkRaw)) w.kraw = carve_f({n, Hkv * hd});
      if (any_recomputed) w.qrstd = carve_f({n * H});
      if (any_recomputed) w.krstd = carve_f({n * Hkv});
    }
    for (int l = 0; l < L; ++l) {
      a.bf16.emplace_back();
      if (recomputes(l)) {
        a.xn1.push_back(w.xn1); a.rstd1.push_back(w.rstd1); a.qkv.push_back(w.qkv); a.o.push_back(w.o);
        a.lse.push_back(w.lse); a.xmid.push_back(w.xmid); a.xn2.push_back(w.xn2); a.rstd2.push_back(w.rstd2);
        a.gu.push_back(w.gu); a.h.push_back(w.h);
        if (dims_.qk_norm) {
          a.qraw.push_back(w.qraw); a.kraw.push_back(w.kraw); a.qrstd.push_back(w.qrstd); a.krstd.push_back(w.krstd);
        }
        continue;
      }
      // A stored layer: its own F32 tensor, or a bf16 store paired with the working set's.
      std::vector<Activations::Bf16Pair>& pairs = a.bf16.back();
      auto slot = [&](const Tensor& work, uint32_t bit, std::initializer_list<int64_t> shape) {
        const DType own = (bit & kActProductInputs) != 0 ? pdt : dtype_;
        if ((set & bit) == 0 || own == DType::kBF16) return carve(shape, own);
        pairs.push_back({carve(shape, DType::kBF16), work, bit});
        return work;
      };
      a.xn1.push_back(slot(w.xn1, kActXn1, {n, D}));
      a.rstd1.push_back(carve_f({n}));
      a.qkv.push_back(slot(w.qkv, kActQkv, {n, wqkv}));
      a.o.push_back(slot(w.o, kActO, {n, H * hd}));
      a.lse.push_back(carve_f({H, n}));
      a.xmid.push_back(carve_f({n, D}));
      a.xn2.push_back(slot(w.xn2, kActXn2, {n, D}));
      a.rstd2.push_back(carve_f({n}));
      a.gu.push_back(slot(w.gu, kActGu, {n, 2 * F}));
      a.h.push_back(slot(w.h, kActH, {n, F}));
      if (dims_.qk_norm) {
        a.qraw.push_back(slot(w.qraw, kActQkRaw, {n, H * hd}));
        a.kraw.push_back(slot(w.kraw, kActQkRaw, {n, Hkv * hd}));
        a.qrstd.push_back(carve_f({n * H}));
        a.krstd.push_back(carve_f({n * Hkv}));
      }
    }
    a.xf = carve_f({n, D});
    a.rstdf = carve_f({n});
    a.dx = carve_f({n, D});
    a.dxn = carve_f({n, D});
    a.dh = carve_f({n, F});
    a.dgu = carve_f({n, 2 * F});
    a.d_o = carve_f({n, H * hd});
    a.dqkv = carve_f({n, wqkv});
    if (dims_.qk_norm) {
      a.qk_tmp1 = carve_f({n, H * hd});
      a.qk_tmp2 = carve_f({n, H * hd});
    }
  };
  build();  // sizing pass (base == nullptr)
  a.arena = DeviceBuffer(backend_, cursor);
  base = static_cast<char*>(a.arena.data());
  cursor = 0;
  build();
  a.n = n;
  a.recompute_every = recompute_every_;
  a.activation_dtype = activation_dtype_;
  a.bf16_set = set;
  a.product_input_dtype = pdt;
}

void Transformer::LayerForward(int l, const BatchTensors& batch, bool store) {
  Activations& a = *acts_;
  Backend& be = *backend_;
  const int64_t hd = dims_.head_dim, H = dims_.heads, Hkv = dims_.kv_heads, n = a.n;
  const LayerParams w = LayerParamsOf(params_, dims_, l);
  QkNormTensors qk;
  if (dims_.qk_norm) qk = {a.qraw[l], a.kraw[l], a.qrstd[l], a.krstd[l], a.qk_tmp1};
  AttentionInputForward(be, dims_, w, a.x[l], a.xn1[l], a.rstd1[l], a.qkv[l], qk);

  const Tensor q = HeadsView(a.qkv[l], 0, H, hd), k = HeadsView(a.qkv[l], H * hd, Hkv, hd),
               v = HeadsView(a.qkv[l], (H + Hkv) * hd, Hkv, hd);
  RotateKeysValues(be, dims_, l, string_, k, v, batch.positions);
  LayerAttentionArgs at;
  at.dims = &dims_;
  at.layer = l;
  at.q = q; at.k = k; at.v = v;
  at.q_positions = batch.positions;
  at.q_positions_host = string_.enabled ? positions_host_.data() : nullptr;
  at.cu_seqlens = batch.cu_seqlens;
  at.o = a.o[l].Reshape({n, H, hd});
  at.lse = a.lse[l];
  at.string = string_;
  at.context = context_;
  attention_.Forward(at);

  AttentionOutputMlpForward(be, dims_, w, a.x[l], a.o[l], a.xmid[l], a.xn2[l], a.rstd2[l], a.gu[l], a.h[l],
                            a.x[l + 1]);
  // bf16 storage: after the layer's last use of the working set (the next
  // layer overwrites it).
  if (store)
    for (const Activations::Bf16Pair& p : a.bf16[l]) be.Copy(p.store, p.work);
}

void Transformer::LayerBackward(int l, const BatchTensors& batch) {
  Activations& a = *acts_;
  Backend& be = *backend_;
  const ParamLayout::LayerOffsets& off = layout_.layer();
  const int b = 1 + l;
  const int64_t D = dims_.hidden, hd = dims_.head_dim, H = dims_.heads, Hkv = dims_.kv_heads, F = dims_.ffn;
  const int64_t n = a.n, wqkv = (H + 2 * Hkv) * hd;
  // bf16 storage: the stored values back into the F32 working set; from here
  // on the backward is the F32 storage's. (xn1, xn2 and h have no pairs: with
  // bf16 products, which bf16 storage needs, they are BF16 tensors themselves,
  // unless a test turned that off: set_bf16_product_inputs.)
  for (const Activations::Bf16Pair& p : a.bf16[l]) be.Copy(p.work, p.store);

  // x[l+1] = xmid + h @ Wd^T
  Tensor dy = ProductOperand(a.dx, a.d_o);  // d_o is free until the o_proj product below
  be.Gemm({.a = dy, .b = params_.at(b, off.w_down, {D, F}), .c = a.dh});
  be.Gemm({.a = dy, .b = a.h[l], .c = grads_.at(b, off.w_down, {D, F}), .trans_a = true, .beta = 1.0});
  SwiGluParams sw;
  sw.gate_up = a.gu[l]; sw.dh = a.dh; sw.dgate_up = a.dgu;
  // With bf16 products dgate_up is made in bf16 (in dgu's memory): only the
  // two products read it, and they would round it to exactly these values.
  if (bf16_products()) sw.dgate_up = Tensor(a.dgu.data, DType::kBF16, {n, 2 * F}, a.dgu.device);
  be.SwiGluBackward(sw);
  dy = sw.dgate_up;
  be.Gemm({.a = dy, .b = a.xn2[l], .c = grads_.at(b, off.w_gate_up, {2 * F, D}), .trans_a = true, .beta = 1.0});
  be.Gemm({.a = dy, .b = params_.at(b, off.w_gate_up, {2 * F, D}), .c = a.dxn});
  RmsNormParams n2;
  n2.x = a.xmid[l]; n2.weight = params_.at(b, off.mlp_norm, {D}); n2.rstd = a.rstd2[l]; n2.eps = dims_.eps;
  n2.y = a.xn2[l]; n2.dy = a.dxn; n2.dx = a.dx; n2.accumulate_dx = true;
  n2.dweight = grads_.at(b, off.mlp_norm, {D});
  be.RmsNormBackward(n2);

  // xmid = x[l] + o @ Wo^T
  dy = ProductOperand(a.dx, a.dh);  // from here on dh is free
  be.Gemm({.a = dy, .b = params_.at(b, off.wo, {D, H * hd}), .c = a.d_o});
  be.Gemm({.a = dy, .b = ProductInput(l, kActO, a.o[l]), .c = grads_.at(b, off.wo, {D, H * hd}), .trans_a = true,
           .beta = 1.0});

  const Tensor q = HeadsView(a.qkv[l], 0, H, hd), k = HeadsView(a.qkv[l], H * hd, Hkv, hd),
               v = HeadsView(a.qkv[l], (H + Hkv) * hd, Hkv, hd);
  const Tensor dq = HeadsView(a.dqkv, 0, H, hd), dk = HeadsView(a.dqkv, H * hd, Hkv, hd),
               dv = HeadsView(a.dqkv, (H + Hkv) * hd, Hkv, hd);
  if (dims_.uses_roper(l)) {
    // o[l] holds the output rotated back, R(-i) O, and d_o its gradient. The
    // attention backward needs O itself and dO = R(i) d_o (its D = rowsum(dO * O)
    // is rotation invariant, but dV and dP are not), so both are rotated by +i
    // (o[l] is not read again).
    RopeParams r;
    r.positions = batch.positions; r.theta = dims_.theta; r.rotary_dim = dims_.roper_dim;
    r.x = a.o[l].Reshape({n, H, hd}); be.Rope(r);
    r.x = a.d_o.Reshape({n, H, hd}); be.Rope(r);
  }
  AttentionParams at;
  at.q = q; at.k = k; at.v = v;
  at.o = a.o[l].Reshape({n, H, hd});
  at.lse = a.lse[l];
  at.cu_seqlens = batch.cu_seqlens;
  at.window = dims_.layer_window(l);
  at.d_o = a.d_o.Reshape({n, H, hd});
  at.dq = dq; at.dk = dk; at.dv = dv;
  if (context_ != nullptr)
    context_->Backward(l, at.window, q, k, v, at.o, at.lse, at.d_o, dq, dk, dv);
  else
    be.AttentionBackward(at);
  if (dims_.uses_rope(l)) {
    RopeParams r;
    r.positions = batch.positions; r.theta = dims_.theta; r.rotary_dim = dims_.rope_dim; r.direction = -1;
    r.x = dq; be.Rope(r);
    r.x = dk; be.Rope(r);
    if (dims_.uses_roper(l)) {
      r.rotary_dim = dims_.roper_dim;
      r.x = dv; be.Rope(r);
    }
  }
  if (dims_.qk_norm) {
    const Tensor dqcols = a.dqkv.Cols(0, H * hd), dkcols = a.dqkv.Cols(H * hd, (H + Hkv) * hd);
    be.Copy(a.qk_tmp1, dqcols);
    RmsNormParams qn;
    qn.x = a.qraw[l].Reshape({n * H, hd}); qn.weight = params_.at(b, off.q_norm, {hd});
    qn.rstd = a.qrstd[l]; qn.eps = dims_.eps; qn.y = qn.x;
    qn.dy = a.qk_tmp1.Reshape({n * H, hd}); qn.dx = a.qk_tmp2.Reshape({n * H, hd});
    qn.dweight = grads_.at(b, off.q_norm, {hd});
    be.RmsNormBackward(qn);
    be.Copy(dqcols, a.qk_tmp2);
    Tensor kdy(a.qk_tmp1.data, dtype_, {n, Hkv * hd}, backend_->device());
    Tensor kdx(a.qk_tmp2.data, dtype_, {n, Hkv * hd}, backend_->device());
    be.Copy(kdy, dkcols);
    RmsNormParams kn = qn;
    kn.x = a.kraw[l].Reshape({n * Hkv, hd}); kn.weight = params_.at(b, off.k_norm, {hd});
    kn.rstd = a.krstd[l]; kn.y = kn.x;
    kn.dy = kdy.Reshape({n * Hkv, hd}); kn.dx = kdx.Reshape({n * Hkv, hd});
    kn.dweight = grads_.at(b, off.k_norm, {hd});
    be.RmsNormBackward(kn);
    be.Copy(dkcols, kdx);
  }
  dy = ProductOperand(a.dqkv, a.dh);
  be.Gemm({.a = dy, .b = a.xn1[l], .c = grads_.at(b, off.wqkv, {wqkv, D}), .trans_a = true, .beta = 1.0});
  be.Gemm({.a = dy, .b = params_.at(b, off.wqkv, {wqkv, D}), .c = a.dxn});
  RmsNormParams n1;
  n1.x = a.x[l]; n1.weight = params_.at(b, off.attn_norm, {D}); n1.rstd = a.rstd1[l]; n1.eps = dims_.eps;
  n1.y = a.xn1[l]; n1.dy = a.dxn; n1.dx = a.dx; n1.accumulate_dx = true;
  n1.dweight = grads_.at(b, off.attn_norm, {D});
  be.RmsNormBackward(n1);
}

bool Transformer::bf16_products() const {
  return dtype_ == DType::kF32 && backend_->matmul_precision() == MatmulPrecision::kBF16;
}

DType Transformer::product_input_dtype() const {
  return bf16_products() && bf16_product_inputs_ ? DType::kBF16 : dtype_;
}

Tensor Transformer::ProductOperand(const Tensor& x, const Tensor& room) const {
  if (!bf16_products() || x.numel() * DTypeSize(DType::kBF16) > room.nbytes()) return x;
  const Tensor copy(room.data, DType::kBF16, {x.shape[0], x.shape[1]}, room.device);
  backend_->Copy(copy, x);
  return copy;
}

Tensor Transformer::ProductInput(int l, uint32_t kind, const Tensor& work) const {
  for (const Activations::Bf16Pair& p : acts_->bf16[l])
    if (p.kind == kind) return p.store;
  return work;
}

absl::Status Transformer::SetStringOptions(const StringOptions& options) {
  absl::Status st = ValidateStringOptions(options);
  if (!st.ok()) return st;
  string_ = options;
  return absl::OkStatus();
}

void Transformer::ForwardHidden(const BatchTensors& batch, bool backward) {
  const int64_t n = batch.inputs.shape[0];
  CHECK(batch.positions.shape[0] == n) << "batch tensors disagree on N";
  EnsureActivations(n);
  Activations& a = *acts_;
  Backend& be = *backend_;
  const int64_t D = dims_.hidden, V = dims_.vocab;
  if (string_.enabled) {
    // STRING's shifted query positions are made on the host; its distances are
    // key-index distances, which are position distances only when positions
    // restart at 0 in every segment.
    positions_host_.resize(n);
    std::vector<int32_t> cu(batch.cu_seqlens.shape[0]);
    be.CopyToHost(positions_host_.data(), batch.positions);
    be.CopyToHost(cu.data(), batch.cu_seqlens);
    for (size_t s = 0; s + 1 < cu.size(); ++s)
      for (int32_t t = cu[s]; t < cu[s + 1]; ++t)
        CHECK(positions_host_[t] == t - cu[s]) << "STRING: position " << positions_host_[t] << " of token " << t
                                               << " does not restart at its segment start " << cu[s];
  }

  using U = ParamResidency::Use;
  Acquire(0, U::kForward, backward);
  EmbeddingParams emb;
  emb.ids = batch.inputs; emb.table = params_.at(0, layout_.embedding_offset(), {V, D}); emb.out = a.x[0];
  be.EmbeddingForward(emb);
  for (int l = 0; l < dims_.layers; ++l) {
    Acquire(1 + l, U::kForward, backward);
    LayerForward(l, batch, /*store=*/backward);
    Release(1 + l, U::kForward, backward);
  }

  RmsNormParams fn;
  fn.x = a.x[dims_.layers]; fn.weight = params_.at(0, layout_.final_norm_offset(), {D});
  fn.y = a.xf; fn.rstd = a.rstdf; fn.eps = dims_.eps;
  be.RmsNormForward(fn);
}

void Transformer::ForwardLogits(const BatchTensors& batch, const Tensor& logits) {
  ForwardHidden(batch, /*backward=*/false);
  const int64_t head_off = dims_.tied ? layout_.embedding_offset() : layout_.lm_head_offset();
  backend_->Gemm({.a = acts_->xf, .b = params_.at(0, head_off, {dims_.vocab, dims_.hidden}), .c = logits,
                  .trans_b = true});
  Release(0, ParamResidency::Use::kForward, false);
}

double Transformer::ForwardBackward(const BatchTensors& batch, double grad_scale, bool backward,
                                   const Tensor* per_token_loss) {
  const int64_t n = batch.inputs.shape[0];
  CHECK(batch.targets.shape[0] == n && batch.positions.shape[0] == n) << "batch tensors disagree on N";
  CHECK(!(backward && string_.enabled)) << "STRING is inference-only: no backward with STRING enabled";
  CHECK(!(backward && activation_dtype_ == DType::kBF16 && backend_->matmul_precision() != MatmulPrecision::kBF16))
      << "bf16 activation storage needs the bf16 matmul precision (Backend::SetMatmulPrecision(kBF16))";
  ForwardHidden(batch, backward);
  Activations& a = *acts_;
  Backend& be = *backend_;
  const int64_t D = dims_.hidden, V = dims_.vocab;

  const int64_t head_off = dims_.tied ? layout_.embedding_offset() : layout_.lm_head_offset();
  LmHeadLossParams lp;
  lp.x = a.xf; lp.weight = params_.at(0, head_off, {V, D}); lp.targets = batch.targets;
  if (per_token_loss) lp.losses = *per_token_loss;
  if (backward) {
    lp.dx = a.dxn;
    lp.dweight = grads_.at(0, head_off, {V, D});
    lp.grad_scale = grad_scale;
  }
  const double loss_sum = be.LmHeadLoss(lp);
  using U = ParamResidency::Use;
  Release(0, U::kForward, backward);
  if (!backward) return loss_sum;
  Acquire(0, U::kBackward, true);

  RmsNormParams fn;
  fn.x = a.x[dims_.layers]; fn.weight = params_.at(0, layout_.final_norm_offset(), {D});
  fn.y = a.xf; fn.rstd = a.rstdf; fn.eps = dims_.eps;
  fn.dy = a.dxn; fn.dx = a.dx; fn.accumulate_dx = false;
  fn.dweight = grads_.at(0, layout_.final_norm_offset(), {D});
  be.RmsNormBackward(fn);
  for (int l = dims_.layers - 1; l >= 0; --l) {
    Acquire(1 + l, U::kBackward, true);
    // Recomputed layer: its activations were overwritten by later recomputed
    // layers; run its forward again from the stored input x[l]. This also
    // rewrites x[l+1] with the identical values (nothing reads it any more).
    if (recomputes(l)) LayerForward(l, batch, /*store=*/false);
    LayerBackward(l, batch);
    Release(1 + l, U::kBackward, true);
  }

  EmbeddingParams emb;
  emb.ids = batch.inputs; emb.table = grads_.at(0, layout_.embedding_offset(), {V, D}); emb.out = a.dx;
  be.EmbeddingBackward(emb);
  Release(0, U::kBackward, true);
  return loss_sum;
}

}  // namespace longctx
