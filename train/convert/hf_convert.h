// Why: a longctx checkpoint must load in Hugging Face transformers as the
// model it is, and a Hugging Face Llama-family checkpoint must become a
// longctx checkpoint to continue pretraining or fine-tune. Stock Llama
// ignores layer_types / sliding_window / no_rope_layers, so an RNoPE-SWA
// checkpoint labelled LlamaForCausalLM loads without an error and computes a
// different model. Export therefore picks the one stock architecture that
// computes exactly our model, and refuses what none can express:
//   all ROPE_FULL                      -> LlamaForCausalLM  (model_type llama)
//   all ROPE_SWA                       -> MistralForCausalLM (model_type mistral)
//   any mix with a NOPE_FULL layer, or
//   ROPE_FULL mixed with ROPE_SWA      -> SmolLM3ForCausalLM (model_type smollm3)
//   RoPER, QK-norm, partial RoPE       -> refused (InvalidArgument naming the
//                                         field): none of the three classes has
//                                         them, and a config.json extra field is
//                                         ignored silently by transformers, which
//                                         is the failure this code exists to stop.
// Import reads config.json the way transformers' class for its `architectures`
// reads it (keys that class ignores are ignored here too) plus
// model.safetensors or model.safetensors.index.json shards (F32/BF16/F16), and
// writes a weights-only longctx checkpoint (F32).
#ifndef LONGCTX_TRAIN_CONVERT_HF_CONVERT_H_
#define LONGCTX_TRAIN_CONVERT_HF_CONVERT_H_

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "kernels/tensor.h"
#include "model/config.h"

namespace longctx {

// q_proj / k_proj row order. kHf: each head's rotary pairs are rows
// (j, j + head_dim/2) (transformers' rotate_half, and longctx's own order).
// kMeta: Meta's original checkpoints pair rows (2j, 2j + 1).
enum class QkLayout { kHf, kMeta };

absl::StatusOr<QkLayout> ParseQkLayout(const std::string& s);  // "hf" | "meta"

// Reorders the rows of a q_proj or k_proj weight [heads * head_dim, cols] in
// place. to_meta: HF row h*hd + i*hd/2 + j (i in {0,1}) moves to h*hd + 2j + i
// (the inverse of transformers' convert_llama_weights_to_hf `permute`);
// !to_meta: the inverse. Requires an even head_dim.
void PermuteQkRows(float* w, int heads, int head_dim, int64_t cols, bool to_meta);

// "5GB", "500MB", "10KB", "123" (bytes); decimal units as transformers'
// max_shard_size ("5GB" = 5e9 bytes); also GiB/MiB/KiB (binary).
absl::StatusOr<uint64_t> ParseByteSize(const std::string& s);

// The Hugging Face architecture that computes exactly `dims`:
// "LlamaForCausalLM", "MistralForCausalLM" or "SmolLM3ForCausalLM"; an
// InvalidArgument naming the field for what none of them expresses.
absl::StatusOr<std::string> HfArchitectureFor(const ModelDims& dims);

// config.json for that architecture (only keys that class reads, plus
// longctx_name). torch_dtype "float32" or "bfloat16". bos/eos < 0 -> null.
absl::StatusOr<nlohmann::json> HfExportConfigJson(const ModelDims& dims, DType dtype, int bos_token_id,
                                                  int eos_token_id);

struct HfExportOptions {
  std::string checkpoint;  // longctx checkpoint directory
  std::string out;         // created; must not exist or be empty
  DType dtype = DType::kF32;  // kF32 or kBF16 (round to nearest even)
  uint64_t max_shard_bytes = 5'000'000'000;
  QkLayout layout = QkLayout::kHf;
};

struct HfExportResult {
  std::string architecture;
  std::vector<std::string> files;  // written, relative to out, sorted
  int num_shards = 1;
  uint64_t total_size = 0;  // tensor bytes (index metadata.total_size)
};

absl::StatusOr<HfExportResult> ExportToHf(const HfExportOptions& options);

struct HfImportOptions {
  std::string hf;   // Hugging Face model directory (config.json + weights)
  std::string out;  // longctx checkpoint directory, created
  QkLayout layout = QkLayout::kHf;
  // data.tokenizer of the written TrainConfig; empty = guess from vocab_size
  // (128256 llama3, 32000 llama2, 260 byte, else byte).
  std::string tokenizer;
};

struct HfImportResult {
  std::string architecture;
  ModelConfig model;
  int tensors = 0;
  int shards = 1;
};

absl::StatusOr<HfImportResult> ImportFromHf(const HfImportOptions& options);

// The ModelConfig transformers' class for config.json's architecture would
// build (errors name the key): unknown architecture, fields that class
// ignores dropped, SmolLM3 defaults (no_rope_layers every 4th layer NoPE).
absl::StatusOr<ModelConfig> ModelConfigFromHfCheckpointJson(const nlohmann::json& config, std::string* architecture);

}  // namespace longctx

#endif  // LONGCTX_TRAIN_CONVERT_HF_CONVERT_H_
