// Why: `longctx bench --peer=pytorch` runs bench/torch_reference.py in the same
// invocation, right after longctx's own steps, so both figures come from the
// same machine state. longctx hands the script everything that defines the
// model and the run (shape, per-layer attention kinds, optimizer, batch,
// threads, precision) and its own FLOPs per token, so the two systems are
// timed on the same architecture and credited with the same work. The
// script's last stdout line is its JSON result; a missing torch is reported
// with the Debian package that provides it.
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/install_layout.h"
#include "base/status_macros.h"
#include "base/subprocess.h"
#include "train/bench/bench.h"

namespace longctx {
namespace {

// 'text' for /bin/sh, single quotes escaped.
std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

std::string ThreadEnv(int threads) {
  const std::string t = std::to_string(threads);
  return absl::StrCat("OMP_NUM_THREADS=", t, " OPENBLAS_NUM_THREADS=", t, " MKL_NUM_THREADS=", t, " ");
}

}  // namespace

std::string DefaultTorchReferenceScript() {
  // An installed longctx carries the script in P/share/longctx/bench; a build
  // tree's binary runs the one in its source tree.
  const std::string installed = InstalledDataPath("bench/torch_reference.py");
  std::error_code ec;
  if (!installed.empty() && std::filesystem::is_regular_file(installed, ec)) return installed;
  return std::string(LONGCTX_BENCH_SOURCE_DIR) + "/bench/torch_reference.py";
}

nlohmann::json TorchPeerSpec(const TrainConfig& config, const ModelDims& dims, int threads, int steps, int warmup,
                             double flops_per_token) {
  nlohmann::ordered_json j;
  j["name"] = dims.name;
  j["vocab"] = dims.vocab;
  j["hidden"] = dims.hidden;
  j["layers"] = dims.layers;
  j["heads"] = dims.heads;
  j["kv_heads"] = dims.kv_heads;
  j["head_dim"] = dims.head_dim;
  j["ffn"] = dims.ffn;
  j["rope_dim"] = dims.rope_dim;
  j["window"] = dims.window;
  j["tied"] = dims.tied;
  j["qk_norm"] = dims.qk_norm;
  j["rms_norm_eps"] = dims.eps;
  j["rope_theta"] = dims.theta;
  j["init_std"] = dims.init_std;
  std::vector<std::string> kinds;
  for (AttentionKind k : dims.kinds) kinds.push_back(AttentionKind_Name(k));
  j["kinds"] = kinds;
  j["batch_size"] = config.data().batch_size() * config.grad_accum();
  j["seq_len"] = config.data().seq_len();
  j["lr"] = config.optim().lr();
  j["beta1"] = config.optim().beta1();
  j["beta2"] = config.optim().beta2();
  j["eps"] = config.optim().eps();
  j["weight_decay"] = config.optim().weight_decay();
  j["grad_clip"] = config.optim().grad_clip();
  j["decay_norms"] = config.optim().decay_norms();
  j["seed"] = config.seed();
  j["threads"] = threads;
  j["steps"] = steps;
  j["warmup"] = warmup;
  j["precision"] = config.precision() == BF16 ? "bf16" : "fp32";
  j["flops_per_token"] = flops_per_token;
  return j;
}

absl::Status CheckTorchPeer(const PeerOptions& options) {
  const std::string script = options.script.empty() ? DefaultTorchReferenceScript() : options.script;
  if (!std::filesystem::exists(script))
    return absl::NotFoundError(absl::StrCat("--peer=pytorch: no reference script at ", script,
                                            "; pass --peer_script=PATH (bench/torch_reference.py)"));
  // Children through RunShellCommand: SIGTERM reaches them (base/subprocess.h).
  absl::StatusOr<ShellResult> probe =
      RunShellCommand(absl::StrCat(ShellQuote(options.python), " -c 'import torch' >/dev/null 2>&1"));
  if (!probe.ok()) return probe.status();
  if (probe->exit_status != 0)
    return absl::FailedPreconditionError(
        absl::StrCat("--peer=pytorch: ", options.python,
                     " cannot import torch; install Debian's python3-torch (apt-get install -y python3-torch, or "
                     "bash scripts/setup_bench.sh) or pass --python=PATH"));
  return absl::OkStatus();
}

absl::StatusOr<nlohmann::json> RunTorchPeer(const nlohmann::json& spec, const PeerOptions& options,
                                            bool count_params_only) {
  LONGCTX_RETURN_IF_ERROR(CheckTorchPeer(options));
  const std::string script = options.script.empty() ? DefaultTorchReferenceScript() : options.script;
  const int threads = spec.value("threads", 1);
  const std::string command =
      absl::StrCat(ThreadEnv(threads), ShellQuote(options.python), " ", ShellQuote(script), " --spec ",
                   ShellQuote(spec.dump()), count_params_only ? " --count_params" : "");
  absl::StatusOr<ShellResult> out = RunShellCommand(command);
  if (!out.ok()) return out.status();
  if (out->exit_status != 0)
    return absl::InternalError(absl::StrCat("--peer=pytorch: ", script, " exited with status ", out->exit_status,
                                            " (its message is above)"));
  std::vector<std::string> lines = absl::StrSplit(out->stdout_text, '\n', absl::SkipWhitespace());
  nlohmann::json j =
      lines.empty() ? nlohmann::json() : nlohmann::json::parse(lines.back(), nullptr, /*allow_exceptions=*/false);
  if (!j.is_object())
    return absl::InternalError(absl::StrCat("--peer=pytorch: ", script, " printed no JSON line (output: \"",
                                            out->stdout_text.substr(0, 200), "\")"));
  return j;
}

}  // namespace longctx
