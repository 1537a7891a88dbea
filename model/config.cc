// Why: see config.h. Checks run in dependency order (sizes, then heads, then
// layer kinds, then what depends on the kinds: window and RoPE dims), and the
// first failure is returned, so the message always names the root cause.
#include "model/config.h"
#include "base/status_macros.h"

#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace longctx {
namespace {

absl::Status Bad(const std::string& field, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("model.", field, ": ", what));
}

template <class T>
absl::Status MustBePositive(const std::string& field, T value) {
  if (value > 0) return absl::OkStatus();  // also rejects NaN
  return Bad(field, absl::StrCat("must be > 0 (got ", value, ")"));
}

template <class T>
absl::Status MustBeNonNegative(const std::string& field, T value) {
  if (value >= 0) return absl::OkStatus();
  return Bad(field, absl::StrCat("must be >= 0 (got ", value, ")"));
}


}  // namespace

bool ModelDims::any_rope() const {
  for (int l = 0; l < layers; ++l)
    if (uses_rope(l)) return true;
  return false;
}

bool ModelDims::any_sliding() const {
  for (int l = 0; l < layers; ++l)
    if (is_sliding(l)) return true;
  return false;
}

int ModelDims::num_layers_of(AttentionKind kind) const {
  int n = 0;
  for (AttentionKind k : kinds) n += k == kind;
  return n;
}

std::vector<AttentionKind> LayerKindsForPattern(LayerPattern pattern, int num_layers, int group) {
  std::vector<AttentionKind> kinds;
  if (num_layers <= 0) return kinds;
  switch (pattern) {
    case ALL_ROPE_FULL:
      kinds.assign(num_layers, ROPE_FULL);
      break;
    case ALL_NOPE_FULL:
      kinds.assign(num_layers, NOPE_FULL);
      break;
    case RNOPE_SWA:
    case RNOPE_FULL: {
      const AttentionKind rope = pattern == RNOPE_SWA ? ROPE_SWA : ROPE_FULL;
      kinds.resize(num_layers);
      for (int i = 0; i < num_layers; ++i)
        kinds[i] = (group > 0 && (i + 1) % group == 0) ? NOPE_FULL : rope;
      break;
    }
    default:  // CUSTOM, UNSPECIFIED: the caller supplies the kinds
      break;
  }
  return kinds;
}

absl::StatusOr<ModelDims> ResolveModelConfig(const ModelConfig& c) {
  ModelDims d;
  d.name = c.name();

  LONGCTX_RETURN_IF_ERROR(MustBePositive("vocab_size", c.vocab_size()));
  LONGCTX_RETURN_IF_ERROR(MustBePositive("hidden_size", c.hidden_size()));
  LONGCTX_RETURN_IF_ERROR(MustBePositive("num_layers", c.num_layers()));
  LONGCTX_RETURN_IF_ERROR(MustBePositive("ffn_hidden_size", c.ffn_hidden_size()));
  LONGCTX_RETURN_IF_ERROR(MustBePositive("num_heads", c.num_heads()));
  LONGCTX_RETURN_IF_ERROR(MustBeNonNegative("num_kv_heads", c.num_kv_heads()));
  LONGCTX_RETURN_IF_ERROR(MustBeNonNegative("head_dim", c.head_dim()));
  LONGCTX_RETURN_IF_ERROR(MustBeNonNegative("rope_dim", c.rope_dim()));
  LONGCTX_RETURN_IF_ERROR(MustBeNonNegative("roper_dim", c.roper_dim()));
  LONGCTX_RETURN_IF_ERROR(MustBeNonNegative("sliding_window", c.sliding_window()));
  LONGCTX_RETURN_IF_ERROR(MustBePositive("rms_norm_eps", c.rms_norm_eps()));
  LONGCTX_RETURN_IF_ERROR(MustBePositive("rope_theta", c.rope_theta()));
  LONGCTX_RETURN_IF_ERROR(MustBeNonNegative("init_std", c.init_std()));
  LONGCTX_RETURN_IF_ERROR(MustBePositive("max_position_embeddings", c.max_position_embeddings()));
  if (!std::isfinite(c.rms_norm_eps())) return Bad("rms_norm_eps", "must be finite");
  if (!std::isfinite(c.rope_theta())) return Bad("rope_theta", "must be finite");
  if (!std::isfinite(c.init_std())) return Bad("init_std", "must be finite");
  if (absl::Status st = ResolveBf16Activations(c, /*matmul_bf16=*/true).status(); !st.ok()) return st;

  d.vocab = c.vocab_size();
  d.hidden = c.hidden_size();
  d.layers = c.num_layers();
  d.ffn = c.ffn_hidden_size();
  d.heads = c.num_heads();
  d.eps = c.rms_norm_eps();
  d.theta = c.rope_theta();
  d.tied = c.tie_embeddings();
  d.qk_norm = c.qk_norm();
  d.max_positions = c.max_position_embeddings();

  // Heads.
  if (c.head_dim() == 0) {
    if (d.hidden % d.heads != 0)
      return Bad("num_heads", absl::StrCat(d.heads, " does not divide model.hidden_size ", d.hidden));
    d.head_dim = d.hidden / d.heads;
  } else {
    d.head_dim = c.head_dim();
  }
  d.kv_heads = c.num_kv_heads() == 0 ? d.heads : c.num_kv_heads();
  if (d.heads % d.kv_heads != 0)
    return Bad("num_kv_heads", absl::StrCat(d.kv_heads, " does not divide model.num_heads ", d.heads));

  // Layer kinds.
  const LayerPattern pattern = c.layer_pattern();
  if (pattern == LAYER_PATTERN_UNSPECIFIED || !LayerPattern_IsValid(pattern))
    return Bad("layer_pattern", absl::StrCat("must be one of ALL_ROPE_FULL, ALL_NOPE_FULL, RNOPE_SWA, ",
                                             "RNOPE_FULL, CUSTOM (got ", static_cast<int>(pattern), ")"));
  if (pattern == CUSTOM) {
    if (c.layer_kinds_size() != d.layers)
      return Bad("layer_kinds", absl::StrCat("has ", c.layer_kinds_size(), " entries but model.num_layers is ",
                                             d.layers, " (layer_pattern CUSTOM needs one kind per layer)"));
    for (int i = 0; i < c.layer_kinds_size(); ++i) {
      const int k = c.layer_kinds(i);
      if (k == ATTENTION_KIND_UNSPECIFIED || !AttentionKind_IsValid(k))
        return Bad(absl::StrCat("layer_kinds[", i, "]"),
                   absl::StrCat("must be ROPE_FULL, ROPE_SWA or NOPE_FULL (got ", k, ")"));
      d.kinds.push_back(static_cast<AttentionKind>(k));
    }
  } else {
    if (c.layer_kinds_size() != 0)
      return Bad("layer_kinds", absl::StrCat("must be empty unless model.layer_pattern is CUSTOM (pattern ",
                                             LayerPattern_Name(pattern), ", ", c.layer_kinds_size(),
                                             " entries)"));
    if (pattern == RNOPE_SWA || pattern == RNOPE_FULL) {
      if (c.pattern_group() < 2)
        return Bad("pattern_group", absl::StrCat("must be >= 2 for ", LayerPattern_Name(pattern), " (got ",
                                                 c.pattern_group(), ")"));
    }
    d.kinds = LayerKindsForPattern(pattern, d.layers, c.pattern_group());
  }

  // What depends on the kinds.
  if (d.any_sliding()) {
    if (c.sliding_window() <= 0)
      return Bad("sliding_window",
                 absl::StrCat("must be > 0 when a layer uses ROPE_SWA (got ", c.sliding_window(), ")"));
  }
  d.window = d.any_sliding() ? c.sliding_window() : 0;  // ignored without ROPE_SWA layers
  d.rope_dim = c.rope_dim() == 0 ? d.head_dim : c.rope_dim();
  if (d.rope_dim > d.head_dim)
    return Bad("rope_dim", absl::StrCat(d.rope_dim, " exceeds model.head_dim ", d.head_dim));
  if (d.any_rope()) {
    if (d.head_dim % 2 != 0)
      return Bad("head_dim", absl::StrCat("must be even when a layer uses RoPE (got ", d.head_dim, ")"));
    if (d.rope_dim % 2 != 0)
      return Bad("rope_dim", absl::StrCat("must be even (got ", d.rope_dim, ")"));
  }
  d.roper = c.roper();
  if (!d.roper && c.roper_dim() != 0)
    return Bad("roper_dim", absl::StrCat("is ", c.roper_dim(), " but model.roper is false"));
  if (d.roper) {
    if (!d.any_rope()) return Bad("roper", "is true but no layer uses RoPE (RoPER rotates values on RoPE layers)");
    d.roper_dim = c.roper_dim() == 0 ? d.head_dim : c.roper_dim();
    if (d.roper_dim > d.head_dim)
      return Bad("roper_dim", absl::StrCat(d.roper_dim, " exceeds model.head_dim ", d.head_dim));
    if (d.roper_dim % 2 != 0) return Bad("roper_dim", absl::StrCat("must be even (got ", d.roper_dim, ")"));
  }

  // Init (TinyLlama).
  d.init_std = c.init_std() > 0 ? c.init_std() : static_cast<float>(std::sqrt(2.0 / (5.0 * d.hidden)));
  d.out_init_std = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d.hidden)) / d.layers);
  return d;
}

absl::StatusOr<bool> ResolveBf16Activations(const ModelConfig& c, bool matmul_bf16, bool model_f32) {
  const std::string v = absl::AsciiStrToLower(c.activation_dtype());
  if (v == "fp32" || v == "f32") return false;
  if (v != "bf16")
    return Bad("activation_dtype", absl::StrCat("must be fp32 or bf16 (got '", c.activation_dtype(), "')"));
  if (!matmul_bf16)
    return Bad("activation_dtype",
               "bf16 needs precision BF16 (--precision=bf16): with fp32 products the bf16-stored activations would "
               "lose precision the products keep");
  if (!model_f32)
    return Bad("activation_dtype", "bf16 needs an F32 model (the model computes in another dtype)");
  return true;
}

std::string LayerKindsString(const std::vector<AttentionKind>& kinds, int group) {
  std::string s;
  if (group <= 0) group = 4;
  for (size_t i = 0; i < kinds.size(); ++i) {
    if (i > 0 && i % group == 0) s += ' ';
    switch (kinds[i]) {
      case ROPE_FULL: s += 'R'; break;
      case ROPE_SWA: s += 'S'; break;
      case NOPE_FULL: s += 'N'; break;
      default: s += '?'; break;
    }
  }
  return s;
}

}  // namespace longctx
