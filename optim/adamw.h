// Why: AdamW state (m, v) mirrors the parameter layout exactly, so it shards,
// checkpoints and converts with the same names as the weights. Clipping is a
// scale folded into the update (no extra pass over the gradients).
#ifndef LONGCTX_OPTIM_ADAMW_H_
#define LONGCTX_OPTIM_ADAMW_H_

#include <cstdint>

#include "kernels/backend.h"
#include "model/param_layout.h"

namespace longctx {

struct AdamWSettings {
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8, weight_decay = 0.1;
  double grad_clip = 1.0;      // global L2 norm; 0 = off
  bool decay_norms = false;    // decay 1-D (norm) weights too
};

struct StepStats {
  double grad_norm = 0;   // before clipping
  double clip_scale = 1;  // factor applied to the gradients
};

class AdamW {
 public:
  AdamW(const ParamLayout* layout, Backend* backend, DType dtype, const AdamWSettings& s);

  // One update of params from grads at learning rate lr; step() advances.
  StepStats Step(ParamStore& params, const ParamStore& grads, double lr);

  int64_t step() const { return step_; }
  void set_step(int64_t s) { step_ = s; }
  ParamStore& m() { return m_; }
  ParamStore& v() { return v_; }
  const AdamWSettings& settings() const { return settings_; }

 private:
  const ParamLayout* layout_;
  Backend* backend_;
  AdamWSettings settings_;
  ParamStore m_, v_;
  int64_t step_ = 0;
};

}  // namespace longctx

#endif  // LONGCTX_OPTIM_ADAMW_H_
