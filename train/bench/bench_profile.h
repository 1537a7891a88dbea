// Why: "where does a training step's time go?" has to be answered before any
// kernel is tuned. ProfilingBackend wraps a real backend and times every call
// (wall clock, synchronizing the device after each op so a CUDA time is the
// op's own), keyed by op name and, for GEMMs, by shape and transposes, with
// the FLOPs of each GEMM and LM-head call, so `longctx bench --profile=true`
// can print time per op per step and each GEMM's GFLOP/s. It changes no result:
// every call is forwarded unchanged.
#ifndef LONGCTX_TRAIN_BENCH_PROFILE_H_
#define LONGCTX_TRAIN_BENCH_PROFILE_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "kernels/backend.h"

namespace longctx {

class ProfilingBackend final : public Backend {
 public:
  explicit ProfilingBackend(Backend* inner) : inner_(inner) {}

  // Forgets everything timed so far (e.g. the warm-up steps).
  void Reset() { stats_.clear(); }
  // Per entry: calls, seconds and FLOPs per step (divided by `steps`), share of
  // `step_seconds`, GFLOP/s; sorted by time. Plus the untimed remainder.
  std::string Report(int steps, double step_seconds) const;
  nlohmann::json ToJson(int steps) const;

  Device device() const override { return inner_->device(); }
  std::string name() const override { return inner_->name(); }
  void* Alloc(size_t bytes) override { return Timed("Alloc", 0, [&] { return inner_->Alloc(bytes); }); }
  void Free(void* p) override { Timed("Free", 0, [&] { inner_->Free(p); }); }
  void CopyFromHost(const Tensor& dst, const void* src) override {
    Timed("CopyFromHost", 0, [&] { inner_->CopyFromHost(dst, src); });
  }
  void CopyToHost(void* dst, const Tensor& src) override { Timed("CopyToHost", 0, [&] { inner_->CopyToHost(dst, src); }); }
  void Synchronize() override { inner_->Synchronize(); }
  void Fill(const Tensor& x, double value) override { Timed("Fill", 0, [&] { inner_->Fill(x, value); }); }
  void Copy(const Tensor& dst, const Tensor& src) override { Timed("Copy", 0, [&] { inner_->Copy(dst, src); }); }
  void Axpy(const Tensor& y, double alpha, const Tensor& x) override {
    Timed("Axpy", 0, [&] { inner_->Axpy(y, alpha, x); });
  }
  void Scale(const Tensor& x, double alpha) override { Timed("Scale", 0, [&] { inner_->Scale(x, alpha); }); }
  double SumSquares(const Tensor& x) override { return Timed("SumSquares", 0, [&] { return inner_->SumSquares(x); }); }
  bool AllFinite(const Tensor& x) override { return Timed("AllFinite", 0, [&] { return inner_->AllFinite(x); }); }
  void Gemm(const GemmParams& p) override;
  void EmbeddingForward(const EmbeddingParams& p) override {
    Timed("EmbeddingForward", 0, [&] { inner_->EmbeddingForward(p); });
  }
  void EmbeddingBackward(const EmbeddingParams& p) override {
    Timed("EmbeddingBackward", 0, [&] { inner_->EmbeddingBackward(p); });
  }
  void RmsNormForward(const RmsNormParams& p) override { Timed("RmsNormForward", 0, [&] { inner_->RmsNormForward(p); }); }
  void RmsNormBackward(const RmsNormParams& p) override {
    Timed("RmsNormBackward", 0, [&] { inner_->RmsNormBackward(p); });
  }
  void Rope(const RopeParams& p) override { Timed("Rope", 0, [&] { inner_->Rope(p); }); }
  void SwiGluForward(const SwiGluParams& p) override { Timed("SwiGluForward", 0, [&] { inner_->SwiGluForward(p); }); }
  void SwiGluBackward(const SwiGluParams& p) override { Timed("SwiGluBackward", 0, [&] { inner_->SwiGluBackward(p); }); }
  void AttentionForward(const AttentionParams& p) override;
  void AttentionBackward(const AttentionParams& p) override;
  void AttentionMerge(const AttentionMergeParams& p) override {
    Timed("AttentionMerge", 0, [&] { inner_->AttentionMerge(p); });
  }
  double LmHeadLoss(const LmHeadLossParams& p) override;
  void AdamW(const AdamWParams& p) override { Timed("AdamW", 0, [&] { inner_->AdamW(p); }); }
  absl::Status SetMatmulPrecision(MatmulPrecision p) override { return inner_->SetMatmulPrecision(p); }
  MatmulPrecision matmul_precision() const override { return inner_->matmul_precision(); }
  BackendOptions options() const override { return inner_->options(); }
  absl::Status SetThreads(int threads) override { return inner_->SetThreads(threads); }
  std::string MatmulDescription() const override { return inner_->MatmulDescription(); }
  Bf16OperandCopies bf16_operand_copies() const override { return inner_->bf16_operand_copies(); }

 private:
  struct Stat {
    int64_t calls = 0;
    double seconds = 0, flops = 0;
  };
  template <class F>
  std::invoke_result_t<F> Timed(const std::string& key, double flops, F&& f) {
    const auto t0 = std::chrono::steady_clock::now();
    struct Record {  // runs after f, also for void f
      ProfilingBackend* self;
      const std::string& key;
      double flops;
      std::chrono::steady_clock::time_point t0;
      ~Record() {
        self->inner_->Synchronize();
        Stat& s = self->stats_[key];
        ++s.calls;
        s.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        s.flops += flops;
      }
    } record{this, key, flops, t0};
    return f();
  }

  Backend* inner_;
  std::map<std::string, Stat> stats_;
};

}  // namespace longctx

#endif  // LONGCTX_TRAIN_BENCH_PROFILE_H_
