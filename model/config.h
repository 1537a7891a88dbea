// Why: model/config.proto says what a user may write; ModelDims is what the
// rest of longctx computes with. ResolveModelConfig is the one place where
// defaults that depend on other fields are filled in (head_dim, kv heads,
// rope_dim, init std, the per-layer attention kinds) and where every field is
// checked, so a bad config fails once, early, with a one-line message that
// names the field (`model.num_kv_heads: 3 does not divide model.num_heads 8`)
// instead of as a shape error deep inside a kernel.
#ifndef LONGCTX_MODEL_CONFIG_H_
#define LONGCTX_MODEL_CONFIG_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/config.pb.h"

namespace longctx {

// The resolved, validated model. Every size is final (no 0 = "default").
struct ModelDims {
  std::string name;
  int vocab = 0;
  int hidden = 0;
  int layers = 0;
  int heads = 0;
  int kv_heads = 0;
  int head_dim = 0;
  int ffn = 0;       // SwiGLU inner size
  int rope_dim = 0;  // rotary dims per head (even, <= head_dim)
  int window = 0;    // sliding window of ROPE_SWA layers (query + window-1 predecessors); 0 = none
  bool tied = false;
  bool qk_norm = false;
  bool roper = false;  // RoPER on the RoPE layers (values rotated by j, outputs by -i)
  int roper_dim = 0;   // rotated value dims per head (even, <= head_dim) when roper
  float eps = 1e-5f;
  float theta = 10000.f;
  float init_std = 0.f;      // normal(0, init_std) for every matrix but the two below
  float out_init_std = 0.f;  // o_proj and down_proj: 1/sqrt(hidden)/layers
  int max_positions = 0;     // max_position_embeddings (recorded, not enforced)
  std::vector<AttentionKind> kinds;  // one per layer

  bool uses_rope(int layer) const { return kinds[layer] != NOPE_FULL; }
  bool uses_roper(int layer) const { return roper && uses_rope(layer); }
  bool is_sliding(int layer) const { return kinds[layer] == ROPE_SWA; }
  // Keys a query may see in this layer: window for ROPE_SWA, 0 = unlimited (causal).
  int layer_window(int layer) const { return is_sliding(layer) ? window : 0; }
  int q_dim() const { return heads * head_dim; }
  int kv_dim() const { return kv_heads * head_dim; }
  int qkv_dim() const { return q_dim() + 2 * kv_dim(); }
  int kv_group() const { return heads / kv_heads; }  // query heads per kv head
  bool any_rope() const;
  bool any_sliding() const;
  int num_layers_of(AttentionKind kind) const;

  bool operator==(const ModelDims&) const = default;
};

// Attention kind of every layer for a pattern. RNOPE_SWA: layer i is NOPE_FULL
// iff (i + 1) % group == 0, else ROPE_SWA; RNOPE_FULL: the same with ROPE_FULL.
// CUSTOM (and UNSPECIFIED) return an empty vector: the kinds come from
// ModelConfig.layer_kinds. group is only read by the RNOPE patterns (>= 1).
std::vector<AttentionKind> LayerKindsForPattern(LayerPattern pattern, int num_layers, int group);

// Validates every field and fills in derived defaults. Errors are
// InvalidArgument with one line that starts with the field's path, `model.x: ...`.
absl::StatusOr<ModelDims> ResolveModelConfig(const ModelConfig& config);

// model.activation_dtype for a run: true = bf16 activation storage
// (Transformer::set_activation_dtype), false = fp32. bf16 is refused unless the
// matmul precision is bf16 (matmul_bf16: train.proto precision BF16) and the
// model computes in F32 (model_f32). InvalidArgument naming the field.
absl::StatusOr<bool> ResolveBf16Activations(const ModelConfig& config, bool matmul_bf16, bool model_f32 = true);

// Compact per-layer pattern, one letter per layer in groups of 4 or of the
// pattern group: R = ROPE_FULL, S = ROPE_SWA, N = NOPE_FULL. E.g. "SSSN SSSN".
std::string LayerKindsString(const std::vector<AttentionKind>& kinds, int group = 4);

}  // namespace longctx

#endif  // LONGCTX_MODEL_CONFIG_H_
