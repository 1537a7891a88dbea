// Why: the long-context claims ("a sliding-window layer costs the same per
// token at 2K and at 32K", "attention memory grows linearly in L") are about
// one layer as L grows, which a whole-model step at one T cannot show.
// `longctx bench attention` times, for each kind (swa = RoPE sliding window,
// full = RoPE full causal) and each L:
//  (a) the attention op alone: AttentionForward + AttentionBackward of the
//      backend on one L-token segment with the config's heads / kv heads /
//      head dim, random q, k, v, dO; bytes = q, k, v, o, lse, dO, dq, dk, dv
//      (what one layer's attention holds for its backward plus its gradients),
//      and the resident memory the process gained while they were alive;
//  (b) one whole transformer layer's training step: a 1-layer model of the
//      config's shape (norms, q|k|v, RoPE, attention, o, SwiGLU MLP) with a
//      260-token vocabulary so the embedding and LM head are negligible,
//      ForwardBackward (no optimizer), and its activation arena.
// Each figure is the median of at least --repeats runs after one warm-up —
// more where the row is short, until the timed runs add up to --min_seconds
// (default 1 s: with only three repeats of a short row, two slow ones move
// the median while the row's peaks beside them do not; docs/BENCHMARKS.md,
// "Attention at GEMM speed") — and the attention op's GFLOP/s is also a fraction of the GEMM peak of the run's
// precision (--precision=bf16: the bf16 peak), measured in the same run
// before the lengths — and again after them, the summary line reporting the
// drift between the two (a VM's speed can change within one run). With
// --row_peaks (default on the CPU) the peak of the run's precision is also
// measured after every row, so each row has the limit just before and just
// after it: a row whose two are not both within 10 % of the best peak the run
// measured ran in a slow phase of the machine (a shared machine's GEMM peak
// can halve and recover within minutes, the attention's speed with it, but
// not in proportion), is marked `slow` and named in the summary: rerun it.
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "kernels/backend.h"
#include "base/log.h"
#include "kernels/backend_registry.h"
#include "kernels/cpu/cpu_backend.h"
#include "model/config.h"
#include "model/plan.h"
#include "model/transformer.h"
#include "train/bench/bench.h"
#include "base/command_status.h"
#include "train/config_loader.h"
#include "train/device_batch.h"
#include "train/report/progress.h"
#include "train/setup/backend_for_config.h"

namespace longctx {
namespace {

using Clock = std::chrono::steady_clock;

// |peak after the lengths / peak before - 1| above which the run is flagged.
constexpr double kPeakDriftWarning = 0.10;
// A row ran in a slow phase when either peak beside it is more than this
// fraction below the best peak of the run (--row_peaks).
constexpr double kSlowPhase = 0.10;
bool SlowPhase(double before, double after, double best) { return std::min(before, after) < (1 - kSlowPhase) * best; }

double Seconds(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 == 1 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

// Resident memory now (not the peak), MiB, from /proc/self/statm.
double CurrentRssMb() {
  std::ifstream f("/proc/self/statm");
  long pages_total = 0, pages_resident = 0;
  f >> pages_total >> pages_resident;
  return static_cast<double>(pages_resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) / (1024.0 * 1024.0);
}

// A backend tensor filled with uniform(-1, 1) (or zeros when seed == 0).
struct Buffer {
  DeviceBuffer mem;
  Tensor t;
  Buffer(Backend* be, std::initializer_list<int64_t> shape, DType dtype, uint64_t seed) {
    Tensor shape_only(nullptr, dtype, shape, be->device());
    mem = DeviceBuffer(be, shape_only.nbytes());
    t = Tensor(mem.data(), dtype, shape, be->device());
    if (dtype == DType::kF32) {
      std::vector<float> host(static_cast<size_t>(t.numel()), 0.f);
      if (seed != 0) {
        std::mt19937 rng(static_cast<uint32_t>(seed));
        std::uniform_real_distribution<float> u(-1.f, 1.f);
        for (float& x : host) x = u(rng);
      }
      be->CopyFromHost(t, host.data());
    }
  }
};

struct AttentionResult {
  double fwd_s = 0, bwd_s = 0, bytes = 0, rss_gain_mb = 0;
  double best_s = 0;  // the fastest repeat's forward + backward
  int repeats = 0;    // timed repeats (the medians' count)
};
constexpr int kMaxTimedRepeats = 1000;

// The L tokens cut into documents in the proportions of `weights` (all of
// them one document when empty): each floor(L * w / sum), the last the rest.
std::vector<int64_t> DocumentLengths(int64_t L, const std::vector<int64_t>& weights) {
  if (weights.empty()) return {L};
  int64_t sum = 0;
  for (int64_t w : weights) sum += w;
  std::vector<int64_t> lens;
  int64_t used = 0;
  for (size_t i = 0; i + 1 < weights.size(); ++i) {
    lens.push_back(L * weights[i] / sum);
    used += lens.back();
  }
  lens.push_back(L - used);
  return lens;
}

AttentionResult TimeAttentionOp(Backend* be, const ModelDims& d, int64_t L, const std::vector<int64_t>& docs,
                                int window, int repeats, double min_seconds) {
  const double rss0 = CurrentRssMb();
  const int64_t H = d.heads, Hkv = d.kv_heads, hd = d.head_dim;
  Buffer q(be, {L, H, hd}, DType::kF32, 11), k(be, {L, Hkv, hd}, DType::kF32, 12), v(be, {L, Hkv, hd}, DType::kF32, 13);
  Buffer o(be, {L, H, hd}, DType::kF32, 0), lse(be, {H, L}, DType::kF32, 0), d_o(be, {L, H, hd}, DType::kF32, 14);
  Buffer dq(be, {L, H, hd}, DType::kF32, 0), dk(be, {L, Hkv, hd}, DType::kF32, 0), dv(be, {L, Hkv, hd}, DType::kF32, 0);
  const int64_t segments = static_cast<int64_t>(docs.size());
  Buffer cu(be, {segments + 1}, DType::kI32, 0);
  std::vector<int32_t> cu_host = {0};
  for (int64_t len : docs) cu_host.push_back(cu_host.back() + static_cast<int32_t>(len));
  be->CopyFromHost(cu.t, cu_host.data());
  AttentionParams p;
  p.q = q.t; p.k = k.t; p.v = v.t; p.o = o.t; p.lse = lse.t; p.cu_seqlens = cu.t; p.window = window;
  p.d_o = d_o.t; p.dq = dq.t; p.dk = dk.t; p.dv = dv.t;
  std::vector<double> fwd, bwd;
  double timed = 0;
  // r = 0 warms up, untimed; then at least `repeats`, and more until the
  // timed runs reach min_seconds (at most kMaxTimedRepeats).
  for (int r = 0; r <= repeats || (timed < min_seconds && r <= kMaxTimedRepeats); ++r) {
    auto t0 = Clock::now();
    be->AttentionForward(p);
    be->Synchronize();
    const double f = Seconds(t0);
    t0 = Clock::now();
    be->AttentionBackward(p);
    be->Synchronize();
    const double b = Seconds(t0);
    if (r > 0) {
      fwd.push_back(f);
      bwd.push_back(b);
      timed += f + b;
    }
  }
  AttentionResult res;
  res.repeats = static_cast<int>(fwd.size());
  res.fwd_s = Median(fwd);
  res.bwd_s = Median(bwd);
  res.best_s = fwd[0] + bwd[0];
  for (size_t r = 1; r < fwd.size(); ++r) res.best_s = std::min(res.best_s, fwd[r] + bwd[r]);
  for (const Buffer* b : {&q, &k, &v, &o, &lse, &d_o, &dq, &dk, &dv}) res.bytes += static_cast<double>(b->t.nbytes());
  res.rss_gain_mb = CurrentRssMb() - rss0;
  return res;
}

struct LayerResult {
  double seconds = 0, activation_bytes = 0;
};

LayerResult TimeOneLayer(Backend* be, const ModelConfig& shape, AttentionKind kind, int window, int64_t L,
                         int repeats, uint64_t seed) {
  ModelConfig mc = shape;
  mc.set_num_layers(1);
  mc.set_vocab_size(260);
  mc.set_tie_embeddings(false);
  mc.set_layer_pattern(CUSTOM);
  mc.clear_layer_kinds();
  mc.add_layer_kinds(kind);
  mc.set_sliding_window(window);
  mc.set_max_position_embeddings(static_cast<int32_t>(std::max<int64_t>(L, mc.max_position_embeddings())));
  absl::StatusOr<ModelDims> dims = ResolveModelConfig(mc);
  CHECK(dims.ok()) << dims.status();
  Transformer model(*dims, be, DType::kF32);
  model.InitParams(seed);
  const PackedBatch batch = SyntheticBatch(1, static_cast<int32_t>(L), dims->vocab, seed + 1);
  DeviceBatch device(be);
  const BatchTensors t = device.Upload(batch);
  std::vector<double> s;
  for (int r = 0; r <= repeats; ++r) {
    model.grads().Zero();
    const auto t0 = Clock::now();
    model.ForwardBackward(t, 1.0 / static_cast<double>(L), /*backward=*/true);
    be->Synchronize();
    if (r > 0) s.push_back(Seconds(t0));
  }
  return {Median(s), static_cast<double>(model.activation_bytes())};
}

// A comma list of integers >= 1 (`flag` names it in errors).
absl::Status ParseLengths(const std::string& text, std::vector<int64_t>* out, const char* flag = "--lengths") {
  out->clear();
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    int64_t v = 0;
    if (!absl::SimpleAtoi(part, &v) || v < 1)
      return absl::InvalidArgumentError(absl::StrCat(flag, ": \"", std::string(part), "\" is not an integer >= 1"));
    out->push_back(v);
  }
  if (out->empty()) return absl::InvalidArgumentError(absl::StrCat(flag, ": empty"));
  return absl::OkStatus();
}

}  // namespace

int RunBenchAttentionCommand(const std::string& config_path, const std::vector<std::string>& overrides_in) {
  std::vector<std::string> overrides = overrides_in;
  std::string lengths_text = "2048,4096,8192,16384,32768", kinds_text = "swa", documents_text, isa_text = "auto";
  bool time_layer = true, amx = true, row_peaks = true;
  int window = 1024, repeats = 3, max_full_len = 32768, key_parts = 0;
  double min_seconds = 1.0;
  absl::Status st = TakeStringOverride(overrides, "lengths", &lengths_text);
  if (st.ok()) st = TakeStringOverride(overrides, "documents", &documents_text);
  if (st.ok()) st = TakeIntOverride(overrides, "key_parts", 0, &key_parts);
  if (st.ok()) st = TakeStringOverride(overrides, "attention_isa", &isa_text);
  if (st.ok()) st = TakeBoolOverride(overrides, "layer", &time_layer);
  if (st.ok()) st = TakeBoolOverride(overrides, "attention_amx", &amx);
  if (st.ok()) st = TakeBoolOverride(overrides, "row_peaks", &row_peaks);
  if (st.ok()) st = TakeStringOverride(overrides, "kinds", &kinds_text);
  if (st.ok()) st = TakeIntOverride(overrides, "window", 1, &window);
  if (st.ok()) st = TakeIntOverride(overrides, "repeats", 1, &repeats);
  if (st.ok()) st = TakeDoubleOverride(overrides, "min_seconds", 0.0, &min_seconds);
  if (st.ok()) st = TakeIntOverride(overrides, "max_full_len", 1, &max_full_len);
  std::vector<int64_t> lengths, documents;
  if (st.ok()) st = ParseLengths(lengths_text, &lengths);
  if (st.ok() && !documents_text.empty()) st = ParseLengths(documents_text, &documents, "--documents");
  if (st.ok() && key_parts > kMaxAttentionKeyParts)
    st = absl::InvalidArgumentError(
        absl::StrCat("--key_parts: 0 (automatic) to ", kMaxAttentionKeyParts, " (got ", key_parts, ")"));
  absl::StatusOr<CpuAttentionIsa> isa = CpuAttentionIsa::kAuto;
  if (st.ok()) isa = ParseCpuAttentionIsa(isa_text);
  if (st.ok() && !isa.ok()) st = absl::InvalidArgumentError(absl::StrCat("--attention_isa: ", isa.status().message()));
  if (!st.ok()) return FailCommand(st);
  std::vector<std::string> kinds = absl::StrSplit(kinds_text, ',', absl::SkipWhitespace());
  for (const std::string& k : kinds)
    if (k != "swa" && k != "full")
      return FailCommand(absl::InvalidArgumentError(absl::StrCat("--kinds: \"", k, "\" is not swa or full")));
  if (config_path.empty()) return FailCommand(absl::InvalidArgumentError("--config is required"));
  absl::StatusOr<TrainConfig> config = LoadTrainConfig(config_path, overrides);
  if (!config.ok()) return FailCommand(config.status());
  absl::StatusOr<ModelDims> dims = ResolveModelConfig(config->model());
  if (!dims.ok()) return FailCommand(dims.status());
  BackendSettings backend_options;
  backend_options.cpu.attention_key_parts = key_parts;
  backend_options.cpu.attention_isa = *isa;
  backend_options.cpu.attention_amx = amx;
  absl::StatusOr<std::unique_ptr<Backend>> backend =
      MakeBackendForConfig(*config, backend_options);  // with its threads
  if (!backend.ok()) return FailCommand(backend.status());
  Backend* be = backend->get();
  const int threads = omp_get_max_threads();
  std::printf("bench attention: %s shape (hidden %d, heads %d / kv %d, head_dim %d, ffn %d), backend %s, threads %d, "
              "attention ISA %s%s\n",
              dims->name.c_str(), dims->hidden, dims->heads, dims->kv_heads, dims->head_dim, dims->ffn,
              be->name().c_str(), threads, CpuAttentionIsaName(*isa),
              amx ? "" : ", bf16 tiles on vdpbf16ps (--attention_amx=false)");
  std::printf("  attention op = AttentionForward + AttentionBackward on one L-token segment; layer = 1-layer model\n"
              "  ForwardBackward (vocab 260)%s; ms/token = median of %d (attention: or more, until %.1f s) after\n"
              "  1 warm-up, divided by L; best = the fastest repeat's fraction of the peak (itself the best of its\n"
              "  GEMM repeats)\n",
              time_layer ? "" : ", not timed (--layer=false: its columns are 0)", repeats, min_seconds);
  // The limit of this run's precision, measured now (before the lengths, so a
  // loaded machine shows in both alike): attention of a bf16 run is a fraction
  // of the bf16 GEMM peak, of fp32 of the sgemm peak.
  const bool bf16 = config->precision() == BF16;
  if (bf16)
    if (absl::Status pst = be->SetMatmulPrecision(MatmulPrecision::kBF16); !pst.ok()) return FailCommand(pst);
  std::fprintf(stderr, "bench attention: measuring the GEMM peaks ...\n");
  const GemmPeaks peaks = MeasureBackendGemmPeaks(*be);
  const double peak = peaks.Of(bf16);
  row_peaks = row_peaks && be->device() == Device::kCpu;
  std::printf("  precision %s; fp32 GEMM peak %.1f GFLOP/s (%s); bf16 GEMM peak %s\n", bf16 ? "bf16" : "fp32",
              peaks.fp32, peaks.fp32_source.c_str(),
              peaks.bf16 > 0 ? absl::StrFormat("%.1f GFLOP/s (%s)", peaks.bf16, peaks.bf16_source).c_str()
                             : peaks.bf16_source.c_str());
  if (row_peaks)
    std::printf("  row peaks = the GEMM peak of this precision (2048^3, best of 5) before and after the row; of max =\n"
                "  the median against the best peak measured so far; slow = a row peak >%.0f%% below it: rerun\n",
                100 * kSlowPhase);
  std::printf("  %-5s %7s %12s %12s %8s %8s %10s %12s %12s %12s %10s%s\n", "kind", "L", "attn ms/tok", "attn GFLOP/s",
              "of peak", "best", "attn MiB", "attn B/tok", "layer ms/tok", "layer MiB", "RSS+ MiB",
              row_peaks ? "    row peaks   of max" : "");
  int64_t total_runs = 0, runs_done = 0;
  for (const std::string& k : kinds)
    for (int64_t L : lengths) total_runs += (k == "swa" || L <= max_full_len) ? 1 : 0;
  Progress progress("bench attention", total_runs, "lengths", stderr);

  nlohmann::ordered_json summary;
  summary["system"] = "longctx";
  summary["bench"] = "attention-summary";
  summary["loadavg_start"] = LoadAverage();
  // --row_peaks: the last peak measured (the row's "before"), the best so far,
  // and each row's two, to flag slow rows against the run's final best.
  double last_peak = peak, run_peak = peak;
  struct RowPeaks {
    std::string kind;
    int64_t L;
    double before, after;
  };
  std::vector<RowPeaks> row_peak_list;
  for (const std::string& kind_name : kinds) {
    const bool swa = kind_name == "swa";
    const int w = swa ? window : 0;
    std::vector<double> attn_per_tok, layer_per_tok, bytes_per_tok;
    std::vector<int64_t> done;
    for (int64_t L : lengths) {
      if (!swa && L > max_full_len) continue;
      const std::vector<int64_t> docs = DocumentLengths(L, documents);
      const AttentionResult a = TimeAttentionOp(be, *dims, L, docs, w, repeats, min_seconds);
      const LayerResult layer = time_layer ? TimeOneLayer(be, config->model(), swa ? ROPE_SWA : ROPE_FULL,
                                                          swa ? window : 0, L, repeats, config->seed())
                                           : LayerResult{};
      const double attn_s = a.fwd_s + a.bwd_s;
      const double row_before = last_peak;
      const double row_after = row_peaks ? MeasurePeakOfPrecision(*be, bf16) : 0.0;
      if (row_peaks) {
        last_peak = row_after;
        run_peak = std::max(run_peak, row_after);
        row_peak_list.push_back({kind_name, L, row_before, row_after});
      }
      const bool slow = row_peaks && SlowPhase(row_before, row_after, run_peak);
      double attn_flops = 0;  // per document: its queries x their mean keys
      for (int64_t len : docs)
        if (len > 0) attn_flops += 12.0 * dims->heads * dims->head_dim * MeanKeysPerQuery(len, w) * static_cast<double>(len);
      nlohmann::ordered_json j;
      j["system"] = "longctx";
      j["bench"] = "attention";
      j["config"] = dims->name;
      j["kind"] = kind_name;
      j["seq_len"] = L;
      j["documents"] = docs;
      j["key_parts"] = key_parts;  // 0: chosen per call
      j["attention_isa"] = CpuAttentionIsaName(*isa);
      j["attention_amx"] = amx;
      j["window"] = w;
      j["threads"] = threads;
      j["repeats"] = a.repeats;  // timed: at least --repeats, more for --min_seconds
      j["min_seconds"] = min_seconds;
      j["attn_fwd_ms"] = a.fwd_s * 1e3;
      j["attn_bwd_ms"] = a.bwd_s * 1e3;
      j["attn_ms_per_token"] = attn_s * 1e3 / static_cast<double>(L);
      j["attn_flops"] = attn_flops;
      j["attn_gflops"] = attn_flops / attn_s / 1e9;
      j["precision"] = bf16 ? "bf16" : "fp32";
      j["peak_gflops"] = peak;  // of this precision, measured in this run
      j["peak_gflops_fp32"] = peaks.fp32;
      j["peak_gflops_bf16"] = peaks.bf16;
      j["attn_fraction_of_peak"] = peak > 0 ? attn_flops / attn_s / 1e9 / peak : 0.0;
      // The fastest repeat against the same peak: the peak is the best of its
      // GEMM repeats, so this is the like-for-like figure on a VM whose speed
      // drifts during a run; the median above is kept beside it.
      j["attn_best_ms"] = a.best_s * 1e3;
      j["attn_gflops_best"] = attn_flops / a.best_s / 1e9;
      j["attn_fraction_of_peak_best"] = peak > 0 ? attn_flops / a.best_s / 1e9 / peak : 0.0;
      if (row_peaks) {  // the limit beside the row (not the run's first): see the file comment
        j["row_peak_before"] = row_before;
        j["row_peak_after"] = row_after;
        j["run_peak_so_far"] = run_peak;
        j["attn_fraction_of_run_peak"] = attn_flops / attn_s / 1e9 / run_peak;
        j["attn_fraction_of_run_peak_best"] = attn_flops / a.best_s / 1e9 / run_peak;
        j["slow_phase"] = slow;
      }
      j["attn_bytes"] = a.bytes;
      j["attn_bytes_per_token"] = a.bytes / static_cast<double>(L);
      j["attn_rss_gain_mb"] = a.rss_gain_mb;
      j["layer_ms_per_token"] = layer.seconds * 1e3 / static_cast<double>(L);
      j["layer_activation_bytes"] = layer.activation_bytes;
      j["peak_rss_mb"] = PeakRssMb();
      j["loadavg_end"] = LoadAverage();
      progress.Clear();
      const std::string row_peak_text =
          row_peaks ? absl::StrFormat("  %6.0f/%-6.0f %7.1f%%%s", row_before, row_after,
                                      100 * attn_flops / attn_s / 1e9 / run_peak, slow ? " slow" : "")
                    : "";
      std::printf("  %-5s %7lld %12.4f %12.1f %7.1f%% %7.1f%% %10.1f %12.0f %12.4f %12.1f %10.1f%s\n", kind_name.c_str(),
                  static_cast<long long>(L), attn_s * 1e3 / static_cast<double>(L), attn_flops / attn_s / 1e9,
                  peak > 0 ? 100 * attn_flops / attn_s / 1e9 / peak : 0.0,
                  peak > 0 ? 100 * attn_flops / a.best_s / 1e9 / peak : 0.0, a.bytes / (1024.0 * 1024.0),
                  a.bytes / static_cast<double>(L),
                  layer.seconds * 1e3 / static_cast<double>(L), layer.activation_bytes / (1024.0 * 1024.0),
                  a.rss_gain_mb, row_peak_text.c_str());
      std::printf("%s\n", j.dump().c_str());
      std::fflush(stdout);
      progress.Event(++runs_done, absl::StrFormat("%s L=%lld: %.1f GFLOP/s", kind_name, static_cast<long long>(L),
                                                  attn_flops / attn_s / 1e9));
      attn_per_tok.push_back(attn_s / static_cast<double>(L));
      layer_per_tok.push_back(layer.seconds / static_cast<double>(L));
      bytes_per_tok.push_back(a.bytes / static_cast<double>(L));
      done.push_back(L);
    }
    if (done.empty()) continue;
    // Spread relative to the shortest length: max and min of (per-token cost
    // at L) / (per-token cost at the first L).
    auto spread = [](const std::vector<double>& v) {
      nlohmann::ordered_json s;
      s["min_ratio_to_first"] = *std::min_element(v.begin(), v.end()) / v.front();
      s["max_ratio_to_first"] = *std::max_element(v.begin(), v.end()) / v.front();
      return s;
    };
    nlohmann::ordered_json k;
    k["lengths"] = done;
    k["window"] = w;
    k["attn_ms_per_token_spread"] = spread(attn_per_tok);
    if (time_layer) k["layer_ms_per_token_spread"] = spread(layer_per_tok);
    k["attn_bytes_per_token_spread"] = spread(bytes_per_tok);
    summary[kind_name] = k;
  }
  // The limit again, after the lengths: a VM's speed can change within a run
  // (by tens of percent within minutes, or for an hour: docs/BENCHMARKS.md,
  // "Attention at GEMM speed"), and every fraction
  // above is against the first measurement. A drift beyond 10 % says the
  // run's fractions are not like for like; rerun it.
  std::fprintf(stderr, "bench attention: measuring the GEMM peaks again ...\n");
  const GemmPeaks end_peaks = MeasureBackendGemmPeaks(*be);
  const double peak_end = end_peaks.Of(bf16);
  const double drift = peak > 0 ? peak_end / peak - 1 : 0.0;
  std::printf("  GEMM peak of this precision after the lengths: %.1f GFLOP/s, %+.1f%% against the first%s\n", peak_end,
              100 * drift,
              std::fabs(drift) > kPeakDriftWarning
                  ? " -- warning: the machine's speed changed during the run; its fractions are not like for like"
                  : "");
  summary["precision"] = bf16 ? "bf16" : "fp32";
  summary["peak_gflops_fp32"] = peaks.fp32;
  summary["peak_gflops_bf16"] = peaks.bf16;
  summary["peak_gflops"] = peak;
  summary["peak_gflops_end"] = peak_end;  // of this precision, after the lengths
  summary["peak_drift"] = drift;          // peak_gflops_end / peak_gflops - 1
  summary["peak_drift_warning"] = std::fabs(drift) > kPeakDriftWarning;
  if (row_peaks) {
    // Slow rows against the run's best peak, now that all of them are known
    // (a row before the first fast phase was not flagged as it printed).
    run_peak = std::max(run_peak, peak_end);
    std::vector<std::string> slow_rows;
    for (const RowPeaks& r : row_peak_list)
      if (SlowPhase(r.before, r.after, run_peak))
        slow_rows.push_back(absl::StrCat(r.kind, ":", r.L));
    summary["run_peak_gflops"] = run_peak;  // the best of every peak of this precision measured in the run
    summary["slow_rows"] = slow_rows;
    std::printf("  best GEMM peak of this precision in the run: %.1f GFLOP/s; rows timed in a slow phase (a peak beside "
                "them >%.0f%% below it): %s\n",
                run_peak, 100 * kSlowPhase, slow_rows.empty() ? "none" : absl::StrJoin(slow_rows, ", ").c_str());
  }
  summary["loadavg_end"] = LoadAverage();
  std::printf("%s\n", summary.dump().c_str());
  return 0;
}

}  // namespace longctx
