// Why: `longctx convert --from hf` reads a config.json that someone else
// wrote (transformers, a hub download, a hand edit). Any bytes must come back
// as a parse error or an error naming the key, never a crash; a config that
// imports must resolve (ModelConfigFromHfJson promises it passes
// ResolveModelConfig) and must write back a config.json that imports to the
// same sizes.
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "model/config.h"
#include "model/hf_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const nlohmann::json j = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return 0;
  absl::StatusOr<longctx::ModelConfig> config = longctx::ModelConfigFromHfJson(j);
  if (!config.ok()) return 0;
  absl::StatusOr<longctx::ModelDims> dims = longctx::ResolveModelConfig(*config);
  if (!dims.ok()) __builtin_trap();  // the importer promised a config that resolves
  const nlohmann::json back = longctx::HfConfigJson(*dims, *config, -1, -1);
  absl::StatusOr<longctx::ModelConfig> again = longctx::ModelConfigFromHfJson(back);
  if (!again.ok()) __builtin_trap();  // what we write, we read
  absl::StatusOr<longctx::ModelDims> dims2 = longctx::ResolveModelConfig(*again);
  if (!dims2.ok() || dims2->hidden != dims->hidden || dims2->layers != dims->layers || dims2->heads != dims->heads ||
      dims2->kv_heads != dims->kv_heads || dims2->head_dim != dims->head_dim || dims2->vocab != dims->vocab ||
      dims2->kinds != dims->kinds || dims2->window != dims->window)
    __builtin_trap();
  return 0;
}
