// Why: see config_options.h.
#include "train/setup/config_options.h"

namespace longctx {

PackerOptions PackerOptionsFor(const TrainConfig& config, PackerSplit split) {
  PackerOptions o;
  o.seq_len = config.data().seq_len();
  o.batch_size = config.data().batch_size();
  o.document_mask = config.data().document_mask();
  o.shuffle_seed = config.data().shuffle_seed();
  o.eval_fraction = config.data().eval_fraction();
  o.join_fraction = config.data().join_fraction();
  o.split = split;
  return o;
}

AdamWSettings AdamWSettingsFromConfig(const TrainConfig& config) {
  AdamWSettings s;
  s.beta1 = config.optim().beta1();
  s.beta2 = config.optim().beta2();
  s.eps = config.optim().eps();
  s.weight_decay = config.optim().weight_decay();
  s.grad_clip = config.optim().grad_clip();
  s.decay_norms = config.optim().decay_norms();
  return s;
}

BackendSettings BackendOptionsFor(const TrainConfig& config, BackendSettings options) {
  options.threads = config.threads();
  return options;
}

}  // namespace longctx
