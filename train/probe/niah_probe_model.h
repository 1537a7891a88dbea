// Why: the probe (train/probe/niah_probe.h) talks to a ProbeModel; this is the one
// backed by a real Transformer. Teacher-forced answer losses are one forward
// pass over prompt + answer with loss only on the answer targets (the same
// ForwardBackward the trainer and `longctx eval` use). Greedy decoding is the
// inference engine's (model/inference.h: prefill into a KV cache, then one
// decode step per token, optional STRING) with the greedy Sampler
// (model/sampling.h: argmax, ties to the lowest id). Teacher-forced scores
// (log-probabilities and argmax per answer token) are the engine's logits over
// the answer rows of one prefill of prompt + answer. STRING, when the engine
// options enable it, applies to both: decoding through the engine, and the
// answer loss through the Transformer's forward-only STRING path (set for the
// call, the model's previous STRING options restored after it).
#ifndef LONGCTX_TRAIN_NIAH_PROBE_MODEL_H_
#define LONGCTX_TRAIN_NIAH_PROBE_MODEL_H_

#include <memory>
#include <vector>

#include "model/inference.h"
#include "model/transformer.h"
#include "train/device_batch.h"
#include "train/probe/niah_probe.h"

namespace longctx {

class TransformerProbeModel : public ProbeModel {
 public:
  // model must outlive this object; its weights are read, never changed.
  // Errors: bad engine options (they name the option).
  static absl::StatusOr<std::unique_ptr<TransformerProbeModel>> Create(Transformer* model,
                                                                       const EngineOptions& engine = {});
  ~TransformerProbeModel() override;

  absl::StatusOr<std::vector<int32_t>> Greedy(const std::vector<int32_t>& prompt, int max_new_tokens,
                                              int32_t stop_id) override;
  absl::StatusOr<std::vector<double>> AnswerTokenLosses(const std::vector<int32_t>& prompt,
                                                        const std::vector<int32_t>& answer) override;
  // Through the inference engine: a prefill of the prompt, then one prefill
  // of answer[0 .. A-2] with every row's logits; log-softmax in double.
  absl::StatusOr<TeacherForcedTokens> TeacherForced(const std::vector<int32_t>& prompt,
                                                    const std::vector<int32_t>& answer) override;

 private:
  TransformerProbeModel(Transformer* model, std::unique_ptr<InferenceEngine> engine, const StringOptions& string);

  Transformer* model_;
  StringOptions string_;  // the engine's; applied to answer losses too
  std::unique_ptr<InferenceEngine> engine_;
  DeviceBatch device_batch_;
  DeviceBuffer losses_;
  int64_t losses_capacity_ = 0;
};

}  // namespace longctx

#endif  // LONGCTX_TRAIN_NIAH_PROBE_MODEL_H_
