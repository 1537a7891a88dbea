// Why: the probe's real model adapter (train/probe/niah_probe_model.h) must report
// what the model computes: its teacher-forced answer losses equal
// −log softmax of the inference engine's all-position logits at the answer
// positions (two different code paths: training forward vs KV-cache prefill),
// and its greedy continuation is the argmax chain of a fresh prefill over the
// growing sequence, stopping at the stop id. Random, perturbed weights.
#include "kernels/backend_registry.h"
#include "train/probe/niah_probe_model.h"

#include <cmath>
#include <cstdio>
#include <random>

#include "gtest/gtest.h"
#include "model/config.h"
#include "model/inference.h"

namespace longctx {
namespace {

class NiahProbeModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<Backend>> be = MakeBackend("cpu");
    ASSERT_TRUE(be.ok());
    backend_ = std::move(*be);
    ModelConfig m = SmallConfig(4);
    m.set_layer_pattern(RNOPE_SWA);
    m.set_pattern_group(2);
    m.set_sliding_window(6);
    BuildModel(m, /*seed=*/3, /*noise=*/0.3f);
    std::mt19937 rng(4);
    std::uniform_int_distribution<int32_t> id(0, 36);
    for (int i = 0; i < 23; ++i) prompt_.push_back(id(rng));
    for (int i = 0; i < 7; ++i) answer_.push_back(id(rng));
  }

  static ModelConfig SmallConfig(int layers) {
    ModelConfig m;
    m.set_vocab_size(37);
    m.set_hidden_size(32);
    m.set_num_layers(layers);
    m.set_num_heads(4);
    m.set_num_kv_heads(2);
    m.set_ffn_hidden_size(48);
    m.set_rope_theta(40.0);
    return m;
  }

  // model_ = m with InitParams(seed) plus N(0, noise) on every weight.
  void BuildModel(const ModelConfig& m, int seed, float noise) {
    absl::StatusOr<ModelDims> dims = ResolveModelConfig(m);
    ASSERT_TRUE(dims.ok()) << dims.status();
    model_ = std::make_unique<Transformer>(*dims, backend_.get(), DType::kF32);
    model_->InitParams(seed);
    std::mt19937 rng(seed + 1);
    std::normal_distribution<float> n(0.f, noise);
    for (int b = 0; b < model_->layout().num_buffers(); ++b) {
      float* p = model_->params().buffer(b).as<float>();
      for (int64_t i = 0; i < model_->layout().buffer_size(b); ++i) p[i] += n(rng);
    }
  }

  // −log softmax(row)[target] in double.
  static double Nll(const float* row, int64_t V, int32_t target) {
    double mx = row[0];
    for (int64_t v = 1; v < V; ++v) mx = std::max(mx, static_cast<double>(row[v]));
    double z = 0;
    for (int64_t v = 0; v < V; ++v) z += std::exp(row[v] - mx);
    return -(row[target] - mx - std::log(z));
  }

  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Transformer> model_;
  std::vector<int32_t> prompt_, answer_;
};

TEST_F(NiahProbeModelTest, AnswerLossesMatchTheEnginesLogits) {
  absl::StatusOr<std::unique_ptr<TransformerProbeModel>> pm = TransformerProbeModel::Create(model_.get());
  ASSERT_TRUE(pm.ok()) << pm.status();
  absl::StatusOr<std::vector<double>> losses = (*pm)->AnswerTokenLosses(prompt_, answer_);
  ASSERT_TRUE(losses.ok()) << losses.status();
  ASSERT_EQ(losses->size(), answer_.size());

  absl::StatusOr<std::unique_ptr<InferenceEngine>> engine = InferenceEngine::Create(model_.get(), {});
  ASSERT_TRUE(engine.ok());
  std::vector<int32_t> seq = prompt_;
  seq.insert(seq.end(), answer_.begin(), answer_.end());
  std::vector<float> logits;
  ASSERT_TRUE((*engine)->Prefill(seq, &logits).ok());
  const int64_t V = 37, P = static_cast<int64_t>(prompt_.size());
  double worst = 0;
  for (size_t i = 0; i < answer_.size(); ++i) {
    const double want = Nll(logits.data() + (P - 1 + static_cast<int64_t>(i)) * V, V, answer_[i]);
    EXPECT_GT(want, 0.05);  // weights are far from trivial
    worst = std::max(worst, std::fabs((*losses)[i] - want));
  }
  std::printf("worst |answer loss - engine NLL| = %.3g\n", worst);
  EXPECT_LT(worst, 2e-4);
  // Same call again: same numbers (no state leaks between trials).
  absl::StatusOr<std::vector<double>> again = (*pm)->AnswerTokenLosses(prompt_, answer_);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *losses);
}

// With STRING in the engine options the answer loss is STRING's too: it
// equals −log softmax of a STRING engine's prefill logits (the engine's STRING
// is checked against dense attention with the paper's position matrix in
// string_attention_test), differs from the plain model's, and the model's own
// STRING setting is left as it was.
TEST_F(NiahProbeModelTest, AnswerLossesUseStringWhenTheEngineDoes) {
  EngineOptions opts;
  opts.string.enabled = true;
  opts.string.s = 9;  // < prompt + answer (29 inputs): STRING moves positions
  opts.string.w = 2;
  // The RoPE layers must see keys beyond S for STRING to matter: full RoPE.
  ModelConfig m = SmallConfig(2);
  m.set_layer_pattern(ALL_ROPE_FULL);
  BuildModel(m, /*seed=*/5, /*noise=*/0.4f);
  absl::StatusOr<std::unique_ptr<TransformerProbeModel>> plain = TransformerProbeModel::Create(model_.get());
  absl::StatusOr<std::unique_ptr<TransformerProbeModel>> pm = TransformerProbeModel::Create(model_.get(), opts);
  ASSERT_TRUE(plain.ok() && pm.ok());
  absl::StatusOr<std::vector<double>> base = (*plain)->AnswerTokenLosses(prompt_, answer_);
  absl::StatusOr<std::vector<double>> losses = (*pm)->AnswerTokenLosses(prompt_, answer_);
  ASSERT_TRUE(base.ok() && losses.ok()) << losses.status();
  EXPECT_FALSE(model_->string_options().enabled);  // restored

  absl::StatusOr<std::unique_ptr<InferenceEngine>> engine = InferenceEngine::Create(model_.get(), opts);
  ASSERT_TRUE(engine.ok()) << engine.status();
  std::vector<int32_t> seq = prompt_;
  seq.insert(seq.end(), answer_.begin(), answer_.end());
  std::vector<float> logits;
  ASSERT_TRUE((*engine)->Prefill(seq, &logits).ok());
  const int64_t V = 37, P = static_cast<int64_t>(prompt_.size());
  double worst = 0, moved = 0;
  for (size_t i = 0; i < answer_.size(); ++i) {
    const double want = Nll(logits.data() + (P - 1 + static_cast<int64_t>(i)) * V, V, answer_[i]);
    worst = std::max(worst, std::fabs((*losses)[i] - want));
    moved = std::max(moved, std::fabs((*losses)[i] - (*base)[i]));
  }
  std::printf("STRING: worst |answer loss - STRING engine NLL| = %.3g; largest change vs plain = %.3g\n", worst,
              moved);
  EXPECT_LT(worst, 2e-4);
  EXPECT_GT(moved, 1e-3);
}

// The teacher-forced score against greedy decoding, by two code paths: a
// decode loop here (prefill, then one Decode per token, each step's log-softmax
// in double) and TeacherForced's single prefill of prompt + answer. Fed the
// decoded tokens as the answer, every teacher-forced argmax must be the decoded
// token and every log-prob the decode step's; and on an arbitrary answer the
// log-probs must equal −(the training forward's answer losses).
TEST_F(NiahProbeModelTest, TeacherForcedScoresAgreeWithGreedyDecoding) {
  absl::StatusOr<std::unique_ptr<TransformerProbeModel>> pm = TransformerProbeModel::Create(model_.get());
  ASSERT_TRUE(pm.ok()) << pm.status();
  absl::StatusOr<std::unique_ptr<InferenceEngine>> engine = InferenceEngine::Create(model_.get(), {});
  ASSERT_TRUE(engine.ok());
  const int64_t V = 37;
  std::vector<int32_t> decoded;
  std::vector<double> decode_logprob;
  absl::StatusOr<std::vector<float>> logits = (*engine)->Prefill(prompt_);
  for (int step = 0; step < 12 && logits.ok(); ++step) {
    const int32_t best = static_cast<int32_t>(std::max_element(logits->begin(), logits->end()) - logits->begin());
    decoded.push_back(best);
    decode_logprob.push_back(-Nll(logits->data(), V, best));
    logits = (*engine)->Decode(best);
  }
  ASSERT_TRUE(logits.ok()) << logits.status();
  absl::StatusOr<ProbeModel::TeacherForcedTokens> tf = (*pm)->TeacherForced(prompt_, decoded);
  ASSERT_TRUE(tf.ok()) << tf.status();
  ASSERT_EQ(tf->argmax.size(), decoded.size());
  ASSERT_EQ(tf->logprob.size(), decoded.size());
  double sum_tf = 0, sum_decode = 0, worst = 0;
  for (size_t i = 0; i < decoded.size(); ++i) {
    EXPECT_EQ(tf->argmax[i], decoded[i]) << "token " << i;
    worst = std::max(worst, std::fabs(tf->logprob[i] - decode_logprob[i]));
    sum_tf += tf->logprob[i];
    sum_decode += decode_logprob[i];
  }
  std::printf("greedy decode: %zu tokens, log-prob %.6f; teacher-forced %.6f; worst token gap %.3g\n", decoded.size(),
              sum_decode, sum_tf, worst);
  EXPECT_LT(sum_decode, -0.5);  // the model is not sure of its own output: the log-probs carry information
  EXPECT_NEAR(sum_tf, sum_decode, 1e-4);
  // An answer the model would not produce: log-probs = −(training forward losses).
  absl::StatusOr<ProbeModel::TeacherForcedTokens> other = (*pm)->TeacherForced(prompt_, answer_);
  absl::StatusOr<std::vector<double>> losses = (*pm)->AnswerTokenLosses(prompt_, answer_);
  ASSERT_TRUE(other.ok() && losses.ok());
  int not_argmax = 0;
  for (size_t i = 0; i < answer_.size(); ++i) {
    EXPECT_NEAR(other->logprob[i], -(*losses)[i], 2e-4) << i;
    not_argmax += other->argmax[i] != answer_[i];
  }
  EXPECT_GT(not_argmax, 0);
  // A one-token answer is the prompt's last row only; errors are statuses.
  absl::StatusOr<ProbeModel::TeacherForcedTokens> one = (*pm)->TeacherForced(prompt_, {decoded[0]});
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->argmax[0], decoded[0]);
  EXPECT_NEAR(one->logprob[0], decode_logprob[0], 1e-5);
  EXPECT_FALSE((*pm)->TeacherForced(prompt_, {}).ok());
  EXPECT_FALSE((*pm)->TeacherForced(prompt_, {99}).ok());
}

TEST_F(NiahProbeModelTest, GreedyIsTheArgmaxChainAndStopsAtTheStopId) {
  absl::StatusOr<std::unique_ptr<TransformerProbeModel>> pm = TransformerProbeModel::Create(model_.get());
  ASSERT_TRUE(pm.ok()) << pm.status();
  absl::StatusOr<std::vector<int32_t>> got = (*pm)->Greedy(prompt_, 9, /*stop_id=*/-1);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), 9u);
  // Reference: a fresh engine prefilled with the whole sequence so far, every step.
  std::vector<int32_t> seq = prompt_;
  for (int step = 0; step < 9; ++step) {
    absl::StatusOr<std::unique_ptr<InferenceEngine>> e = InferenceEngine::Create(model_.get(), {});
    ASSERT_TRUE(e.ok());
    absl::StatusOr<std::vector<float>> l = (*e)->Prefill(seq);
    ASSERT_TRUE(l.ok());
    const int32_t best = static_cast<int32_t>(std::max_element(l->begin(), l->end()) - l->begin());
    EXPECT_EQ((*got)[step], best) << "step " << step;
    seq.push_back(best);
  }
  // A stop id that the chain produces ends it there, included.
  const int32_t stop = (*got)[4];
  const size_t first = std::find(got->begin(), got->end(), stop) - got->begin();
  absl::StatusOr<std::vector<int32_t>> stopped = (*pm)->Greedy(prompt_, 9, stop);
  ASSERT_TRUE(stopped.ok());
  EXPECT_EQ(*stopped, std::vector<int32_t>(got->begin(), got->begin() + first + 1));
  // Errors come back as statuses.
  EXPECT_FALSE((*pm)->Greedy({}, 3, -1).ok());
  EXPECT_FALSE((*pm)->AnswerTokenLosses(prompt_, {}).ok());
  EXPECT_FALSE((*pm)->AnswerTokenLosses({99}, answer_).ok());
}

}  // namespace
}  // namespace longctx
