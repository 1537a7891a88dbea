// Why: the trainer, `longctx eval/probe/generate`, the benchmarks and the
// checkpoint loader all make "the backend this config asks for" — by name,
// with its threads and matmul precision — and must make the same one, with
// errors that name the config field. One function here does it for all.
#ifndef LONGCTX_TRAIN_SETUP_BACKEND_FOR_CONFIG_H_
#define LONGCTX_TRAIN_SETUP_BACKEND_FOR_CONFIG_H_

#include <memory>

#include "absl/status/statusor.h"
#include "kernels/backend_registry.h"
#include "model/plan.h"
#include "train/train.pb.h"

namespace longctx {

// The config's backend made with BackendOptionsFor(config, options) and set to
// its precision; errors name `backend` or `precision`.
absl::StatusOr<std::unique_ptr<Backend>> MakeBackendForConfig(const TrainConfig& config,
                                                              const BackendSettings& options = {});
// The config's `precision` as the backend's matmul precision
// (Backend::SetMatmulPrecision); the error names `precision` and the backend.
absl::Status ApplyPrecision(const TrainConfig& config, Backend* backend);
// The operand copies the config's bf16 products keep (model/plan.h, for the
// memory plan and check): none for fp32 products, else what the config's
// backend says it keeps (kernels/backend_registry.h, BackendBf16OperandCopies:
// no backend is made).
Bf16OperandCopies Bf16OperandsFor(const TrainConfig& config);

}  // namespace longctx

#endif  // LONGCTX_TRAIN_SETUP_BACKEND_FOR_CONFIG_H_
