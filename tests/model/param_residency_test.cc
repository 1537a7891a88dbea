// Why: FSDP relies on the Transformer announcing every use of a parameter
// buffer. These tests pin the call order the seam documents (forward-only and
// training passes, buffer 0 at both ends) and show that a hook which really
// frees every buffer between uses — parameters kept in host copies, gradients
// accumulated on the host — gives the same loss and gradients bit for bit as
// the model with no hook, so ParamStore::Release/Allocate and the hook placement
// leave no use uncovered.
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/backend.h"
#include "kernels/cpu/cpu_backend.h"
#include "model/config.h"
#include "model/transformer.h"
#include "tests/support/small_model.h"

namespace longctx {
namespace {

ModelDims Dims(bool tied) {
  ModelConfig m;
  m.set_vocab_size(29);
  m.set_hidden_size(16);
  m.set_num_layers(3);
  m.set_num_heads(4);
  m.set_num_kv_heads(2);
  m.set_ffn_hidden_size(24);
  m.set_qk_norm(true);
  m.set_tie_embeddings(tied);
  m.set_layer_pattern(RNOPE_SWA);
  m.set_sliding_window(4);
  absl::StatusOr<ModelDims> d = ResolveModelConfig(m);
  EXPECT_TRUE(d.ok()) << d.status();
  return *d;
}

// Random ids (not the shared builder's arithmetic ones), two documents.
testing::PackedTestBatch MakeBatch(int vocab) {
  testing::PackedTestBatch h;
  std::mt19937 rng(5);
  h.cu = {0, 7, 16};
  for (int s = 0; s + 1 < 3; ++s)
    for (int t = h.cu[s]; t < h.cu[s + 1]; ++t) {
      h.ids.push_back(static_cast<int32_t>(rng() % vocab));
      h.targets.push_back(t % 5 == 0 ? -1 : static_cast<int32_t>(rng() % vocab));
      h.positions.push_back(t - h.cu[s]);
    }
  return h;
}

class Recorder : public ParamResidency {
 public:
  void Acquire(int b, Use u, bool backward) override { Add("A", b, u, backward); }
  void Release(int b, Use u, bool backward) override { Add("R", b, u, backward); }
  std::vector<std::string> calls;

 private:
  void Add(const char* what, int b, Use u, bool backward) {
    calls.push_back(absl::StrCat(what, b, u == Use::kForward ? "F" : "B", backward ? "+" : ""));
  }
};

TEST(ParamResidencyTest, CallOrderOfTrainingAndForwardOnlyPasses) {
  const ModelDims d = Dims(false);
  std::unique_ptr<Backend> be = MakeCpuBackend();
  Transformer model(d, be.get(), DType::kF32);
  model.InitParams(3);
  testing::PackedTestBatch hb = MakeBatch(d.vocab);
  Recorder rec;
  model.set_residency(&rec);
  model.grads().Zero();
  model.ForwardBackward(hb.Tensors(), 1.0, /*backward=*/true);
  const std::vector<std::string> train = {"A0F+", "A1F+", "R1F+", "A2F+", "R2F+", "A3F+", "R3F+", "R0F+",
                                          "A0B+", "A3B+", "R3B+", "A2B+", "R2B+", "A1B+", "R1B+", "R0B+"};
  EXPECT_EQ(rec.calls, train);
  rec.calls.clear();
  model.ForwardBackward(hb.Tensors(), 1.0, /*backward=*/false);
  const std::vector<std::string> fwd = {"A0F", "A1F", "R1F", "A2F", "R2F", "A3F", "R3F", "R0F"};
  EXPECT_EQ(rec.calls, fwd);
  rec.calls.clear();
  std::vector<float> logits(hb.ids.size() * d.vocab);
  model.ForwardLogits(hb.Tensors(), Tensor(logits.data(), DType::kF32, {hb.tokens(), d.vocab}));
  EXPECT_EQ(rec.calls, fwd);
  model.set_residency(nullptr);
  rec.calls.clear();
  model.ForwardBackward(hb.Tensors(), 1.0, true);
  EXPECT_TRUE(rec.calls.empty());
}

// Frees every parameter and gradient buffer whenever it is not in use; keeps
// the parameters and the accumulated gradients in host vectors meanwhile.
class Offloader : public ParamResidency {
 public:
  explicit Offloader(Transformer* m) : m_(m) {
    const ParamLayout& l = m->layout();
    for (int b = 0; b < l.num_buffers(); ++b) {
      host_p_.emplace_back(l.buffer_size(b));
      host_g_.emplace_back(l.buffer_size(b), 0.0f);
      m->params().CopyToHost(b, host_p_[b].data());
      m->params().Release(b);
      m->grads().Release(b);
    }
  }
  void Acquire(int b, Use u, bool backward) override {
    if (!m_->params().allocated(b)) {
      m_->params().Allocate(b);
      m_->params().CopyFromHost(b, host_p_[b].data());
    }
    if ((u == Use::kBackward || (b == 0 && backward)) && !m_->grads().allocated(b)) {
      m_->grads().Allocate(b);
      m_->grads().CopyFromHost(b, host_g_[b].data());
    }
  }
  void Release(int b, Use u, bool backward) override {
    if (u == Use::kForward && b == 0 && backward) return;  // kept across the F/B turn
    if (m_->grads().allocated(b) && u == Use::kBackward) {
      m_->grads().CopyToHost(b, host_g_[b].data());
      m_->grads().Release(b);
    }
    m_->params().Release(b);
  }
  std::vector<std::vector<float>> host_p_, host_g_;

 private:
  Transformer* m_;
};

TEST(ParamResidencyTest, FreeingEveryBufferBetweenUsesChangesNoBit) {
  for (bool tied : {false, true}) {
    const ModelDims d = Dims(tied);
    std::unique_ptr<Backend> be = MakeCpuBackend();
    Transformer ref(d, be.get(), DType::kF32), off(d, be.get(), DType::kF32);
    ref.InitParams(11);
    off.InitParams(11);
    testing::PackedTestBatch hb = MakeBatch(d.vocab);
    ref.grads().Zero();
    off.grads().Zero();
    Offloader hook(&off);
    off.set_residency(&hook);
    for (int b = 0; b < d.layers + 1; ++b) {
      EXPECT_FALSE(off.params().allocated(b));
      EXPECT_FALSE(off.grads().allocated(b));
    }
    for (int micro = 0; micro < 2; ++micro) {  // gradients accumulate across micro-batches
      const double lr = ref.ForwardBackward(hb.Tensors(), 0.25, true);
      const double lo = off.ForwardBackward(hb.Tensors(), 0.25, true);
      EXPECT_EQ(lr, lo) << "tied " << tied;
    }
    EXPECT_EQ(ref.ForwardBackward(hb.Tensors(), 1.0, false), off.ForwardBackward(hb.Tensors(), 1.0, false));
    EXPECT_EQ(off.params().allocated_bytes(), 0);
    EXPECT_EQ(off.grads().allocated_bytes(), 0);
    for (int b = 0; b < d.layers + 1; ++b) {
      std::vector<float> g(d.layers >= 0 ? ref.layout().buffer_size(b) : 0);
      ref.grads().CopyToHost(b, g.data());
      EXPECT_EQ(0, std::memcmp(g.data(), hook.host_g_[b].data(), g.size() * sizeof(float)))
          << "tied " << tied << " buffer " << b;
    }
    off.set_residency(nullptr);
  }
}

}  // namespace
}  // namespace longctx
