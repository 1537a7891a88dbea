// Why: see block_forward.h. The op sequence is the one the training forward
// always ran (its backward in transformer.cc mirrors it).
#include "model/block_forward.h"

namespace longctx {

LayerParams LayerParamsOf(const ParamStore& store, const ModelDims& dims, int layer) {
  const ParamLayout::LayerOffsets& off = store.layout().layer();
  const int b = 1 + layer;
  const int64_t D = dims.hidden, hd = dims.head_dim, F = dims.ffn;
  LayerParams w;
  w.attn_norm = store.at(b, off.attn_norm, {D});
  w.wqkv = store.at(b, off.wqkv, {dims.qkv_dim(), D});
  w.wo = store.at(b, off.wo, {D, dims.q_dim()});
  if (dims.qk_norm) {
    w.q_norm = store.at(b, off.q_norm, {hd});
    w.k_norm = store.at(b, off.k_norm, {hd});
  }
  w.mlp_norm = store.at(b, off.mlp_norm, {D});
  w.w_gate_up = store.at(b, off.w_gate_up, {2 * F, D});
  w.w_down = store.at(b, off.w_down, {D, F});
  return w;
}

Tensor HeadsView(const Tensor& m, int64_t col, int64_t heads, int64_t head_dim) {
  Tensor t = m.Cols(col, col + heads * head_dim);
  Tensor v(t.data, t.dtype, {m.shape[0], heads, head_dim}, t.device);
  v.row_stride = m.stride0();
  return v;
}

void AttentionInputForward(Backend& be, const ModelDims& dims, const LayerParams& w, const Tensor& x,
                           const Tensor& xn, const Tensor& rstd, const Tensor& qkv, const QkNormTensors& qk) {
  const int64_t n = x.shape[0], hd = dims.head_dim, H = dims.heads, Hkv = dims.kv_heads;
  RmsNormParams n1;
  n1.x = x; n1.weight = w.attn_norm; n1.y = xn; n1.rstd = rstd; n1.eps = dims.eps;
  be.RmsNormForward(n1);
  be.Gemm({.a = xn, .b = w.wqkv, .c = qkv, .trans_b = true});
  if (!dims.qk_norm) return;
  // q and k are normalised per head (RMSNorm over head_dim) before RoPE.
  const Tensor qcols = qkv.Cols(0, H * hd), kcols = qkv.Cols(H * hd, (H + Hkv) * hd);
  be.Copy(qk.qraw, qcols);
  be.Copy(qk.kraw, kcols);
  RmsNormParams qn;
  qn.x = qk.qraw.Reshape({n * H, hd}); qn.weight = w.q_norm;
  qn.y = qk.tmp.Reshape({n * H, hd}); qn.rstd = qk.qrstd; qn.eps = dims.eps;
  be.RmsNormForward(qn);
  be.Copy(qcols, qk.tmp);
  RmsNormParams kn = qn;
  kn.x = qk.kraw.Reshape({n * Hkv, hd}); kn.weight = w.k_norm;
  Tensor ktmp(qk.tmp.data, qk.tmp.dtype, {n, Hkv * hd}, qk.tmp.device);
  kn.y = ktmp.Reshape({n * Hkv, hd}); kn.rstd = qk.krstd;
  be.RmsNormForward(kn);
  be.Copy(kcols, ktmp);
}

void AttentionOutputMlpForward(Backend& be, const ModelDims& dims, const LayerParams& w, const Tensor& x,
                               const Tensor& o, const Tensor& xmid, const Tensor& xn2, const Tensor& rstd2,
                               const Tensor& gu, const Tensor& h, const Tensor& x_out) {
  be.Copy(xmid, x);
  be.Gemm({.a = o, .b = w.wo, .c = xmid, .trans_b = true, .beta = 1.0});
  RmsNormParams n2;
  n2.x = xmid; n2.weight = w.mlp_norm; n2.y = xn2; n2.rstd = rstd2; n2.eps = dims.eps;
  be.RmsNormForward(n2);
  be.Gemm({.a = xn2, .b = w.w_gate_up, .c = gu, .trans_b = true});
  SwiGluParams sw;
  sw.gate_up = gu; sw.h = h;
  be.SwiGluForward(sw);
  be.Copy(x_out, xmid);
  be.Gemm({.a = h, .b = w.w_down, .c = x_out, .trans_b = true, .beta = 1.0});
}

}  // namespace longctx
