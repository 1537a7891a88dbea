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

 private:
  struct Activations;
  void EnsureActivations(int64_t n);
  // Embedding, every layer and the final norm (into the activations).
  void ForwardHidden(const BatchTensors& batch);
  void LayerForward(int l, const BatchTensors& batch);
  void LayerBackward(int l, const BatchTensors& batch);

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
};

}  // namespace longctx

#endif  // LONGCTX_MODEL_TRANSFORMER_H_
