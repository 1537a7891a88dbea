// Why: see bench.h. The timed step is the trainer's step without data loading,
// all-reduce or logging (one rank): grads().Zero(), ForwardBackward per
// micro-batch, AdamW::Step; the batch is uploaded once before timing, so the
// figure is compute only. The matmul precision is the config's (`--precision=
// bf16`), set on the backend exactly as the trainer sets it.
#include "train/bench/bench.h"

#include <cblas.h>
#include <omp.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <random>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kernels/backend.h"
#include "kernels/backend_registry.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/gemm_bf16.h"
#include "kernels/cpu/gemm_library.h"
#include "kernels/cpu/line_vector.h"
#include "base/log.h"
#include "kernels/math/bf16.h"
#include "base/status_macros.h"
#include "model/config.h"
#include "model/plan.h"
#include "model/transformer.h"
#include "optim/adamw.h"
#include "train/bench/bench_profile.h"
#include "base/command_status.h"
#include "train/config_loader.h"
#include "train/device_batch.h"
#include "train/report/progress.h"
#include "train/setup/backend_for_config.h"

namespace longctx {
namespace {

using Clock = std::chrono::steady_clock;

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

}  // namespace

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

absl::Status TakeStringOverride(std::vector<std::string>& overrides, const std::string& name, std::string* value) {
  for (auto it = overrides.begin(); it != overrides.end();) {
    if (it->rfind(name + "=", 0) != 0) {
      ++it;
      continue;
    }
    *value = it->substr(name.size() + 1);
    it = overrides.erase(it);
  }
  return absl::OkStatus();
}

absl::Status TakeBoolOverride(std::vector<std::string>& overrides, const std::string& name, bool* value) {
  std::string text = *value ? "true" : "false";
  LONGCTX_RETURN_IF_ERROR(TakeStringOverride(overrides, name, &text));
  if (text != "true" && text != "false" && text != "1" && text != "0")
    return absl::InvalidArgumentError(absl::StrCat("--", name, ": must be true or false (got \"", text, "\")"));
  *value = text == "true" || text == "1";
  return absl::OkStatus();
}

absl::Status TakeDoubleOverride(std::vector<std::string>& overrides, const std::string& name, double min,
                                double* value) {
  const std::string absent = "\x01";  // no flag gives this: *value stays as it was
  std::string text = absent;
  LONGCTX_RETURN_IF_ERROR(TakeStringOverride(overrides, name, &text));
  if (text == absent) return absl::OkStatus();
  double v = 0;
  if (!absl::SimpleAtod(text, &v) || !std::isfinite(v) || v < min)
    return absl::InvalidArgumentError(absl::StrCat("--", name, ": must be a number >= ", min, " (got \"", text, "\")"));
  *value = v;
  return absl::OkStatus();
}

std::string LoadAverage() {
  std::ifstream f("/proc/loadavg");
  std::string one, five, fifteen;
  f >> one >> five >> fifteen;
  return absl::StrCat(one, " ", five, " ", fifteen);
}

double PeakRssMb() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_maxrss) / 1024.0;  // Linux reports kB
}

namespace {

// The GEMM peak loop of both precisions: best-of-`repeats` GFLOP/s of gemm(p)
// on n×n operands of `dtype` (elements T: float for kF32, bf16 bits for
// kBF16, made by to_element from uniform [-1, 1) values, seed 1) into an fp32
// C, 2·n³ FLOPs a call. The call r = 0 warms caches and the thread pool (and
// builds oneDNN's primitive), untimed.
// The operands start on cache lines (cpu::LineVector): with std::vector's
// 16-byte alignment the peak of a run moved with where the heap put them
// (bf16 1,412-1,496 GFLOP/s over six invocations, aligned 1,475-1,661).
template <typename T, typename Gemm>
double MeasureGemmPeakGflops(int n, int repeats, DType dtype, T (*to_element)(float), Gemm gemm) {
  cpu::LineVector<T> a(static_cast<size_t>(n) * n), b(a.size());
  cpu::LineVector<float> c(a.size(), 0.f);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = to_element(u(rng));
    b[i] = to_element(u(rng));
  }
  double best = 0;
  for (int r = 0; r <= repeats; ++r) {
    const auto t0 = Clock::now();
    GemmParams p;
    p.a = Tensor(a.data(), dtype, {n, n});
    p.b = Tensor(b.data(), dtype, {n, n});
    p.c = Tensor(c.data(), DType::kF32, {n, n});
    gemm(p);
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (r > 0) best = std::max(best, 2.0 * n * n * static_cast<double>(n) / s / 1e9);
  }
  return best;
}

float F32Element(float x) { return x; }
uint16_t Bf16Element(float x) { return math::F32ToBf16Bits(x); }

}  // namespace

double MeasureSgemmPeakGflops(int n, int repeats, cpu::SgemmLibrary library) {
  return MeasureGemmPeakGflops(n, repeats, DType::kF32, &F32Element,
                               [library](const GemmParams& p) { cpu::Sgemm(p, library); });
}

double MeasureBf16PeakGflops(int n, int repeats) {
  if (!BenchHasBf16Peak()) return 0.0;
  return MeasureGemmPeakGflops(n, repeats, DType::kBF16, &Bf16Element,
                               [](const GemmParams& p) { cpu::OneDnnGemmBf16(p); });
}

bool BenchHasBf16Peak() { return cpu::CpuHasBf16DotProducts() && cpu::OneDnnBf16Available(); }

namespace {

// OpenBLAS chooses its kernels from the CPU model as it loads, and one
// older than the CPU falls back to generic ones: Debian 12's OpenBLAS 0.3.21
// ran its Prescott (SSE3) kernels on an Intel Xeon of CPUID model 207, sgemm
// a sixth of the GFLOP/s it gets with OPENBLAS_CORETYPE=SkylakeX
// (docs/BENCHMARKS.md). The environment variable must be set before
// the process starts (OpenBLAS reads it once, as it loads), so the bench
// says so beside the sgemm peaks rather than choosing for the user.
std::string OpenBlasKernelNote() {
#if defined(__x86_64__)
  static const char* const kBelowAvx2[] = {"Prescott", "Core2",   "Penryn", "Dunnington", "Nehalem",   "Atom",
                                           "Nano",     "Katmai",  "Coppermine", "Northwood", "Banias", "Athlon",
                                           "Opteron",  "Opteron_SSE3", "Barcelona", "Bobcat", "Sandybridge"};
  const std::string core = cpu::OpenBlasCoreName();
  if (!__builtin_cpu_supports("avx2")) return "";
  for (const char* name : kBelowAvx2) {
    if (core != name) continue;
    const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
                        __builtin_cpu_supports("avx512cd");
    return absl::StrFormat(
        "; OpenBLAS runs its %s kernels on this %s CPU (a model it does not know): start longctx with "
        "OPENBLAS_CORETYPE=%s for its %s kernels",
        core, avx512 ? "AVX-512" : "AVX2", avx512 ? "SkylakeX" : "Haswell", avx512 ? "AVX-512" : "AVX2");
  }
#endif
  return "";
}

}  // namespace

GemmPeaks MeasureGemmPeaks() {
  constexpr int kPeakN = 2048, kPeakRepeats = 15;  // ~2 s on 2 cores; best-of-many rides out a shared VM's noise
  GemmPeaks p;
  p.fp32_onednn = MeasureSgemmPeakGflops(kPeakN, kPeakRepeats, cpu::SgemmLibrary::kOneDnn);
  p.fp32_openblas = MeasureSgemmPeakGflops(kPeakN, kPeakRepeats, cpu::SgemmLibrary::kOpenBlas);
  p.fp32 = std::max(p.fp32_onednn, p.fp32_openblas);
  p.fp32_source = absl::StrFormat("sgemm %d^3 best of %d: oneDNN %.1f, OpenBLAS (%s kernels) %.1f GFLOP/s", kPeakN,
                                  kPeakRepeats, p.fp32_onednn, cpu::OpenBlasCoreName(), p.fp32_openblas) +
                  OpenBlasKernelNote();
  if (BenchHasBf16Peak()) {
    p.bf16 = MeasureBf16PeakGflops(kPeakN, kPeakRepeats);
    p.bf16_source = absl::StrFormat("oneDNN bf16 matmul %d^3 (fp32 accumulation) best of %d: %.1f GFLOP/s; kernels %s",
                                    kPeakN, kPeakRepeats, p.bf16, cpu::OneDnnImplsUsed());
  } else {
    p.bf16_source = absl::StrCat("none: this CPU has no bf16 dot products (oneDNN ISA ", cpu::OneDnnCpuIsaName(),
                                 "); bf16 fractions are against the sgemm peak");
  }
  return p;
}

GemmPeaks MeasureDeviceGemmPeaks(Backend& be) {
  constexpr int kN = 8192, kRepeats = 10;
  const int64_t n = kN;
  const size_t elems = static_cast<size_t>(n) * n;
  std::vector<float> host(elems);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (float& x : host) x = u(rng);
  std::vector<uint16_t> host_bf16(elems);
  for (size_t i = 0; i < elems; ++i) host_bf16[i] = math::F32ToBf16Bits(host[i]);
  void* a = be.Alloc(elems * sizeof(float));
  void* b = be.Alloc(elems * sizeof(float));
  void* c = be.Alloc(elems * sizeof(float));
  const MatmulPrecision saved = be.matmul_precision();
  auto best_of = [&](DType dtype) {
    GemmParams p;
    p.a = Tensor(a, dtype, {n, n}, be.device());
    p.b = Tensor(b, dtype, {n, n}, be.device());
    p.c = Tensor(c, DType::kF32, {n, n}, be.device());
    be.CopyFromHost(p.a, dtype == DType::kF32 ? static_cast<const void*>(host.data()) : host_bf16.data());
    be.CopyFromHost(p.b, dtype == DType::kF32 ? static_cast<const void*>(host.data()) : host_bf16.data());
    double best = 0;
    for (int r = 0; r <= kRepeats; ++r) {  // r = 0 warms up (cuBLAS heuristics, clocks), untimed
      be.Synchronize();
      const auto t0 = Clock::now();
      be.Gemm(p);
      be.Synchronize();
      const double s = std::chrono::duration<double>(Clock::now() - t0).count();
      if (r > 0) best = std::max(best, 2.0 * n * n * static_cast<double>(n) / s / 1e9);
    }
    return best;
  };
  GemmPeaks p;
  if (absl::Status st = be.SetMatmulPrecision(MatmulPrecision::kF32); !st.ok()) LOG(FATAL) << st;
  p.fp32 = best_of(DType::kF32);  // fp32_onednn, fp32_openblas stay 0: no CPU library ran
  p.fp32_source = absl::StrFormat("%s Gemm, fp32 operands, %d^3 best of %d on the device: %.1f GFLOP/s", be.name(),
                                  kN, kRepeats, p.fp32);
  p.bf16 = best_of(DType::kBF16);
  p.bf16_source = absl::StrFormat("%s Gemm, bf16 operands (fp32 accumulation), %d^3 best of %d on the device: %.1f "
                                  "GFLOP/s",
                                  be.name(), kN, kRepeats, p.bf16);
  if (absl::Status st = be.SetMatmulPrecision(saved); !st.ok()) LOG(FATAL) << st;
  be.Free(a);
  be.Free(b);
  be.Free(c);
  return p;
}

GemmPeaks MeasureBackendGemmPeaks(Backend& be) {
  return be.device() == Device::kCpu ? MeasureGemmPeaks() : MeasureDeviceGemmPeaks(be);
}

double MeasurePeakOfPrecision(Backend& be, bool bf16_precision) {
  constexpr int kPeakN = 2048, kPeakRepeats = 5;
  if (be.device() != Device::kCpu) return 0.0;
  if (bf16_precision && BenchHasBf16Peak()) return MeasureBf16PeakGflops(kPeakN, kPeakRepeats);
  return std::max(MeasureSgemmPeakGflops(kPeakN, kPeakRepeats, cpu::SgemmLibrary::kOneDnn),
                  MeasureSgemmPeakGflops(kPeakN, kPeakRepeats, cpu::SgemmLibrary::kOpenBlas));
}

namespace {

struct BenchFlags {
  int steps = 10, warmup = 2;
  int peer_steps = 0, peer_warmup = -1;  // 0 / -1 = same as steps / warmup
  std::string peer, python = "/usr/bin/python3", peer_script, bf16_gemm = "auto", sgemm = "auto";
  bool profile = false;
  BackendSettings backend;  // --sgemm and --bf16_gemm (threads come from the config)
};

absl::Status TakeBenchFlags(std::vector<std::string>& overrides, BenchFlags* f) {
  LONGCTX_RETURN_IF_ERROR(TakeIntOverride(overrides, "steps", 1, &f->steps));
  LONGCTX_RETURN_IF_ERROR(TakeIntOverride(overrides, "warmup", 0, &f->warmup));
  LONGCTX_RETURN_IF_ERROR(TakeIntOverride(overrides, "peer_steps", 1, &f->peer_steps));
  LONGCTX_RETURN_IF_ERROR(TakeIntOverride(overrides, "peer_warmup", 0, &f->peer_warmup));
  LONGCTX_RETURN_IF_ERROR(TakeStringOverride(overrides, "peer", &f->peer));
  LONGCTX_RETURN_IF_ERROR(TakeStringOverride(overrides, "python", &f->python));
  LONGCTX_RETURN_IF_ERROR(TakeStringOverride(overrides, "peer_script", &f->peer_script));
  LONGCTX_RETURN_IF_ERROR(TakeStringOverride(overrides, "bf16_gemm", &f->bf16_gemm));
  LONGCTX_RETURN_IF_ERROR(TakeStringOverride(overrides, "sgemm", &f->sgemm));
  if (absl::StatusOr<GemmLibrary> g = ParseGemmLibrary(f->sgemm); g.ok()) {
    f->backend.cpu.gemm = *g;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--sgemm: must be auto, onednn or openblas (got \"", f->sgemm, "\")"));
  }
  f->profile = false;
  LONGCTX_RETURN_IF_ERROR(TakeBoolOverride(overrides, "profile", &f->profile));
  if (!f->peer.empty() && f->peer != "pytorch")
    return absl::InvalidArgumentError(absl::StrCat("--peer: only \"pytorch\" is known (got \"", f->peer, "\")"));
  if (f->peer_steps == 0) f->peer_steps = f->steps;
  if (f->peer_warmup < 0) f->peer_warmup = f->warmup;
  if (f->bf16_gemm == "auto" || f->bf16_gemm == "sgemm" || f->bf16_gemm == "onednn") {
    f->backend.cpu.bf16_gemm = *ParseBf16GemmLibrary(f->bf16_gemm);
    if (f->bf16_gemm != "onednn") return absl::OkStatus();
    absl::Status st = cpu::CheckBf16GemmPath(cpu::Bf16GemmPath::kOneDnn);
    if (!st.ok()) return absl::Status(st.code(), absl::StrCat("--bf16_gemm=onednn: ", st.message()));
    return st;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--bf16_gemm: must be auto, sgemm or onednn (got \"", f->bf16_gemm, "\")"));
}

}  // namespace

int RunBenchCommand(const std::string& config_path, const std::vector<std::string>& overrides_in) {
  std::vector<std::string> overrides = overrides_in;
  BenchFlags flags;
  if (absl::Status st = TakeBenchFlags(overrides, &flags); !st.ok()) return FailCommand(st);
  const int steps = flags.steps, warmup = flags.warmup;
  if (config_path.empty()) return FailCommand(absl::InvalidArgumentError("--config is required"));
  absl::StatusOr<TrainConfig> config = LoadTrainConfig(config_path, overrides);
  if (!config.ok()) return FailCommand(config.status());
  absl::StatusOr<ModelDims> dims = ResolveModelConfig(config->model());
  if (!dims.ok()) return FailCommand(dims.status());
  const std::string load_at_start = LoadAverage();
  const PeerOptions peer_options{flags.python, flags.peer_script};
  if (!flags.peer.empty())  // before minutes of timing, not after
    if (absl::Status st = CheckTorchPeer(peer_options); !st.ok()) return FailCommand(st);
  const int32_t B = config->data().batch_size(), T = config->data().seq_len();
  const int accum = config->grad_accum();
  const bool bf16 = config->precision() == BF16;
  const char* precision_name = bf16 ? "bf16" : "fp32";

  // (b) The model, as the trainer builds it.
  // Threads from the config, libraries from --sgemm / --bf16_gemm.
  absl::StatusOr<std::unique_ptr<Backend>> backend = MakeBackendForConfig(*config, flags.backend);
  if (!backend.ok()) return FailCommand(backend.status());
  const int threads = omp_get_max_threads();
  // --profile=true: every op of the timed steps through a timing wrapper.
  ProfilingBackend profiler(backend->get());
  Backend* be = flags.profile ? &profiler : backend->get();
  Transformer model(*dims, be, DType::kF32);
  model.InitParams(config->seed());
  // model.activation_dtype as the trainer applies it (validated by LoadTrainConfig).
  if (ResolveBf16Activations(config->model(), bf16).value_or(false)) model.set_activation_dtype(DType::kBF16);
  AdamWSettings s;
  s.beta1 = config->optim().beta1();
  s.beta2 = config->optim().beta2();
  s.eps = config->optim().eps();
  s.weight_decay = config->optim().weight_decay();
  s.grad_clip = config->optim().grad_clip();
  s.decay_norms = config->optim().decay_norms();
  AdamW optimizer(&model.layout(), be, DType::kF32, s);
  std::vector<PackedBatch> micro;
  for (int i = 0; i < accum; ++i) micro.push_back(SyntheticBatch(B, T, dims->vocab, config->seed() + 1 + i));
  std::vector<std::unique_ptr<DeviceBatch>> device;
  std::vector<BatchTensors> uploaded;
  for (const PackedBatch& b : micro) {
    device.push_back(std::make_unique<DeviceBatch>(be));
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
  // Progress on stderr (stdout carries the table and the JSON): one line per
  // step in logs, a live line on a terminal; then one for the GEMM peaks.
  Progress progress("bench steps", warmup + steps, "steps", stderr);
  for (int i = 0; i < warmup; ++i) {
    step();
    progress.Event(i + 1, absl::StrFormat("warm-up step %d/%d", i + 1, warmup));
  }
  profiler.Reset();
  std::vector<double> seconds;
  for (int i = 0; i < steps; ++i) {
    const auto t0 = Clock::now();
    step();
    seconds.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    progress.Event(warmup + i + 1, absl::StrFormat("timed step %d/%d: %.3f s", i + 1, steps, seconds.back()));
  }
  progress.Clear();

  // Peak RSS of the model's steps, read before the sgemm buffers (3 × 16 MiB)
  // exist, so they do not count.
  const double peak_rss_mb = PeakRssMb();

  // (a) The machine: the GEMM peaks of the device the steps ran on. CPU, with
  // the configured threads: fp32 = the better sgemm of the two libraries
  // longctx can use, bf16 = oneDNN's bf16 matmul where the CPU has bf16 dot
  // products. cuda: the backend's cuBLAS Gemm on the GPU in each precision
  // (MeasureDeviceGemmPeaks). The step is a fraction of the one of its own
  // precision. Measured after the steps so their buffers stay out of
  // peak_rss_mb.
  std::fprintf(stderr, "bench: measuring the GEMM peaks (%s) ...\n",
               (*backend)->device() != Device::kCpu ? "fp32 and bf16 on the device, 8192^3 best of 10 each"
               : BenchHasBf16Peak()                 ? "fp32 and bf16, 2048^3 best of 15 each"
                                                    : "fp32, 2048^3 best of 15");
  const GemmPeaks peaks = MeasureBackendGemmPeaks(**backend);
  const double peak_onednn = peaks.fp32_onednn, peak_openblas = peaks.fp32_openblas;
  const double peak = peaks.Of(bf16);
  const std::string peak_source = bf16 && peaks.bf16 > 0 ? peaks.bf16_source : peaks.fp32_source;
  const char* peak_name = bf16 && peaks.bf16 > 0 ? "bf16 GEMM peak" : "sgemm peak";

  // (c) Report. (The bf16 path description names oneDNN's kernels once they ran.)
  const std::string matmul_path = (*backend)->MatmulDescription();
  const ParamCounts pc = CountParams(*dims);
  const FlopCounts fc = CountTrainingFlops(*dims, T);
  const double median = Median(seconds);
  const double tokens_per_s = static_cast<double>(tokens_per_step) / median;
  const double gflops = fc.total_per_token * tokens_per_s / 1e9;
  std::printf("bench %s (%s, backend %s, %s, threads %d)\n", dims->name.c_str(), config_path.c_str(),
              (*backend)->name().c_str(), precision_name, threads);
  std::printf("  %-34s %s\n", "matrix products", matmul_path.c_str());
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
  std::printf("  %-34s %.1f GFLOP/s (%s)\n", "fp32 GEMM peak", peaks.fp32, peaks.fp32_source.c_str());
  std::printf("  %-34s %s\n", "bf16 GEMM peak",
              peaks.bf16 > 0 ? absl::StrFormat("%.1f GFLOP/s (%s)", peaks.bf16, peaks.bf16_source).c_str()
                             : peaks.bf16_source.c_str());
  std::printf("  %-34s median %.4f s, min %.4f s, max %.4f s (%d timed, %d warmup)\n", "step time", median,
              *std::min_element(seconds.begin(), seconds.end()), *std::max_element(seconds.begin(), seconds.end()),
              steps, warmup);
  std::printf("  %-34s %.1f tokens/s, %.2f GFLOP/s = %.1f%% of the %s (%s step)\n", "achieved", tokens_per_s, gflops,
              peak > 0 ? 100 * gflops / peak : 0.0, peak_name, precision_name);
  std::printf("  %-34s %.1f MiB\n", "peak RSS (model steps)", peak_rss_mb);
  if (!std::isfinite(last_loss)) std::printf("  warning: last loss is %f\n", last_loss);
  double mean_step = 0;
  for (double x : seconds) mean_step += x / static_cast<double>(seconds.size());
  if (flags.profile) std::printf("%s", profiler.Report(steps, mean_step).c_str());

  nlohmann::ordered_json j;
  j["system"] = "longctx";
  j["config"] = dims->name;
  j["config_path"] = config_path;
  j["backend"] = (*backend)->name();
  j["dtype"] = "f32";
  j["precision"] = precision_name;
  j["matmul_path"] = matmul_path;
  j["activation_dtype"] = model.activation_dtype() == DType::kBF16 ? "bf16" : "fp32";
  j["activation_bytes"] = model.activation_bytes();
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
  j["peak_source"] = peak_source;
  j["peak_gflops_onednn"] = peak_onednn;
  j["peak_gflops_openblas"] = peak_openblas;
  j["peak_kind"] = peak_name;
  j["peak_gflops_fp32"] = peaks.fp32;
  j["peak_gflops_bf16"] = peaks.bf16;  // 0: no bf16 dot products on this CPU
  j["peak_source_fp32"] = peaks.fp32_source;
  j["peak_source_bf16"] = peaks.bf16_source;
  j["fraction_of_fp32_peak"] = peaks.fp32 > 0 ? gflops / peaks.fp32 : 0.0;
  j["fraction_of_peak"] = peak > 0 ? gflops / peak : 0.0;
  j["peak_rss_mb"] = peak_rss_mb;
  j["last_loss"] = last_loss;
  j["loadavg_start"] = load_at_start;  // 1/5/15-minute load: was the machine otherwise idle?
  j["loadavg_end"] = LoadAverage();
  if (flags.profile) j["profile"] = profiler.ToJson(steps);
  std::printf("%s\n", j.dump().c_str());
  std::fflush(stdout);
  if (flags.peer.empty()) return 0;

  // (d) The peer, same invocation, same shape, same FLOPs per token.
  const nlohmann::json spec =
      TorchPeerSpec(*config, *dims, threads, flags.peer_steps, flags.peer_warmup, fc.total_per_token);
  absl::StatusOr<nlohmann::json> peer = RunTorchPeer(spec, peer_options);
  if (!peer.ok()) return FailCommand(peer.status());
  nlohmann::ordered_json pj;
  pj["system"] = "pytorch";
  pj["config"] = dims->name;
  for (auto it = peer->begin(); it != peer->end(); ++it) pj[it.key()] = it.value();
  pj["peak_gflops"] = peak;
  const double peer_gflops = peer->value("gflops", 0.0), peer_tps = peer->value("tokens_per_s", 0.0);
  pj["fraction_of_peak"] = peak > 0 ? peer_gflops / peak : 0.0;
  pj["loadavg_end"] = LoadAverage();
  std::printf("%s\n", pj.dump().c_str());
  if (peer->value("params", int64_t{0}) != pc.total)
    return FailCommand(
        absl::InternalError(absl::StrCat("--peer=pytorch: the reference model has ", peer->value("params", int64_t{0}),
                                         " parameters, longctx ", pc.total, ": not the same model")));
  nlohmann::ordered_json cmp;
  cmp["system"] = "comparison";
  cmp["config"] = dims->name;
  cmp["precision"] = precision_name;
  cmp["threads"] = threads;
  cmp["longctx_tokens_per_s"] = tokens_per_s;
  cmp["pytorch_tokens_per_s"] = peer_tps;
  cmp["tokens_per_s_ratio"] = peer_tps > 0 ? tokens_per_s / peer_tps : 0.0;
  cmp["longctx_gflops"] = gflops;
  cmp["pytorch_gflops"] = peer_gflops;
  cmp["peak_gflops"] = peak;
  cmp["longctx_fraction_of_peak"] = peak > 0 ? gflops / peak : 0.0;
  cmp["pytorch_fraction_of_peak"] = peak > 0 ? peer_gflops / peak : 0.0;
  cmp["longctx_peak_rss_mb"] = peak_rss_mb;
  cmp["pytorch_peak_rss_mb"] = peer->value("peak_rss_mb", 0.0);
  cmp["longctx_last_loss"] = last_loss;
  cmp["pytorch_last_loss"] = peer->value("last_loss", 0.0);
  cmp["longctx"] = j;
  cmp["pytorch"] = pj;
  std::printf("  %-34s longctx %.1f tokens/s vs PyTorch %.1f tokens/s = %.2fx (%s, %d threads)\n", "peer",
              tokens_per_s, peer_tps, peer_tps > 0 ? tokens_per_s / peer_tps : 0.0, precision_name, threads);
  std::printf("%s\n", cmp.dump().c_str());
  return 0;
}

}  // namespace longctx
