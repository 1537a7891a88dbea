// Why: see backend_for_config.h.
#include "train/setup/backend_for_config.h"

#include "absl/strings/str_cat.h"
#include "train/setup/config_options.h"

namespace longctx {

absl::StatusOr<std::unique_ptr<Backend>> MakeBackendForConfig(const TrainConfig& config,
                                                              const BackendSettings& options) {
  absl::StatusOr<std::unique_ptr<Backend>> backend = MakeBackend(config.backend(), BackendOptionsFor(config, options));
  if (!backend.ok())
    return absl::Status(backend.status().code(), absl::StrCat("backend: ", backend.status().message()));
  if (absl::Status st = ApplyPrecision(config, backend->get()); !st.ok()) return st;
  return backend;
}

absl::Status ApplyPrecision(const TrainConfig& config, Backend* backend) {
  const MatmulPrecision p = config.precision() == BF16 ? MatmulPrecision::kBF16 : MatmulPrecision::kF32;
  absl::Status st = backend->SetMatmulPrecision(p);
  if (!st.ok()) return absl::Status(st.code(), absl::StrCat("precision: ", st.message()));
  return absl::OkStatus();
}

Bf16OperandCopies Bf16OperandsFor(const TrainConfig& config) {
  if (config.precision() != BF16) return {};
  return BackendBf16OperandCopies(config.backend(), BackendOptionsFor(config)).value_or(Bf16OperandCopies{});
}

}  // namespace longctx
