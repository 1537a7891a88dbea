// Why: the Llama-style decoder as a training step you can hold in your head:
// Forward stores exactly the activations Backward needs (listed in
// activations.h and counted by plan.cc), Backward walks the layers in reverse.
// It only talks to a Backend, so the same code runs on every device, and in F64
// for finite-difference checks.
//
// Block (pre-norm): x += o_proj(attn(rope?(q), rope?(k), v)) on norm1(x);
//                   x += down(silu(gate(norm2 x)) * up(norm2 x)).
// Attention kind per layer: RoPE full, RoPE sliding window, NoPE full; RoPER
// (dims.roper) rotates values and outputs on the RoPE layers, in the forward
// and the backward. STRING (set_string_options) is inference-only: it changes
// the forward of RoPE layers (model/layer_attention.h), and a backward with
// STRING on is refused.
#ifndef LONGCTX_MODEL_TRANSFORMER_H_
#define LONGCTX_MODEL_TRANSFORMER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "kernels/backend.h"
#include "model/config.h"
#include "model/layer_attention.h"
#include "model/param_layout.h"

namespace longctx {

// One packed micro-batch in backend memory; N tokens = rows × seq_len.
struct BatchTensors {
  Tensor inputs;      // I32 [N]
  Tensor targets;     // I32 [N], -1 = no loss
  Tensor positions;   // I32 [N], restart per segment
  Tensor cu_seqlens;  // I32 [segments + 1]
};

// Residency seam: a parallel strategy (FSDP) that stores only a shard of each
// parameter buffer is told before and after every use of a buffer, so it can
// gather the full buffer (and give it gradient storage) just in time and free
// it after. Order within one ForwardBackward(backward = true):
//   Acquire(0, F), then per layer l: Acquire(1+l, F) … Release(1+l, F);
//   final norm and LM head (+ its gradient) use buffer 0; Release(0, F),
//   Acquire(0, B); final norm backward; per layer l from the last:
//   Acquire(1+l, B) … Release(1+l, B); embedding backward; Release(0, B).
// Buffer 0 (embedding, final norm, LM head) is used at both ends of the pass,
// so its Release(0, F) is immediately followed by Acquire(0, B): a strategy
// keeps it resident across that pair instead of freeing and re-gathering.
// Forward only (eval, ForwardLogits): Acquire(0, F), the layers' F pairs,
// Release(0, F) after the head. Gradient buffers are written only between a
// buffer's B pair (buffer 0: from Acquire(0, F) when backward is on, because
// the LM head's gradient is computed with the loss). With no hook set nothing
// is called and the computation is unchanged.
class ParamResidency {
 public:
  enum class Use { kForward, kBackward };
  virtual ~ParamResidency() = default;
  // backward: whether this ForwardBackward will run a backward (gradient
  // storage is needed for the buffer's B use).
  virtual void Acquire(int buffer, Use use, bool backward) = 0;
  virtual void Release(int buffer, Use use, bool backward) = 0;
};

class Transformer {
 public:
  Transformer(const ModelDims& dims, Backend* backend, DType dtype);
  ~Transformer();

  const ModelDims& dims() const { return dims_; }
  const ParamLayout& layout() const { return layout_; }
  ParamStore& params() { return params_; }
  ParamStore& grads() { return grads_; }
  Backend* backend() const { return backend_; }
  DType dtype() const { return dtype_; }

  // TinyLlama init: normal(0, init_std); o_proj and down_proj normal(0,
  // out_init_std); norm weights 1. Deterministic for a seed.
  void InitParams(uint64_t seed);

  // Runs the forward pass and returns the summed cross-entropy over tokens whose
  // target >= 0. With backward = true also accumulates gradients of
  // (grad_scale × that sum) into grads() (call grads().Zero() before a step).
  // per_token_loss, when set, receives [N] losses (0 where ignored).
  double ForwardBackward(const BatchTensors& batch, double grad_scale, bool backward,
                         const Tensor* per_token_loss = nullptr);

  // Forward only: logits [N, V] (backend memory, the model's dtype) of every
  // token of the batch (the targets are not read).
  void ForwardLogits(const BatchTensors& batch, const Tensor& logits);

  // STRING for every later forward (eval, ForwardLogits); InvalidArgument for
  // bad options. With STRING enabled the batch's positions must restart at 0
  // in every segment (what the packer produces); ForwardBackward with
  // backward = true aborts (STRING has no gradient).
  absl::Status SetStringOptions(const StringOptions& options);
  const StringOptions& string_options() const { return string_; }

  // Bytes of activation memory currently held (grows to the largest N seen).
  size_t activation_bytes() const;

  // Activation recomputation (trades compute for memory so long rows fit):
  // k = 0 stores every layer's activations (the default); k >= 1 recomputes
  // layers l with l % k == 0 (1 = every layer, 2 = every other layer, …).
  // A recomputed layer keeps only its input x[l] from the forward; its other
  // activations live in one scratch set shared by all recomputed layers, and
  // its forward is run again (same ops, same order, so bit-identical values
  // and gradients) right before its backward — inside that layer's
  // Acquire(1+l, B) … Release(1+l, B) residency pair, so no extra hook calls.
  // The attention kernels keep only O(N) per layer (o, lse), so the arena is
  // O(N) either way. Changing k re-sizes the arena at the next pass.
  void set_recompute_every(int k) { recompute_every_ = k < 0 ? 0 : k; }
  int recompute_every() const { return recompute_every_; }
  bool recomputes(int layer) const { return recompute_every_ > 0 && layer % recompute_every_ == 0; }

  // Activation storage (docs/BF16_ACTIVATIONS.md; ModelConfig.activation_dtype):
  // kF32 (the default) or kBF16, which needs an F32 model (CHECK) and a bf16
  // matmul precision (checked at the next backward pass). With kBF16 every
  // stored (non-recomputed) layer keeps xn1, xn2, h, gu, o, qkv (and qk-norm's
  // qraw, kraw) as BF16 tensors; x, xmid, rstd1/2, lse (and qrstd, krstd) stay
  // F32. xn1, xn2 and h are BF16 tensors anyway at that precision
  // (product_input_dtype(): storing them rounded changes no bit). For the
  // others the layer's forward computes into one F32 working set shared by all
  // such layers and then converts into its bf16 store (Backend::Copy, round to
  // nearest even, the bf16 GEMM operand rounding); its backward converts the
  // store back into the working set and runs the F32 code unchanged; gu, o,
  // qkv (qraw, kraw) are read rounded where the F32 path read them exactly.
  // Forward-only passes convert nothing.
  void set_activation_dtype(DType d);
  DType activation_dtype() const { return activation_dtype_; }
  // Which tensors kBF16 stores in bf16: a mask of Bf16Act bits (default
  // kActAll). A seam for tests (xn1 | xn2 | h alone must give the F32 storage's
  // bits) and experiments; the plan (model/plan.h) counts kActAll.
  enum Bf16Act : uint32_t {
    kActXn1 = 1, kActXn2 = 2, kActH = 4, kActGu = 8, kActO = 16, kActQkv = 32, kActQkRaw = 64, kActAll = 127,
    kActProductInputs = kActXn1 | kActXn2 | kActH  // see product_input_dtype()
  };
  void set_bf16_activation_set(uint32_t mask) { bf16_set_ = mask & kActAll; }
  uint32_t bf16_activation_set() const { return bf16_set_; }
  // The dtype of xn1, xn2 and h (kActProductInputs): only products read them
  // (the forward's and the backward's dW products; the norms' backward reads
  // x and rstd, not y), so with bf16 products (an F32 model at
  // MatmulPrecision::kBF16) they are made in bf16 by the ops that produce
  // them (RmsNormForward, SwiGluForward: the rounding the products would
  // apply) and stored so whatever the activation dtype; else the model's
  // dtype. The same bits either way, less memory and no conversions.
  DType product_input_dtype() const;
  // A seam for tests: false keeps xn1, xn2 and h in the model's dtype even
  // with bf16 products (the products round them), to compare the bits.
  void set_bf16_product_inputs(bool on) { bf16_product_inputs_ = on; }

  // Optional context-parallel attention (not owned; null = the backend's
  // attention over the batch's own tokens). While set, every layer's
  // attention forward and backward go through it (model/layer_attention.h);
  // the batch then holds this rank's tokens of its rows, and its cu_seqlens
  // are not read by attention.
  void set_context_attention(ContextAttentionHook* h) { context_ = h; }
  ContextAttentionHook* context_attention() const { return context_; }

  // Optional residency hook (not owned; null = every buffer always resident).
  void set_residency(ParamResidency* r) { residency_ = r; }
  ParamResidency* residency() const { return residency_; }

 private:
  struct Activations;
  void EnsureActivations(int64_t n);
  // Embedding, every layer and the final norm (into the activations). Buffer
  // 0 is acquired here and left resident for the caller's LM head.
  void ForwardHidden(const BatchTensors& batch, bool backward);
  // store: convert the layer's bf16-stored tensors after its forward (a
  // forward that a backward will follow; not for recomputation).
  void LayerForward(int l, const BatchTensors& batch, bool store);
  void LayerBackward(int l, const BatchTensors& batch);
  // The backward's products at bf16 precision: an F32 operand that two
  // products read (a dY: its dX and its dW product) is converted to bf16 once,
  // into `room` (scratch that is dead at that point), and both products take
  // the copy: the same rounding Gemm would apply to each, done once. Returns
  // `x` itself with F32 products or when the copy does not fit in `room`.
  Tensor ProductOperand(const Tensor& x, const Tensor& room) const;
  bool bf16_products() const;  // F32 model, MatmulPrecision::kBF16
  // The operand a dW product reads for layer l's activation `kind` (a Bf16Act
  // bit): its bf16 store when this layer keeps one (the product would round
  // `work` to exactly these values), else `work`. (o: xn1, xn2 and h are
  // bf16 tensors themselves whenever a store could exist.)
  Tensor ProductInput(int l, uint32_t kind, const Tensor& work) const;

  ModelDims dims_;
  Backend* backend_;
  DType dtype_;
  ParamLayout layout_;
  ParamStore params_;
  ParamStore grads_;
  std::unique_ptr<Activations> acts_;
  LayerAttention attention_;
  StringOptions string_;
  std::vector<int32_t> positions_host_;  // STRING only: the batch's positions on the host
  ParamResidency* residency_ = nullptr;
  ContextAttentionHook* context_ = nullptr;
  int recompute_every_ = 0;
  DType activation_dtype_ = DType::kF32;
  uint32_t bf16_set_ = kActAll;
  bool bf16_product_inputs_ = true;
  void Acquire(int b, ParamResidency::Use u, bool backward) {
    if (residency_) residency_->Acquire(b, u, backward);
  }
  void Release(int b, ParamResidency::Use u, bool backward) {
    if (residency_) residency_->Release(b, u, backward);
  }
};

}  // namespace longctx

#endif  // LONGCTX_MODEL_TRANSFORMER_H_
