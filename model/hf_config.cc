// Why: see hf_config.h. Floats are written as the shortest decimal that reads
// back as the same float (1e-05, not 9.999999747378752e-06), so a config.json
// is readable by people and round-trips bit-exactly.
#include "model/hf_config.h"
#include "base/status_macros.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace longctx {
namespace {

double ShortestDouble(float f) {
  if (!std::isfinite(f)) return static_cast<double>(f);
  char buf[64];
  for (int precision = 1; precision <= 9; ++precision) {
    std::snprintf(buf, sizeof(buf), "%.*g", precision, static_cast<double>(f));
    if (std::strtof(buf, nullptr) == f) return std::strtod(buf, nullptr);
  }
  return static_cast<double>(f);
}

absl::Status Bad(const std::string& key, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("config.json: ", key, ": ", what));
}

// Reads an integer key; `fallback` used when absent or null (nullptr = required).
absl::Status GetInt(const nlohmann::json& j, const char* key, const int* fallback, int* out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    if (fallback == nullptr) return Bad(key, "missing");
    *out = *fallback;
    return absl::OkStatus();
  }
  if (!it->is_number_integer()) return Bad(key, absl::StrCat("must be an integer (got ", it->dump(), ")"));
  const int64_t v = it->get<int64_t>();
  if (v < INT32_MIN || v > INT32_MAX) return Bad(key, absl::StrCat("out of range (got ", v, ")"));
  *out = static_cast<int>(v);
  return absl::OkStatus();
}

absl::Status GetFloat(const nlohmann::json& j, const char* key, float fallback, float* out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    *out = fallback;
    return absl::OkStatus();
  }
  if (!it->is_number()) return Bad(key, absl::StrCat("must be a number (got ", it->dump(), ")"));
  *out = static_cast<float>(it->get<double>());
  return absl::OkStatus();
}

absl::Status GetBool(const nlohmann::json& j, const char* key, bool fallback, bool* out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    *out = fallback;
    return absl::OkStatus();
  }
  if (!it->is_boolean()) return Bad(key, absl::StrCat("must be true or false (got ", it->dump(), ")"));
  *out = it->get<bool>();
  return absl::OkStatus();
}


// The kinds from the HF keys when longctx_attention_kinds is absent.
absl::StatusOr<std::vector<AttentionKind>> KindsFromHf(const nlohmann::json& j, int layers) {
  std::vector<bool> sliding(layers, false), rope(layers, true);
  if (auto it = j.find("layer_types"); it != j.end() && !it->is_null()) {
    if (!it->is_array() || static_cast<int>(it->size()) != layers)
      return Bad("layer_types", absl::StrCat("must be a list of ", layers, " strings"));
    for (int i = 0; i < layers; ++i) {
      const nlohmann::json& t = (*it)[i];
      if (t == "sliding_attention") {
        sliding[i] = true;
      } else if (t != "full_attention") {
        return Bad(absl::StrCat("layer_types[", i, "]"),
                   absl::StrCat("must be \"full_attention\" or \"sliding_attention\" (got ", t.dump(), ")"));
      }
    }
  } else if (j.value("model_type", "") == "mistral" && j.contains("sliding_window") &&
             !j["sliding_window"].is_null()) {
    sliding.assign(layers, true);  // Mistral: every layer slides
  }
  if (auto it = j.find("no_rope_layers"); it != j.end() && !it->is_null()) {
    if (!it->is_array() || static_cast<int>(it->size()) != layers)
      return Bad("no_rope_layers", absl::StrCat("must be a list of ", layers, " 0/1 values"));
    for (int i = 0; i < layers; ++i) {
      const nlohmann::json& v = (*it)[i];
      if (!v.is_number_integer() || (v != 0 && v != 1))
        return Bad(absl::StrCat("no_rope_layers[", i, "]"), absl::StrCat("must be 0 or 1 (got ", v.dump(), ")"));
      rope[i] = v == 1;
    }
  }
  std::vector<AttentionKind> kinds(layers);
  for (int i = 0; i < layers; ++i) {
    if (sliding[i] && !rope[i])
      return Bad(absl::StrCat("layer ", i), "a sliding-window NoPE layer has no longctx attention kind");
    kinds[i] = sliding[i] ? ROPE_SWA : (rope[i] ? ROPE_FULL : NOPE_FULL);
  }
  return kinds;
}

// Sets layer_pattern/pattern_group (or CUSTOM + layer_kinds) so that the
// config expands to `kinds`, preferring the recorded pattern.
void SetPattern(const std::vector<AttentionKind>& kinds, LayerPattern recorded, int recorded_group,
                ModelConfig* c) {
  const int layers = static_cast<int>(kinds.size());
  if (recorded != LAYER_PATTERN_UNSPECIFIED && recorded != CUSTOM &&
      LayerKindsForPattern(recorded, layers, recorded_group) == kinds) {
    c->set_layer_pattern(recorded);
    if (recorded == RNOPE_SWA || recorded == RNOPE_FULL) c->set_pattern_group(recorded_group);
    return;
  }
  for (LayerPattern p : {ALL_ROPE_FULL, ALL_NOPE_FULL}) {
    if (LayerKindsForPattern(p, layers, 0) == kinds) {
      c->set_layer_pattern(p);
      return;
    }
  }
  for (int g = 2; g <= layers; ++g) {
    for (LayerPattern p : {RNOPE_SWA, RNOPE_FULL}) {
      if (LayerKindsForPattern(p, layers, g) == kinds) {
        c->set_layer_pattern(p);
        c->set_pattern_group(g);
        return;
      }
    }
  }
  c->set_layer_pattern(CUSTOM);
  for (AttentionKind k : kinds) c->add_layer_kinds(k);
}

}  // namespace

HfArchitecture HfArchitectureOf(const ModelDims& d) {
  if (d.roper || d.qk_norm || (d.rope_dim != d.head_dim && d.any_rope())) return {"LongctxForCausalLM", "longctx", false};
  bool all_full = true, all_sliding = true;
  for (int l = 0; l < d.layers; ++l) {
    all_full &= d.kinds[l] == ROPE_FULL;
    all_sliding &= d.kinds[l] == ROPE_SWA;
  }
  if (all_full) return {"LlamaForCausalLM", "llama", true};
  if (all_sliding) return {"MistralForCausalLM", "mistral", true};
  return {"SmolLM3ForCausalLM", "smollm3", true};
}

nlohmann::json HfConfigJson(const ModelDims& d, const ModelConfig& config, int bos_token_id, int eos_token_id) {
  nlohmann::json j;
  // The label decides what a Hugging Face loader builds, and transformers'
  // Llama ignores layer_types / sliding_window / no_rope_layers: an RNoPE-SWA
  // checkpoint labelled Llama would load without an error and compute another
  // model. So the label follows the layers (HfArchitectureOf).
  const HfArchitecture arch = HfArchitectureOf(d);
  j["architectures"] = {arch.architecture};
  j["model_type"] = arch.model_type;
  if (std::string(arch.model_type) == "smollm3") j["use_sliding_window"] = d.any_sliding();
  j["longctx_name"] = d.name;
  j["vocab_size"] = d.vocab;
  j["hidden_size"] = d.hidden;
  j["intermediate_size"] = d.ffn;
  j["num_hidden_layers"] = d.layers;
  j["num_attention_heads"] = d.heads;
  j["num_key_value_heads"] = d.kv_heads;
  j["head_dim"] = d.head_dim;
  j["hidden_act"] = "silu";
  j["max_position_embeddings"] = d.max_positions;
  j["initializer_range"] = ShortestDouble(d.init_std);
  j["rms_norm_eps"] = ShortestDouble(d.eps);
  j["rope_theta"] = ShortestDouble(d.theta);
  j["rope_scaling"] = nullptr;
  if (d.rope_dim != d.head_dim) j["partial_rotary_factor"] = static_cast<double>(d.rope_dim) / d.head_dim;
  j["longctx_rope_dim"] = d.rope_dim;
  j["tie_word_embeddings"] = d.tied;
  j["attention_bias"] = false;
  j["mlp_bias"] = false;
  j["attention_dropout"] = 0.0;
  j["pretraining_tp"] = 1;
  j["use_cache"] = true;
  j["torch_dtype"] = "float32";
  j["bos_token_id"] = bos_token_id >= 0 ? nlohmann::json(bos_token_id) : nlohmann::json(nullptr);
  j["eos_token_id"] = eos_token_id >= 0 ? nlohmann::json(eos_token_id) : nlohmann::json(nullptr);

  nlohmann::json layer_types = nlohmann::json::array(), no_rope = nlohmann::json::array(),
                 kinds = nlohmann::json::array();
  for (int l = 0; l < d.layers; ++l) {
    layer_types.push_back(d.is_sliding(l) ? "sliding_attention" : "full_attention");
    no_rope.push_back(d.uses_rope(l) ? 1 : 0);
    kinds.push_back(AttentionKind_Name(d.kinds[l]));
  }
  j["layer_types"] = layer_types;
  j["sliding_window"] = d.any_sliding() ? nlohmann::json(d.window) : nlohmann::json(nullptr);
  j["no_rope_layers"] = no_rope;
  j["use_qk_norm"] = d.qk_norm;
  // RoPER has no Hugging Face equivalent: recorded for longctx (and readers
  // that know it); a stock Llama loader would ignore the value rotation.
  j["longctx_roper"] = d.roper;
  if (d.roper) j["longctx_roper_dim"] = d.roper_dim;
  j["longctx_attention_kinds"] = kinds;
  j["longctx_layer_pattern"] = LayerPattern_Name(config.layer_pattern());
  j["longctx_pattern_group"] = config.pattern_group();
  return j;
}

absl::StatusOr<ModelConfig> ModelConfigFromHfJson(const nlohmann::json& j) {
  if (!j.is_object()) return absl::InvalidArgumentError("config.json: not a JSON object");
  if (auto it = j.find("hidden_act"); it != j.end() && *it != "silu")
    return Bad("hidden_act", absl::StrCat("only \"silu\" (SwiGLU) is supported (got ", it->dump(), ")"));
  for (const char* key : {"attention_bias", "mlp_bias"}) {
    if (auto it = j.find(key); it != j.end() && *it != false)
      return Bad(key, absl::StrCat("biases are not supported (got ", it->dump(), ")"));
  }
  if (auto it = j.find("rope_scaling"); it != j.end() && !it->is_null())
    return Bad("rope_scaling", absl::StrCat("RoPE scaling is not supported (got ", it->dump(), ")"));

  ModelConfig c;
  int vocab, hidden, layers, heads, ffn;
  LONGCTX_RETURN_IF_ERROR(GetInt(j, "vocab_size", nullptr, &vocab));
  LONGCTX_RETURN_IF_ERROR(GetInt(j, "hidden_size", nullptr, &hidden));
  LONGCTX_RETURN_IF_ERROR(GetInt(j, "num_hidden_layers", nullptr, &layers));
  LONGCTX_RETURN_IF_ERROR(GetInt(j, "num_attention_heads", nullptr, &heads));
  LONGCTX_RETURN_IF_ERROR(GetInt(j, "intermediate_size", nullptr, &ffn));
  if (heads <= 0) return Bad("num_attention_heads", absl::StrCat("must be > 0 (got ", heads, ")"));
  if (layers <= 0) return Bad("num_hidden_layers", absl::StrCat("must be > 0 (got ", layers, ")"));
  int kv_heads, head_dim, max_pos, rope_dim;
  LONGCTX_RETURN_IF_ERROR(GetInt(j, "num_key_value_heads", &heads, &kv_heads));
  const int default_head_dim = hidden / heads;
  LONGCTX_RETURN_IF_ERROR(GetInt(j, "head_dim", &default_head_dim, &head_dim));
  const int default_max_pos = 2048;
  LONGCTX_RETURN_IF_ERROR(GetInt(j, "max_position_embeddings", &default_max_pos, &max_pos));
  float partial = 1.0f;
  LONGCTX_RETURN_IF_ERROR(GetFloat(j, "partial_rotary_factor", 1.0f, &partial));
  const int default_rope_dim = static_cast<int>(std::lround(partial * head_dim));
  LONGCTX_RETURN_IF_ERROR(GetInt(j, "longctx_rope_dim", &default_rope_dim, &rope_dim));
  float eps, theta, init_std;
  LONGCTX_RETURN_IF_ERROR(GetFloat(j, "rms_norm_eps", 1e-6f, &eps));  // LlamaConfig's default
  LONGCTX_RETURN_IF_ERROR(GetFloat(j, "rope_theta", 10000.f, &theta));
  LONGCTX_RETURN_IF_ERROR(GetFloat(j, "initializer_range", 0.02f, &init_std));
  bool tied, qk_norm, roper;
  LONGCTX_RETURN_IF_ERROR(GetBool(j, "tie_word_embeddings", false, &tied));
  LONGCTX_RETURN_IF_ERROR(GetBool(j, "use_qk_norm", false, &qk_norm));
  LONGCTX_RETURN_IF_ERROR(GetBool(j, "longctx_roper", false, &roper));
  int roper_dim = 0;
  const int no_roper_dim = 0;
  if (roper) LONGCTX_RETURN_IF_ERROR(GetInt(j, "longctx_roper_dim", &no_roper_dim, &roper_dim));

  c.set_name(j.contains("longctx_name") && j["longctx_name"].is_string() ? j["longctx_name"].get<std::string>()
                                                                         : "hf-import");
  c.set_vocab_size(vocab);
  c.set_hidden_size(hidden);
  c.set_num_layers(layers);
  c.set_num_heads(heads);
  c.set_num_kv_heads(kv_heads);
  c.set_head_dim(head_dim);
  c.set_ffn_hidden_size(ffn);
  c.set_rms_norm_eps(eps);
  c.set_rope_theta(theta);
  c.set_tie_embeddings(tied);
  c.set_qk_norm(qk_norm);
  c.set_max_position_embeddings(max_pos);
  c.set_init_std(init_std);
  c.set_rope_dim(rope_dim);
  c.set_roper(roper);
  c.set_roper_dim(roper_dim);

  // Layer kinds: ours first, else the Hugging Face keys.
  std::vector<AttentionKind> kinds;
  if (auto it = j.find("longctx_attention_kinds"); it != j.end() && !it->is_null()) {
    if (!it->is_array() || static_cast<int>(it->size()) != layers)
      return Bad("longctx_attention_kinds", absl::StrCat("must be a list of ", layers, " kind names"));
    for (int i = 0; i < layers; ++i) {
      AttentionKind k;
      const nlohmann::json& v = (*it)[i];
      if (!v.is_string() || !AttentionKind_Parse(v.get<std::string>(), &k) || k == ATTENTION_KIND_UNSPECIFIED)
        return Bad(absl::StrCat("longctx_attention_kinds[", i, "]"),
                   absl::StrCat("must be ROPE_FULL, ROPE_SWA or NOPE_FULL (got ", v.dump(), ")"));
      kinds.push_back(k);
    }
  } else {
    auto k = KindsFromHf(j, layers);
    if (!k.ok()) return k.status();
    kinds = *std::move(k);
  }
  LayerPattern recorded = LAYER_PATTERN_UNSPECIFIED;
  if (auto it = j.find("longctx_layer_pattern"); it != j.end() && it->is_string())
    LayerPattern_Parse(it->get<std::string>(), &recorded);
  int group = 4;
  const int default_group = 4;
  LONGCTX_RETURN_IF_ERROR(GetInt(j, "longctx_pattern_group", &default_group, &group));
  SetPattern(kinds, recorded, group, &c);

  bool any_sliding = false;
  for (AttentionKind k : kinds) any_sliding |= k == ROPE_SWA;
  if (any_sliding) {
    int window;
    LONGCTX_RETURN_IF_ERROR(GetInt(j, "sliding_window", nullptr, &window));
    c.set_sliding_window(window);
  }

  // The config must describe a model longctx can build.
  auto dims = ResolveModelConfig(c);
  if (!dims.ok()) return absl::InvalidArgumentError(absl::StrCat("config.json: ", dims.status().message()));
  return c;
}

}  // namespace longctx
