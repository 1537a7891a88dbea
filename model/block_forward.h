// Why: a decoder block's forward is needed twice: by Transformer (packed
// training/eval batches, activations kept for the backward) and by the
// inference engine (a prompt chunk or one decode token against a KV cache).
// Everything around the attention is identical, so it is written once here,
// as backend calls on caller-owned tensors: the caller decides whether the
// intermediate tensors are saved activations or reused scratch. The attention
// itself (RoPE, STRING, RoPER) is model/layer_attention.h.
//
// Block (pre-norm): xn = norm1(x); qkv = xn Wqkv^T (q, k per-head RMS-normed
// with QK-norm); o = attention(q, k, v); xmid = x + o Wo^T;
// x_out = xmid + down(silu(gate(norm2 xmid)) * up(norm2 xmid)).
#ifndef LONGCTX_MODEL_BLOCK_FORWARD_H_
#define LONGCTX_MODEL_BLOCK_FORWARD_H_

#include "kernels/backend.h"
#include "model/config.h"
#include "model/param_layout.h"

namespace longctx {

// Views of one layer's parameters (or of its gradients: any ParamStore).
struct LayerParams {
  Tensor attn_norm, wqkv, wo, q_norm, k_norm, mlp_norm, w_gate_up, w_down;  // q/k_norm: QK-norm only
};
LayerParams LayerParamsOf(const ParamStore& store, const ModelDims& dims, int layer);

// A [n, heads, head_dim] view of columns [col, col + heads * head_dim) of a
// row-major [n, width] matrix (so q, k, v are views of the fused qkv).
Tensor HeadsView(const Tensor& m, int64_t col, int64_t heads, int64_t head_dim);

// QK-norm tensors: the raw (pre-norm) q and k, kept for the backward; the
// per-(token, head) rstd; tmp, a dense [n, heads * head_dim] scratch.
struct QkNormTensors {
  Tensor qraw;   // [n, heads * head_dim]
  Tensor kraw;   // [n, kv_heads * head_dim]
  Tensor qrstd;  // [n * heads]
  Tensor krstd;  // [n * kv_heads]
  Tensor tmp;    // [n, heads * head_dim]
};

// xn = norm1(x) (rstd kept), qkv = xn Wqkv^T; with dims.qk_norm the q and k
// columns of qkv are replaced by their per-head RMSNorm (qk receives the raw
// values and rstd). x, xn: [n, D]; rstd: [n]; qkv: [n, qkv_dim].
void AttentionInputForward(Backend& be, const ModelDims& dims, const LayerParams& w, const Tensor& x,
                           const Tensor& xn, const Tensor& rstd, const Tensor& qkv, const QkNormTensors& qk);

// xmid = x + o Wo^T; x_out = xmid + MLP(norm2(xmid)), keeping xn2, rstd2, the
// gate|up product gu [n, 2F] and h = silu(gate) * up [n, F]. x_out may be x.
void AttentionOutputMlpForward(Backend& be, const ModelDims& dims, const LayerParams& w, const Tensor& x,
                               const Tensor& o, const Tensor& xmid, const Tensor& xn2, const Tensor& rstd2,
                               const Tensor& gu, const Tensor& h, const Tensor& x_out);

}  // namespace longctx

#endif  // LONGCTX_MODEL_BLOCK_FORWARD_H_
