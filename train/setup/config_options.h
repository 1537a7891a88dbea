// Why: a TrainConfig is read in one room. Every translation of its fields
// into the options struct of a lower layer (the packer's, the optimizer's,
// the backend's, the step's) lives here or beside it in train/setup/
// (sft_config.h: the SFT schedule; niah_probe_config.h: the probe and
// retrieval rows; memory_check.h: the memory plan), so a renamed field or a
// new default is changed once, and the engine and the applications get the
// same options from the same config.
#ifndef LONGCTX_TRAIN_SETUP_CONFIG_OPTIONS_H_
#define LONGCTX_TRAIN_SETUP_CONFIG_OPTIONS_H_

#include "data/packer.h"
#include "kernels/backend_registry.h"
#include "optim/adamw.h"
#include "train/train.pb.h"

namespace longctx {

// The packer of the config's data section for one split (train or eval).
PackerOptions PackerOptionsFor(const TrainConfig& config, PackerSplit split);
// AdamW settings from config.optim.
AdamWSettings AdamWSettingsFromConfig(const TrainConfig& config);
// The backend options a config asks for: its thread count (`threads`) on top
// of `options` (the CPU GEMM library choices; `longctx bench` flags set them).
BackendSettings BackendOptionsFor(const TrainConfig& config, BackendSettings options = {});

}  // namespace longctx

#endif  // LONGCTX_TRAIN_SETUP_CONFIG_OPTIONS_H_
