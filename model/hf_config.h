// Why: a checkpoint is only useful outside longctx if Hugging Face tools can
// read it, so every export writes a LlamaConfig-compatible config.json next to
// model.safetensors. Stock Llama has no per-layer attention kinds, so they are
// recorded three ways: `layer_types` + `sliding_window` (the transformers
// convention for sliding layers), `no_rope_layers` (SmolLM3 / Llama 4: 1 = the
// layer uses RoPE, 0 = NoPE) and `longctx_attention_kinds` (our enum names,
// which win on import). The reverse direction lets `longctx` fine-tune a model
// that was exported, or one of the same family, from its config.json alone.
#ifndef LONGCTX_MODEL_HF_CONFIG_H_
#define LONGCTX_MODEL_HF_CONFIG_H_

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "model/config.h"

namespace longctx {

// The Hugging Face class a model is labelled with, by its layers: all RoPE
// full → Llama; all RoPE sliding → Mistral; any other mix → SmolLM3
// (no_rope_layers, layer_types, use_sliding_window); what no stock class
// computes (RoPER, QK-norm, partial RoPE) → LongctxForCausalLM, a class
// transformers does not have, so a stock loader refuses it instead of loading
// a different model. The one place for this rule (checkpoint config.json and
// `longctx convert --to hf`, which refuses the LongctxForCausalLM case).
struct HfArchitecture {
  const char* architecture;  // "LlamaForCausalLM", …
  const char* model_type;    // "llama", "mistral", "smollm3", "longctx"
  bool stock;                // a class transformers has
};
HfArchitecture HfArchitectureOf(const ModelDims& dims);

// config.json for a resolved model. `config` supplies what ModelDims does not
// keep (layer_pattern, pattern_group, name); the sizes come from `dims`.
// bos/eos ids < 0 are written as null.
nlohmann::json HfConfigJson(const ModelDims& dims, const ModelConfig& config, int bos_token_id,
                            int eos_token_id);

// A ModelConfig from a Llama-family config.json (ours, or Llama / Mistral /
// SmolLM3 style). Every size is written explicitly (head_dim, num_kv_heads,
// rope_dim, init_std), the layer pattern is recovered when the kinds match one
// (else CUSTOM with layer_kinds), and the result passes ResolveModelConfig.
// Errors name the JSON key: `config.json: num_attention_heads: missing`.
absl::StatusOr<ModelConfig> ModelConfigFromHfJson(const nlohmann::json& j);

}  // namespace longctx

#endif  // LONGCTX_MODEL_HF_CONFIG_H_
