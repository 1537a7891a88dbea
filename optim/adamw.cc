// Why: see adamw.h. The update runs per named slice so that weight decay can
// differ between matrices and norm weights; slices are large, so the per-call
// overhead is negligible.
#include "optim/adamw.h"

#include <cmath>

namespace longctx {

AdamW::AdamW(const ParamLayout* layout, Backend* backend, DType dtype, const AdamWSettings& s)
    : layout_(layout), backend_(backend), settings_(s), m_(layout, backend, dtype), v_(layout, backend, dtype) {
  m_.Zero();
  v_.Zero();
}

StepStats AdamW::Step(ParamStore& params, const ParamStore& grads, double lr) {
  StepStats st;
  st.grad_norm = std::sqrt(grads.SumSquares());
  if (settings_.grad_clip > 0 && st.grad_norm > settings_.grad_clip)
    st.clip_scale = settings_.grad_clip / (st.grad_norm + 1e-6);
  ++step_;
  const auto& slices = layout_->slices();
  for (int i = 0; i < static_cast<int>(slices.size()); ++i) {
    AdamWParams p;
    auto flat = [](Tensor t) { return t.Reshape({t.numel()}); };
    p.param = flat(params.slice(i));
    p.grad = flat(grads.slice(i));
    p.m = flat(m_.slice(i));
    p.v = flat(v_.slice(i));
    p.lr = lr;
    p.beta1 = settings_.beta1;
    p.beta2 = settings_.beta2;
    p.eps = settings_.eps;
    p.weight_decay = (slices[i].is_matrix || settings_.decay_norms) ? settings_.weight_decay : 0.0;
    p.grad_scale = st.clip_scale;
    p.step = step_;
    backend_->AdamW(p);
  }
  return st;
}

}  // namespace longctx
