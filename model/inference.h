// Why: generation (and the needle probes and attention analyses built on it)
// needs a forward that costs O(context) per new token, not O(context^2): a
// per-layer KV cache (model/kv_cache.h) filled by a prefill of the prompt,
// then one decode step per token. InferenceEngine runs a Transformer's weights
// that way, with only Backend calls (any device), through the same block code
// as the training forward (model/block_forward.h, model/layer_attention.h), so
// it supports every layer kind, QK-norm, RoPER and STRING.
//
// A prefill is processed in chunks of EngineOptions::prefill_chunk tokens:
// each chunk's queries attend to the cached keys plus its own (the attention
// op's bottom-right aligned key segment), which also bounds a sliding layer's
// cache to window - 1 + chunk rows. Decode(token) is a chunk of one. Logits
// are returned as host floats.
//
// Capture hook (for attention analyses, model/attention_analysis.h): when set,
// every Prefill hands back, once per layer after the whole prompt has run, the
// q and k that layer's attention used, as host floats: q [T, heads, head_dim]
// after QK-norm and RoPE (rotated at the true positions; under STRING this is
// part 1's rotation, and the STRING table scale is included where active),
// k [T, kv_heads, head_dim] likewise, plus the layer's kind, window and rotary
// dims. T is the number of tokens of that Prefill call and first_position the
// position of its first token (0 for a prefill into an empty cache, which is
// what CapturedAttention's analyses assume).
#ifndef LONGCTX_MODEL_INFERENCE_H_
#define LONGCTX_MODEL_INFERENCE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "kernels/backend.h"
#include "model/attention_analysis.h"
#include "model/kv_cache.h"
#include "model/layer_attention.h"
#include "model/transformer.h"

namespace longctx {

struct EngineOptions {
  StringOptions string;          // STRING for prefill and decode (s must be set when enabled)
  int64_t prefill_chunk = 1024;  // tokens per prefill step; 0 = the whole prompt at once
  // Ablation: (layer, query head) pairs whose attention output is zeroed
  // before o_proj, in prefill and decode (e.g. the "positional heads" of an
  // attention analysis).
  std::vector<std::pair<int, int>> ablate_heads;
};

using CaptureHook = std::function<void(const CapturedAttention& layer, int64_t first_position)>;

class InferenceEngine {
 public:
  // The model must outlive the engine; its weights are read, never changed.
  // InvalidArgument for bad options (names the option).
  static absl::StatusOr<std::unique_ptr<InferenceEngine>> Create(Transformer* model, const EngineOptions& options);
  ~InferenceEngine();

  // Runs tokens through the model after what is already cached (Reset() starts
  // a new sequence) and returns the logits [V] of the last one. all_logits,
  // when set, receives [tokens.size(), V] (row-major) for every token.
  // InvalidArgument for an empty prompt or an id outside the vocabulary.
  absl::StatusOr<std::vector<float>> Prefill(absl::Span<const int32_t> tokens,
                                             std::vector<float>* all_logits = nullptr);
  // One token: its logits [V].
  absl::StatusOr<std::vector<float>> Decode(int32_t token);

  void Reset();
  int64_t position() const { return position_; }  // tokens consumed since Reset
  const KvCache& cache() const { return cache_; }
  const EngineOptions& options() const { return options_; }
  void set_capture_hook(CaptureHook hook) { capture_ = std::move(hook); }

 private:
  InferenceEngine(Transformer* model, const EngineOptions& options);
  absl::Status CheckTokens(absl::Span<const int32_t> tokens) const;
  void EnsureScratch(int64_t rows, bool all_logits);
  // One block of c tokens at positions position_.. ; logits of the last row
  // (or of every row) into `logits` on the host.
  void Step(absl::Span<const int32_t> tokens, bool every_row, float* logits);
  void CaptureLayer(int layer, const Tensor& q, const Tensor& k, int64_t rows);

  Transformer* model_;
  ModelDims dims_;
  Backend* be_;
  DType dtype_;
  EngineOptions options_;
  KvCache cache_;
  LayerAttention attention_;
  int64_t position_ = 0;

  // Scratch for one step of up to rows_ tokens (grown on demand).
  struct Scratch;
  std::unique_ptr<Scratch> s_;

  CaptureHook capture_;
  std::vector<CapturedAttention> captured_;  // during a Prefill with a hook
};

}  // namespace longctx

#endif  // LONGCTX_MODEL_INFERENCE_H_
