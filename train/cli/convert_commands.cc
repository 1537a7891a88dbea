// Why: `longctx convert` — checkpoint conversion with Hugging Face
// (train/convert/hf_convert.h): `--to hf` exports a longctx checkpoint as the
// stock transformers architecture that computes the same model (or refuses),
// `--from hf` imports a Llama / Mistral / SmolLM3 directory as a weights-only
// longctx checkpoint (for eval, generate, or train --init_from). One command
// with a direction flag, so the two directions share --out and --layout.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "absl/strings/str_join.h"
#include "train/cli/command_table.h"
#include "train/convert/hf_convert.h"

namespace longctx::cli {
namespace {

struct ConvertArgs {
  std::string to, from, checkpoint, hf, out, dtype = "f32", max_shard_size = "5GB", layout = "hf", tokenizer;
};

int Fail(const absl::Status& st) {
  std::fprintf(stderr, "longctx convert: error: %s\n", std::string(st.message()).c_str());
  return 1;
}

int RunConvert(const ConvertArgs& a) {
  if (a.to.empty() == a.from.empty()) return Fail(absl::InvalidArgumentError("give exactly one of --to hf or --from hf"));
  absl::StatusOr<QkLayout> layout = ParseQkLayout(a.layout);
  if (!layout.ok()) return Fail(layout.status());
  if (!a.to.empty()) {
    if (a.to != "hf") return Fail(absl::InvalidArgumentError("--to: only 'hf' is supported"));
    if (!a.hf.empty() || !a.tokenizer.empty())
      return Fail(absl::InvalidArgumentError("--hf and --tokenizer are --from hf flags"));
    HfExportOptions o;
    o.checkpoint = a.checkpoint;
    o.out = a.out;
    o.layout = *layout;
    if (a.dtype == "f32") {
      o.dtype = DType::kF32;
    } else if (a.dtype == "bf16") {
      o.dtype = DType::kBF16;
    } else {
      return Fail(absl::InvalidArgumentError("--dtype: must be f32 or bf16 (got '" + a.dtype + "')"));
    }
    absl::StatusOr<uint64_t> shard = ParseByteSize(a.max_shard_size);
    if (!shard.ok()) return Fail(shard.status());
    o.max_shard_bytes = *shard;
    absl::StatusOr<HfExportResult> r = ExportToHf(o);
    if (!r.ok()) return Fail(r.status());
    std::printf("{\"architecture\":\"%s\",\"shards\":%d,\"total_size\":%llu,\"files\":[\"%s\"]}\n",
                r->architecture.c_str(), r->num_shards, static_cast<unsigned long long>(r->total_size),
                absl::StrJoin(r->files, "\",\"").c_str());
    if (!std::any_of(r->files.begin(), r->files.end(), [](const std::string& f) { return f == "tokenizer.json"; }))
      std::fprintf(stderr,
                   "longctx convert: note: the checkpoint's tokenizer has no Hugging Face counterpart "
                   "(only llama3 and llama2 do): no tokenizer files written\n");
    return 0;
  }
  if (a.from != "hf") return Fail(absl::InvalidArgumentError("--from: only 'hf' is supported"));
  if (!a.checkpoint.empty() || a.dtype != "f32" || a.max_shard_size != "5GB")
    return Fail(absl::InvalidArgumentError("--checkpoint, --dtype and --max_shard_size are --to hf flags"));
  HfImportOptions o;
  o.hf = a.hf;
  o.out = a.out;
  o.layout = *layout;
  o.tokenizer = a.tokenizer;
  absl::StatusOr<HfImportResult> r = ImportFromHf(o);
  if (!r.ok()) return Fail(r.status());
  std::printf("{\"architecture\":\"%s\",\"tensors\":%d,\"shards\":%d,\"layer_pattern\":\"%s\"}\n",
              r->architecture.c_str(), r->tensors, r->shards, LayerPattern_Name(r->model.layer_pattern()).c_str());
  return 0;
}

}  // namespace

void RegisterConvertCommands(CommandTable& table) {
  auto a = std::make_shared<ConvertArgs>();
  CLI::App* c = table.Add(
      {.path = "convert",
       .summary = "Convert a checkpoint to or from Hugging Face (Llama / Mistral / SmolLM3, safetensors)",
       .notes = "  longctx convert --to hf --checkpoint runs/demo/step-00000300 --out hf/demo [--dtype bf16]\n"
                "                 [--max_shard_size 5GB] [--layout meta]\n"
                "  longctx convert --from hf --hf DIR --out DIR [--layout meta] [--tokenizer llama3]\n"
                "Export picks LlamaForCausalLM (all RoPE full), MistralForCausalLM (all RoPE sliding window) or\n"
                "SmolLM3ForCausalLM (any NoPE layer or mixed windows); RoPER, QK-norm and partial RoPE are refused.\n"
                "--layout meta: q_proj/k_proj rows in Meta's original (2j, 2j+1) pairing instead of HF's (j, j+d/2).",
       .run = [a](const std::vector<std::string>&) { return RunConvert(*a); }});
  c->add_option("--to", a->to, "export: 'hf'");
  c->add_option("--from", a->from, "import: 'hf'");
  c->add_option("--checkpoint", a->checkpoint, "export: the longctx checkpoint directory");
  c->add_option("--hf", a->hf, "import: the Hugging Face model directory");
  c->add_option("--out", a->out, "output directory (created; must be empty)");
  c->add_option("--dtype", a->dtype, "export: f32 or bf16 (round to nearest even)");
  c->add_option("--max_shard_size", a->max_shard_size, "export: shard above this size (5GB = 5e9 bytes)");
  c->add_option("--layout", a->layout, "q/k row order of the Hugging Face side: hf or meta");
  c->add_option("--tokenizer", a->tokenizer, "import: data.tokenizer of the checkpoint (default: from vocab_size)");
}

}  // namespace longctx::cli
