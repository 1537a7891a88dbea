// Why: "how fast is a training step, and how close to the machine is it?" needs
// one number that is comparable across configs and machines. `longctx bench`
// measures the GEMM peaks of this machine — fp32 (the better sgemm of oneDNN
// and OpenBLAS) and, where the CPU has bf16 dot products, bf16 (oneDNN's bf16
// matmul) — and times full training steps
// (zero grads, ForwardBackward, AdamW) of the configured model on a synthetic
// batch (no data file), and reports achieved FLOP/s against the peak of the
// step's own precision (fp32 steps against fp32, bf16 against bf16). The
// FLOP count is plan.h's CountTrainingFlops: 6 × matmul parameters plus the
// attention actually computed (causal halving, sliding windows counted at their
// window), so a windowed model is not credited with work it skips. With
// --peer=pytorch the same model runs in PyTorch (bench/torch_reference.py) in
// the same invocation, credited with the same FLOPs, and a last JSON line holds
// both results and their ratios. `longctx bench attention` times one attention
// layer over growing sequence lengths (bench_attention.cc).
#ifndef LONGCTX_TRAIN_BENCH_H_
#define LONGCTX_TRAIN_BENCH_H_

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "data/packer.h"
#include "kernels/cpu/gemm_library.h"
#include "model/config.h"
#include "train/train.pb.h"

namespace longctx {

class Backend;

// Best-of-`repeats` GFLOP/s of an n×n×n F32 GEMM on `library` with the
// current thread count (2·n³ FLOPs per call).
double MeasureSgemmPeakGflops(int n, int repeats, cpu::SgemmLibrary library);

// True where the CPU has bf16 dot products (AVX512-BF16 or AMX) and oneDNN
// runs bf16 matmuls on them: only there is a bf16 peak measured.
bool BenchHasBf16Peak();
// Best-of-`repeats` GFLOP/s of an n×n×n oneDNN matmul of bf16 operands into
// fp32 (the bf16 GEMM limit); 0 where BenchHasBf16Peak() is false.
double MeasureBf16PeakGflops(int n, int repeats);

// The two limits every fraction of peak is taken against, measured in the same
// run as the figures: fp32 = the better sgemm (oneDNN or OpenBLAS), bf16 = the
// oneDNN bf16 matmul (0 without bf16 dot products). A bf16 figure is a
// fraction of `bf16`, an fp32 figure of `fp32` (Of says which).
struct GemmPeaks {
  double fp32 = 0, fp32_onednn = 0, fp32_openblas = 0, bf16 = 0;
  std::string fp32_source, bf16_source;
  // The peak a figure of this precision is measured against (bf16 without a
  // bf16 peak: the fp32 one, since bf16 then runs on fp32 FMAs).
  double Of(bool bf16_precision) const { return bf16_precision && bf16 > 0 ? bf16 : fp32; }
};
GemmPeaks MeasureGemmPeaks();  // 2048³, best of 15, each precision
// The same two limits on a device backend (cuda): the backend's own Gemm on
// device buffers, n = 8192 (a GPU needs large products to reach its peak),
// best of 10, timed with a Synchronize after each call: fp32 = F32 operands at
// MatmulPrecision::kF32 (cuBLAS sgemm, no TF32), bf16 = BF16 operands into an
// F32 C (tensor cores, fp32 accumulation). The backend's precision is restored.
GemmPeaks MeasureDeviceGemmPeaks(Backend& backend);
// MeasureDeviceGemmPeaks for a device backend, else MeasureGemmPeaks (the CPU).
GemmPeaks MeasureBackendGemmPeaks(Backend& backend);
// The CPU limit of one precision alone, quickly (2048³, best of 5 per
// library: ~0.5 s bf16, ~1 s fp32 on 2 cores): `bench attention` measures it
// after every row, so that each row has the limit next to it in time (a VM's
// GEMM peak can halve and recover within minutes).
// 0 on a device backend (not measured there).
double MeasurePeakOfPrecision(Backend& backend, bool bf16_precision);

// `longctx bench --config FILE [--steps=N] [--warmup=N] [--precision=fp32|bf16]
//   [--peer=pytorch [--peer_steps=N] [--peer_warmup=N] [--python=PATH] [--peer_script=PATH]]
//   [--bf16_gemm=auto|sgemm|onednn] [--sgemm=auto|onednn|openblas] [--profile=true]
//   [--section.field=value ...]`.
// --profile=true times every backend op of the timed steps (bench_profile.h).
// The bench flags arrive in `overrides` (main.cc routes unknown --x=y there)
// and are taken out here; the rest are TrainConfig overrides (--precision is
// TrainConfig.precision). Prints a table, then one JSON line per system
// ("system": "longctx" / "pytorch"), then with a peer a "comparison" line
// (the last line of stdout). Returns an exit code.
int RunBenchCommand(const std::string& config_path, const std::vector<std::string>& overrides);

// `longctx bench attention --config FILE [--lengths=2048,...,32768] [--window=1024]
//   [--kinds=swa,full] [--repeats=N] [--max_full_len=N] [--documents=W1,W2,...]
//   [--key_parts=N]`: per length L, one attention layer's forward + backward
// (the backend's attention op on one L-token segment, or on documents in the
// proportions W1:W2:..., the config's heads/kv heads/head dim; --key_parts
// fixes the CPU backward's key parts, 0 = automatic) and one whole
// transformer layer's training step (a 1-layer model of the config's shape on
// a 260-token vocabulary, so the LM head is negligible), in ms per token, with
// the bytes the attention op holds (q, k, v, o, lse and their gradients) and
// peak RSS. One JSON line per (kind, L), then a summary line.
int RunBenchAttentionCommand(const std::string& config_path, const std::vector<std::string>& overrides);

// --- The PyTorch peer (bench_peer.cc) ---

// P/share/longctx/bench/torch_reference.py for an installed P/bin/longctx,
// else <source dir>/bench/torch_reference.py.
std::string DefaultTorchReferenceScript();

// What bench/torch_reference.py needs to build and time the same model
// (shape, kinds, optimizer, batch of batch_size × grad_accum rows, threads,
// precision) and the FLOPs per token longctx credits.
nlohmann::json TorchPeerSpec(const TrainConfig& config, const ModelDims& dims, int threads, int steps, int warmup,
                             double flops_per_token);

struct PeerOptions {
  std::string python = "/usr/bin/python3";  // Debian's interpreter, where python3-torch lives
  std::string script;                       // empty = DefaultTorchReferenceScript()
};

// OK when the script exists and options.python imports torch; otherwise
// NotFound / FailedPrecondition naming the apt package (python3-torch).
absl::Status CheckTorchPeer(const PeerOptions& options);

// Runs the reference (or, with count_params_only, only builds the model and
// reports {"params": N}) and returns its JSON line. FailedPrecondition naming
// the apt package when torch cannot be imported.
absl::StatusOr<nlohmann::json> RunTorchPeer(const nlohmann::json& spec, const PeerOptions& options,
                                            bool count_params_only = false);

// --- Shared by the bench commands (bench.cc) ---

// A batch of B rows of T random ids: one causal segment per row (so the
// attention computed is exactly CountTrainingFlops' "every row one full-length
// causal segment"), positions 0..T-1, every target kept. With or without
// data.document_mask this is a valid packing (a row start is always a segment
// start).
PackedBatch SyntheticBatch(int32_t batch, int32_t seq_len, int vocab, uint64_t seed);

// Takes `name=value` out of overrides; value must be an integer >= min.
absl::Status TakeIntOverride(std::vector<std::string>& overrides, const std::string& name, int min, int* value);
// Takes `name=value` out of overrides; value must be a finite number >= min.
absl::Status TakeDoubleOverride(std::vector<std::string>& overrides, const std::string& name, double min,
                                double* value);
absl::Status TakeStringOverride(std::vector<std::string>& overrides, const std::string& name, std::string* value);
// --name=true|false (or 1|0); *value is left as it is when the flag is absent.
absl::Status TakeBoolOverride(std::vector<std::string>& overrides, const std::string& name, bool* value);
// Peak resident set size of this process so far, MiB.
double PeakRssMb();
// /proc/loadavg's 1, 5 and 15-minute loads ("0.12 0.30 0.41"): reported with
// every figure, since timings from a busy machine are not comparable.
std::string LoadAverage();

}  // namespace longctx

#endif  // LONGCTX_TRAIN_BENCH_H_
