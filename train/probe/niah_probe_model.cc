// Why: see niah_probe_model.h.
#include "train/probe/niah_probe_model.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "data/packer.h"
#include "model/sampling.h"

namespace longctx {

TransformerProbeModel::TransformerProbeModel(Transformer* model, std::unique_ptr<InferenceEngine> engine,
                                             const StringOptions& string)
    : model_(model), string_(string), engine_(std::move(engine)), device_batch_(model->backend()) {}

absl::StatusOr<std::unique_ptr<TransformerProbeModel>> TransformerProbeModel::Create(Transformer* model,
                                                                                     const EngineOptions& engine) {
  absl::StatusOr<std::unique_ptr<InferenceEngine>> e = InferenceEngine::Create(model, engine);
  if (!e.ok()) return e.status();
  return std::unique_ptr<TransformerProbeModel>(new TransformerProbeModel(model, std::move(*e), engine.string));
}

TransformerProbeModel::~TransformerProbeModel() = default;

absl::StatusOr<std::vector<double>> TransformerProbeModel::AnswerTokenLosses(const std::vector<int32_t>& prompt,
                                                                             const std::vector<int32_t>& answer) {
  if (prompt.empty() || answer.empty())
    return absl::InvalidArgumentError(absl::StrCat("answer loss: prompt of ", prompt.size(), " and answer of ",
                                                   answer.size(), " tokens; both must be non-empty"));
  const int64_t P = static_cast<int64_t>(prompt.size()), A = static_cast<int64_t>(answer.size());
  const int64_t n = P + A - 1;  // inputs: every token but the last answer token
  const int64_t vocab = model_->dims().vocab;
  PackedBatch b;
  b.batch_size = 1;
  b.seq_len = static_cast<int32_t>(n);
  b.inputs.resize(n);
  b.targets.assign(n, -1);
  b.positions.resize(n);
  for (int64_t t = 0; t < n; ++t) {
    const int32_t id = t < P ? prompt[t] : answer[t - P];
    if (id < 0 || id >= vocab) return absl::InvalidArgumentError(absl::StrCat("answer loss: token id ", id, " outside the vocabulary of ", vocab));
    b.inputs[t] = id;
    b.positions[t] = static_cast<int32_t>(t);
    if (t >= P - 1) b.targets[t] = answer[t - (P - 1)];
  }
  b.cu_seqlens = {0, static_cast<int32_t>(n)};
  b.max_seqlen = static_cast<int32_t>(n);
  b.num_target_tokens = A;
  Backend* be = model_->backend();
  const bool f64 = model_->dtype() == DType::kF64;  // finite-difference test models
  const size_t elem = f64 ? 8 : 4;
  if (n > losses_capacity_) {
    losses_ = DeviceBuffer(be, static_cast<size_t>(n) * elem);
    losses_capacity_ = n;
  }
  const Tensor losses(losses_.data(), f64 ? DType::kF64 : DType::kF32, {n}, be->device());
  BatchTensors t = device_batch_.Upload(b);
  if (string_.enabled) {
    const StringOptions previous = model_->string_options();
    absl::Status st = model_->SetStringOptions(string_);
    if (!st.ok()) return st;
    model_->ForwardBackward(t, 0.0, /*backward=*/false, &losses);
    st = model_->SetStringOptions(previous);
    if (!st.ok()) return st;
  } else {
    model_->ForwardBackward(t, 0.0, /*backward=*/false, &losses);
  }
  std::vector<double> out(A);
  if (f64) {
    std::vector<double> host(n);
    be->CopyToHost(host.data(), losses);
    std::copy(host.begin() + (P - 1), host.end(), out.begin());
  } else {
    std::vector<float> host(n);
    be->CopyToHost(host.data(), losses);
    std::copy(host.begin() + (P - 1), host.end(), out.begin());
  }
  return out;
}

absl::StatusOr<ProbeModel::TeacherForcedTokens> TransformerProbeModel::TeacherForced(
    const std::vector<int32_t>& prompt, const std::vector<int32_t>& answer) {
  if (prompt.empty() || answer.empty())
    return absl::InvalidArgumentError(absl::StrCat("teacher-forced score: prompt of ", prompt.size(), " and answer of ",
                                                   answer.size(), " tokens; both must be non-empty"));
  const int64_t A = static_cast<int64_t>(answer.size()), V = model_->dims().vocab;
  for (int32_t id : answer)
    if (id < 0 || id >= V)
      return absl::InvalidArgumentError(
          absl::StrCat("teacher-forced score: answer token id ", id, " outside the vocabulary of ", V));
  engine_->Reset();
  // Row i of `rows` predicts answer[i]: the prompt's last row, then the rows of
  // answer[0 .. A-2] (answer[A-1] is only a target).
  absl::StatusOr<std::vector<float>> last = engine_->Prefill(prompt);
  if (!last.ok()) return last.status();
  std::vector<float> rows = std::move(*last);
  if (A > 1) {
    std::vector<float> rest;
    absl::StatusOr<std::vector<float>> l =
        engine_->Prefill(absl::MakeConstSpan(answer.data(), static_cast<size_t>(A - 1)), &rest);
    if (!l.ok()) return l.status();
    rows.insert(rows.end(), rest.begin(), rest.end());
  }
  engine_->Reset();
  TeacherForcedTokens out;
  out.logprob.resize(A);
  out.argmax.resize(A);
  for (int64_t i = 0; i < A; ++i) {
    const float* row = rows.data() + i * V;
    int32_t best = 0;
    for (int64_t v = 1; v < V; ++v)
      if (row[v] > row[best]) best = static_cast<int32_t>(v);
    double z = 0;
    for (int64_t v = 0; v < V; ++v) z += std::exp(static_cast<double>(row[v]) - row[best]);
    out.logprob[i] = static_cast<double>(row[answer[i]]) - row[best] - std::log(z);
    out.argmax[i] = best;
  }
  return out;
}

absl::StatusOr<std::vector<int32_t>> TransformerProbeModel::Greedy(const std::vector<int32_t>& prompt,
                                                                   int max_new_tokens, int32_t stop_id) {
  engine_->Reset();
  Sampler greedy(SamplingOptions{});  // temperature 0
  std::vector<int32_t> out;
  if (max_new_tokens <= 0) return out;
  absl::StatusOr<std::vector<float>> logits = engine_->Prefill(prompt);
  while (logits.ok()) {
    out.push_back(greedy.Next(*logits));
    if (out.back() == stop_id || static_cast<int>(out.size()) >= max_new_tokens) return out;
    logits = engine_->Decode(out.back());
  }
  return logits.status();
}

}  // namespace longctx
