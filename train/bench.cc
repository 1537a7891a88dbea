// Why: see bench.h. The timed step is the trainer's step without data loading,
// all-reduce or logging (one rank): grads().Zero(), ForwardBackward per
// micro-batch, AdamW::Step; the batch is uploaded once before timing, so the
// figure is compute only.
#include "train/bench.h"

#include <cblas.h>
#include <omp.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kernels/backend.h"
#include "model/config.h"
#include "model/plan.h"
#include "model/transformer.h"
#include "optim/adamw.h"
#include "train/config_loader.h"
#include "train/device_batch.h"
#include "train/trainer.h"

namespace longctx {
namespace {

using Clock = std::chrono::steady_clock;

int Fail(const absl::Status& st) {
  std::fprintf(stderr, "longctx: error: %s\n", std::string(st.message()).c_str());
  return 1;
}

// A batch of B rows of T random ids: one causal segment per row (so the
// attention computed is exactly CountTrainingFlops' "every row one full-length
// causal segment"), positions 0..T-1, every target kept. With or without
// data.document_mask this is a valid packing (a row start is always a segment
// start).
PackedBatch SyntheticBatch(int32_t batch, int32_t seq_len, int vocab, uint64_t seed) {
  PackedBatch b;
  b.batch_size = batch;
  b.seq_len = seq_len;
  const int64_t n = static_cast<int64_t>(batch) * seq_len;
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> id(0, vocab - 1);
  b.inputs.resize(n);
  b.targets.resize(n);
  b.positions.resize(n);
  for (int64_t i = 0; i < n; ++i) {
    b.inputs[i] = id(rng);
    b.targets[i] = id(rng);
    b.positions[i] = static_cast<int32_t>(i % seq_len);
  }
  for (int32_t r = 0; r <= batch; ++r) b.cu_seqlens.push_back(r * seq_len);
  b.max_seqlen = seq_len;
  b.num_target_tokens = n;
  return b;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 == 1 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

const char* KindName(AttentionKind k) {
  switch (k) {
    case ROPE_FULL: return "RoPE full";
    case ROPE_SWA: return "RoPE window";
    case NOPE_FULL: return "NoPE full";
    default: return "?";
  }
}

// Takes `name=N` out of overrides into *value (N >= min).
absl::Status TakeIntOverride(std::vector<std::string>& overrides, const std::string& name, int min, int* value) {
  for (auto it = overrides.begin(); it != overrides.end();) {
    if (it->rfind(name + "=", 0) != 0) {
      ++it;
      continue;
    }
    const std::string v = it->substr(name.size() + 1);
    if (!absl::SimpleAtoi(v, value) || *value < min)
      return absl::InvalidArgumentError(absl::StrCat("--", name, ": must be an integer >= ", min, " (got \"", v, "\")"));
    it = overrides.erase(it);
  }
  return absl::OkStatus();
}

}  // namespace

double MeasureSgemmPeakGflops(int n, int repeats) {
  std::vector<float> a(static_cast<size_t>(n) * n), b(a.size()), c(a.size(), 0.f);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = u(rng);
    b[i] = u(rng);
  }
  double best = 0;
  for (int r = 0; r <= repeats; ++r) {  // r = 0 warms caches and the thread pool, untimed
    const auto t0 = Clock::now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.f, a.data(), n, b.data(), n, 0.f, c.data(), n);
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (r > 0) best = std::max(best, 2.0 * n * n * static_cast<double>(n) / s / 1e9);
  }
  return best;
}

int RunBenchCommand(const std::string& config_path, const std::vector<std::string>& overrides_in) {
  std::vector<std::string> overrides = overrides_in;
  int steps = 10, warmup = 2;
  absl::Status st = TakeIntOverride(overrides, "steps", 1, &steps);
  if (st.ok()) st = TakeIntOverride(overrides, "warmup", 0, &warmup);
  if (!st.ok()) return Fail(st);
  if (config_path.empty()) return Fail(absl::InvalidArgumentError("--config is required"));
  absl::StatusOr<TrainConfig> config = LoadTrainConfig(config_path, overrides);
  if (!config.ok()) return Fail(config.status());
  absl::StatusOr<ModelDims> dims = ResolveModelConfig(config->model());
  if (!dims.ok()) return Fail(dims.status());
  SetComputeThreads(config->threads());
  const int threads = omp_get_max_threads();
  const int32_t B = config->data().batch_size(), T = config->data().seq_len();
  const int accum = config->grad_accum();

  // (b) The model, as the trainer builds it.
  absl::StatusOr<std::unique_ptr<Backend>> backend = MakeBackend(config->backend());
  if (!backend.ok()) return Fail(absl::InvalidArgumentError(absl::StrCat("backend: ", backend.status().message())));
  Transformer model(*dims, backend->get(), DType::kF32);
  model.InitParams(config->seed());
  AdamWSettings s;
  s.beta1 = config->optim().beta1();
  s.beta2 = config->optim().beta2();
  s.eps = config->optim().eps();
  s.weight_decay = config->optim().weight_decay();
  s.grad_clip = config->optim().grad_clip();
  s.decay_norms = config->optim().decay_norms();
  AdamW optimizer(&model.layout(), backend->get(), DType::kF32, s);
  std::vector<PackedBatch> micro;
  for (int i = 0; i < accum; ++i) micro.push_back(SyntheticBatch(B, T, dims->vocab, config->seed() + 1 + i));
  std::vector<std::unique_ptr<DeviceBatch>> device;
  std::vector<BatchTensors> uploaded;
  for (const PackedBatch& b : micro) {
    device.push_back(std::make_unique<DeviceBatch>(backend->get()));
    uploaded.push_back(device.back()->Upload(b));
  }
  const int64_t tokens_per_step = static_cast<int64_t>(B) * T * accum;
  const double lr = config->optim().lr();
  double last_loss = 0;
  auto step = [&] {
    model.grads().Zero();
    double loss_sum = 0;
    for (const BatchTensors& t : uploaded)
      loss_sum += model.ForwardBackward(t, 1.0 / static_cast<double>(tokens_per_step), /*backward=*/true);
    optimizer.Step(model.params(), model.grads(), lr);
    (*backend)->Synchronize();
    last_loss = loss_sum / static_cast<double>(tokens_per_step);
  };
  for (int i = 0; i < warmup; ++i) step();
  std::vector<double> seconds;
  for (int i = 0; i < steps; ++i) {
    const auto t0 = Clock::now();
    step();
    seconds.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }

  // Peak RSS of the model's steps, read before the sgemm buffers (3 × 16 MiB)
  // exist, so they do not count. Linux reports ru_maxrss in kB.
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  const double peak_rss_mb = static_cast<double>(ru.ru_maxrss) / 1024.0;

  // (a) The machine: sgemm peak with the configured threads (CPU BLAS, also
  // under the cuda backend, where it is not the device's peak). Measured after
  // the steps so its buffers stay out of peak_rss_mb.
  constexpr int kPeakN = 2048, kPeakRepeats = 15;  // ~2 s on 2 cores; best-of-many rides out a shared VM's noise
  const double peak = MeasureSgemmPeakGflops(kPeakN, kPeakRepeats);

  // (c) Report.
  const ParamCounts pc = CountParams(*dims);
  const FlopCounts fc = CountTrainingFlops(*dims, T);
  const double median = Median(seconds);
  const double tokens_per_s = static_cast<double>(tokens_per_step) / median;
  const double gflops = fc.total_per_token * tokens_per_s / 1e9;
  std::printf("bench %s (%s, backend %s, fp32, threads %d)\n", dims->name.c_str(), config_path.c_str(),
              (*backend)->name().c_str(), threads);
  std::printf("  %-34s %s params (%s in matmuls)\n", "model", absl::StrFormat("%d", pc.total).c_str(),
              absl::StrFormat("%d", pc.matmul).c_str());
  std::printf("  %-34s %d x %d x grad_accum %d = %lld tokens\n", "step", B, T, accum,
              static_cast<long long>(tokens_per_step));
  for (int l = 0; l < dims->layers; ++l)
    std::printf("  layer %-28d %-12s mean keys/query %.1f\n", l, KindName(dims->kinds[l]), fc.mean_keys[l]);
  std::printf("  %-34s %.4g matmul + %.4g attention = %.4g (12·L·T·d estimate: %.4g)\n", "FLOPs/token",
              fc.matmul_per_token, fc.attention_per_token, fc.total_per_token, fc.standard_total_per_token);
  std::printf("  note: attention FLOPs are as computed: causal, and sliding-window layers count only the\n"
              "        keys inside the window (not the full T)\n");
  std::printf("  %-34s %.1f GFLOP/s (cblas_sgemm %d^3, best of %d)\n", "sgemm peak", peak, kPeakN, kPeakRepeats);
  std::printf("  %-34s median %.4f s, min %.4f s, max %.4f s (%d timed, %d warmup)\n", "step time", median,
              *std::min_element(seconds.begin(), seconds.end()), *std::max_element(seconds.begin(), seconds.end()),
              steps, warmup);
  std::printf("  %-34s %.1f tokens/s, %.2f GFLOP/s = %.1f%% of sgemm peak\n", "achieved", tokens_per_s, gflops,
              peak > 0 ? 100 * gflops / peak : 0.0);
  std::printf("  %-34s %.1f MiB\n", "peak RSS (model steps)", peak_rss_mb);
  if (!std::isfinite(last_loss)) std::printf("  warning: last loss is %f\n", last_loss);

  nlohmann::ordered_json j;
  j["config"] = dims->name;
  j["config_path"] = config_path;
  j["backend"] = (*backend)->name();
  j["dtype"] = "f32";
  j["threads"] = threads;
  j["params"] = pc.total;
  j["matmul_params"] = pc.matmul;
  j["batch_size"] = B;
  j["seq_len"] = T;
  j["grad_accum"] = accum;
  j["tokens_per_step"] = tokens_per_step;
  j["steps"] = steps;
  j["warmup"] = warmup;
  j["step_seconds_median"] = median;
  j["step_seconds_min"] = *std::min_element(seconds.begin(), seconds.end());
  j["step_seconds_max"] = *std::max_element(seconds.begin(), seconds.end());
  j["tokens_per_s"] = tokens_per_s;
  j["flops_per_token"] = fc.total_per_token;
  j["matmul_flops_per_token"] = fc.matmul_per_token;
  j["attention_flops_per_token"] = fc.attention_per_token;
  j["attention_flops"] = "as computed (causal; sliding-window layers count only keys inside the window)";
  j["gflops"] = gflops;
  j["peak_gflops"] = peak;
  j["peak_source"] = absl::StrFormat("cblas_sgemm %d^3 best of %d", kPeakN, kPeakRepeats);
  j["fraction_of_peak"] = peak > 0 ? gflops / peak : 0.0;
  j["peak_rss_mb"] = peak_rss_mb;
  j["last_loss"] = last_loss;
  std::printf("%s\n", j.dump().c_str());
  return 0;
}

}  // namespace longctx
