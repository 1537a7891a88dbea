// Why: see hf_convert.h. Field semantics, as transformers (4.53+) defines
// them and as they are used below:
//  - LlamaConfig: every layer RoPE (rotate_half: dim j pairs with j + d/2,
//    inv_freq = theta^(-2j/d), d = head_dim * partial_rotary_factor), causal
//    full attention; `head_dim` explicit; `layer_types`, `sliding_window`,
//    `no_rope_layers` are not read by LlamaModel (so import ignores them).
//  - MistralConfig: `sliding_window` (int or null) applies to every layer;
//    transformers' sliding mask keeps key j for query i iff
//    0 <= i - j < sliding_window: the query and its sliding_window - 1
//    predecessors, exactly longctx's ROPE_SWA window.
//  - SmolLM3Config: `no_rope_layers[i]` is 1 when layer i USES RoPE and 0 when
//    it is NoPE (SmolLM3Attention sets use_rope = no_rope_layers[layer_idx];
//    the name reads backwards, the values are what the class does). Default
//    when absent: int((i + 1) % no_rope_layer_interval != 0), interval 4.
//    `layer_types[i]` is "sliding_attention" (window `sliding_window`) or
//    "full_attention"; `use_sliding_window` must be true for sliding layers
//    to slide, so export writes true whenever a layer slides and import
//    refuses sliding layer_types with use_sliding_window false (ambiguous).
//  - tie_word_embeddings: lm_head shares model.embed_tokens.weight; a tied
//    export writes no lm_head.weight (as save_pretrained does); a tied import
//    with an lm_head.weight is refused unless it equals the embedding.
#include "train/convert/hf_convert.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "data/tokenizer_files.h"
#include "base/log.h"
#include "base/status_macros.h"
#include "model/hf_config.h"
#include "model/param_layout.h"
#include "train/checkpoint/checkpoint.h"
#include "train/checkpoint/checkpoint_dir.h"
#include "train/checkpoint/manifest.h"
#include "train/checkpoint/safetensors.h"
#include "train/config_loader.h"
#include "train/convert/hf_tokenizer_files.h"

namespace longctx {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr char kIndexFile[] = "model.safetensors.index.json";

std::string ShapeStr(const std::vector<int64_t>& s) { return absl::StrCat("[", absl::StrJoin(s, ", "), "]"); }

bool IsQk(const std::string& name) {
  auto ends = [&](const char* suf) {
    const size_t n = std::strlen(suf);
    return name.size() >= n && name.compare(name.size() - n, n, suf) == 0;
  };
  return ends("self_attn.q_proj.weight") || ends("self_attn.k_proj.weight");
}

absl::Status PrepareOutDir(const std::string& out) {
  if (out.empty()) return absl::InvalidArgumentError("--out is required");
  std::error_code ec;
  if (fs::exists(out, ec)) {
    if (!fs::is_directory(out, ec)) return absl::AlreadyExistsError(absl::StrCat("--out ", out, ": exists and is not a directory"));
    if (!fs::is_empty(out, ec))
      return absl::AlreadyExistsError(absl::StrCat("--out ", out, ": directory is not empty (refusing to mix files)"));
    return absl::OkStatus();
  }
  fs::create_directories(out, ec);
  if (ec) return absl::InternalError(absl::StrCat("--out ", out, ": cannot create: ", ec.message()));
  return absl::OkStatus();
}

// InvalidArgument naming the tensor, its file and the first NaN or Inf (flat
// index and row-major coordinates): such a weight trains or evaluates to NaN,
// or, in one embedding row, to a normal-looking loss.
absl::Status CheckFinite(const std::string& name, const std::string& path, const float* v,
                         const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  for (int64_t k = 0; k < n; ++k) {
    if (std::isfinite(v[k])) continue;
    std::vector<int64_t> at(shape.size());
    int64_t rest = k;
    for (size_t d = shape.size(); d-- > 0;) {
      at[d] = shape[d] > 0 ? rest % shape[d] : 0;
      rest = shape[d] > 0 ? rest / shape[d] : 0;
    }
    return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "' in ", path, " has a non-finite value (",
                                                   v[k], ") at element ", k, " ", ShapeStr(at),
                                                   "; refusing to import it"));
  }
  return absl::OkStatus();
}

int JsonIdOr(const json& j, const char* key, int fallback) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_integer()) return fallback;
  return it->get<int>();
}

}  // namespace

absl::StatusOr<QkLayout> ParseQkLayout(const std::string& s) {
  if (s == "hf") return QkLayout::kHf;
  if (s == "meta") return QkLayout::kMeta;
  return absl::InvalidArgumentError(absl::StrCat("--layout: must be 'hf' or 'meta' (got '", s, "')"));
}

void PermuteQkRows(float* w, int heads, int head_dim, int64_t cols, bool to_meta) {
  CHECK(head_dim % 2 == 0) << "PermuteQkRows: odd head_dim " << head_dim;
  const int half = head_dim / 2;
  std::vector<float> tmp(static_cast<size_t>(head_dim) * cols);
  for (int h = 0; h < heads; ++h) {
    float* head = w + static_cast<int64_t>(h) * head_dim * cols;
    std::copy(head, head + tmp.size(), tmp.begin());
    for (int i = 0; i < 2; ++i) {
      for (int j = 0; j < half; ++j) {
        const int hf_row = i * half + j, meta_row = 2 * j + i;
        const int dst = to_meta ? meta_row : hf_row, src = to_meta ? hf_row : meta_row;
        std::copy(tmp.begin() + static_cast<int64_t>(src) * cols, tmp.begin() + static_cast<int64_t>(src + 1) * cols,
                  head + static_cast<int64_t>(dst) * cols);
      }
    }
  }
}

absl::StatusOr<uint64_t> ParseByteSize(const std::string& s) {
  size_t i = 0;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
  if (i == 0 || i > 18) return absl::InvalidArgumentError(absl::StrCat("--max_shard_size: not a size: '", s, "'"));
  const uint64_t n = std::stoull(s.substr(0, i));
  std::string unit = s.substr(i);
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  static const std::map<std::string, uint64_t> kUnits = {
      {"", 1},           {"B", 1},          {"KB", 1000},         {"MB", 1000'000},     {"GB", 1000'000'000},
      {"KIB", 1ull << 10}, {"MIB", 1ull << 20}, {"GIB", 1ull << 30}};
  auto it = kUnits.find(unit);
  if (it == kUnits.end() || n == 0)
    return absl::InvalidArgumentError(
        absl::StrCat("--max_shard_size: '", s, "': want a positive number with B, KB, MB, GB, KiB, MiB or GiB"));
  return n * it->second;
}

absl::StatusOr<std::string> HfArchitectureFor(const ModelDims& d) {
  auto refuse = [](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot export to Hugging Face: ", what,
        "; LlamaForCausalLM, MistralForCausalLM and SmolLM3ForCausalLM have no such option and transformers would "
        "load the weights into a different model without an error, so the export is refused"));
  };
  if (d.roper) return refuse("model.roper is true (RoPER rotates the values)");
  if (d.qk_norm) return refuse("model.qk_norm is true (RMSNorm of q and k per head)");
  if (d.rope_dim != d.head_dim && d.any_rope())
    return refuse(absl::StrCat("model.rope_dim ", d.rope_dim, " != head_dim ", d.head_dim,
                               " (partial RoPE; Llama's apply_rotary_pos_emb rotates whole heads)"));
  const HfArchitecture arch = HfArchitectureOf(d);  // model/hf_config.h: the one label rule
  if (!arch.stock) return refuse("the model computes what no stock class does");
  return std::string(arch.architecture);
}

absl::StatusOr<json> HfExportConfigJson(const ModelDims& d, DType dtype, int bos, int eos) {
  absl::StatusOr<std::string> arch = HfArchitectureFor(d);
  if (!arch.ok()) return arch.status();
  json j;
  j["architectures"] = {*arch};
  j["model_type"] = HfArchitectureOf(d).model_type;
  j["longctx_name"] = d.name;
  j["vocab_size"] = d.vocab;
  j["hidden_size"] = d.hidden;
  j["intermediate_size"] = d.ffn;
  j["num_hidden_layers"] = d.layers;
  j["num_attention_heads"] = d.heads;
  j["num_key_value_heads"] = d.kv_heads;
  j["head_dim"] = d.head_dim;
  j["hidden_act"] = "silu";
  j["max_position_embeddings"] = d.max_positions;
  // The same shortest-round-trip floats as the checkpoint's config.json.
  const json base = HfConfigJson(d, ModelConfig(), bos, eos);
  j["initializer_range"] = base["initializer_range"];
  j["rms_norm_eps"] = base["rms_norm_eps"];
  j["rope_theta"] = base["rope_theta"];
  j["rope_scaling"] = nullptr;
  j["tie_word_embeddings"] = d.tied;
  j["attention_dropout"] = 0.0;
  j["use_cache"] = true;
  j["torch_dtype"] = dtype == DType::kBF16 ? "bfloat16" : "float32";
  j["bos_token_id"] = bos >= 0 ? json(bos) : json(nullptr);
  j["eos_token_id"] = eos >= 0 ? json(eos) : json(nullptr);
  if (*arch == "LlamaForCausalLM") {
    j["attention_bias"] = false;
    j["mlp_bias"] = false;
    j["pretraining_tp"] = 1;
  } else if (*arch == "MistralForCausalLM") {
    j["sliding_window"] = d.window;  // every layer (MistralConfig)
  } else {
    j["attention_bias"] = false;
    j["mlp_bias"] = false;
    json layer_types = json::array(), no_rope = json::array();
    for (int l = 0; l < d.layers; ++l) {
      layer_types.push_back(d.is_sliding(l) ? "sliding_attention" : "full_attention");
      no_rope.push_back(d.uses_rope(l) ? 1 : 0);  // 1 = RoPE, 0 = NoPE (SmolLM3's convention)
    }
    j["no_rope_layers"] = no_rope;
    j["layer_types"] = layer_types;
    j["use_sliding_window"] = d.any_sliding();
    j["sliding_window"] = d.any_sliding() ? json(d.window) : json(nullptr);
    j["max_window_layers"] = d.layers;
  }
  return j;
}

// ---------------------------------------------------------------------------
// Export.

absl::StatusOr<HfExportResult> ExportToHf(const HfExportOptions& o) {
  if (o.checkpoint.empty()) return absl::InvalidArgumentError("--checkpoint is required");
  if (o.dtype != DType::kF32 && o.dtype != DType::kBF16)
    return absl::InvalidArgumentError("--dtype: only f32 and bf16 are supported");
  absl::StatusOr<TrainConfig> config = LoadCheckpointConfig(o.checkpoint);
  if (!config.ok()) return config.status();
  absl::StatusOr<ModelDims> dims = ResolveModelConfig(config->model());
  if (!dims.ok()) return dims.status();
  // bos/eos as the checkpoint's own config.json recorded them (the trainer's tokenizer).
  int bos = -1, eos = -1;
  if (absl::StatusOr<json> own = ReadJsonFile(o.checkpoint + "/" + kHfConfigFile); own.ok()) {
    bos = JsonIdOr(*own, "bos_token_id", -1);
    eos = JsonIdOr(*own, "eos_token_id", -1);
  }
  absl::StatusOr<json> hf = HfExportConfigJson(*dims, o.dtype, bos, eos);
  if (!hf.ok()) return hf.status();
  if (o.layout == QkLayout::kMeta && dims->head_dim % 2 != 0)
    return absl::InvalidArgumentError("--layout meta: head_dim must be even");

  // The weights' size and XXH64 against the checkpoint's manifest.json (a
  // checkpoint from before manifests passes with a warning).
  LONGCTX_RETURN_IF_ERROR(VerifyCheckpointFile(o.checkpoint, kModelFile));
  const std::string src = o.checkpoint + "/" + kModelFile;
  absl::StatusOr<SafetensorsReader> reader = SafetensorsReader::Open(src);
  if (!reader.ok()) return reader.status();
  LONGCTX_RETURN_IF_ERROR(PrepareOutDir(o.out));

  // Every tensor in F32 on the host, in the layout's order (embedding first,
  // then layer by layer: consecutive tensors stay in one shard).
  const ParamLayout layout(*dims);
  std::vector<std::vector<float>> host(layout.slices().size());
  std::vector<SafetensorsEntry> entries;
  for (size_t i = 0; i < layout.slices().size(); ++i) {
    const ParamSlice& s = layout.slices()[i];
    host[i].resize(s.numel());
    LONGCTX_RETURN_IF_ERROR(reader->ReadInto(s.name, host[i].data(), DType::kF32, s.shape));
    if (o.layout == QkLayout::kMeta && IsQk(s.name))
      PermuteQkRows(host[i].data(), static_cast<int>(s.shape[0] / dims->head_dim), dims->head_dim, s.shape[1],
                    /*to_meta=*/true);
    SafetensorsEntry e;
    e.name = s.name;
    e.dtype = o.dtype;
    e.source_dtype = DType::kF32;  // F32 -> BF16 rounds to nearest even in the writer
    e.shape = s.shape;
    e.data = host[i].data();
    entries.push_back(std::move(e));
  }

  // Greedy sharding in layout order: a tensor starts a new shard when adding
  // it would pass max_shard_bytes (a single larger tensor gets a shard alone).
  std::vector<std::vector<SafetensorsEntry>> shards(1);
  uint64_t cur = 0, total = 0;
  for (SafetensorsEntry& e : entries) {
    uint64_t bytes = DTypeSize(o.dtype);
    for (int64_t d : e.shape) bytes *= static_cast<uint64_t>(d);
    if (cur > 0 && cur + bytes > o.max_shard_bytes) {
      shards.emplace_back();
      cur = 0;
    }
    cur += bytes;
    total += bytes;
    shards.back().push_back(std::move(e));
  }
  HfExportResult result;
  result.architecture = (*hf)["architectures"][0].get<std::string>();
  result.num_shards = static_cast<int>(shards.size());
  result.total_size = total;
  const std::map<std::string, std::string> meta = {{"format", "pt"}};
  if (shards.size() == 1) {
    LONGCTX_RETURN_IF_ERROR(WriteSafetensors(o.out + "/" + kModelFile, shards[0], meta));
    result.files.push_back(kModelFile);
  } else {
    json weight_map = json::object();
    for (size_t k = 0; k < shards.size(); ++k) {
      const std::string file = absl::StrFormat("model-%05d-of-%05d.safetensors", k + 1, shards.size());
      LONGCTX_RETURN_IF_ERROR(WriteSafetensors(o.out + "/" + file, shards[k], meta));
      for (const SafetensorsEntry& e : shards[k]) weight_map[e.name] = file;
      result.files.push_back(file);
    }
    const json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
    LONGCTX_RETURN_IF_ERROR(WriteFileAtomic(o.out + "/" + kIndexFile, index.dump(2) + "\n"));
    result.files.push_back(kIndexFile);
  }
  LONGCTX_RETURN_IF_ERROR(WriteFileAtomic(o.out + "/config.json", hf->dump(2) + "\n"));
  result.files.push_back("config.json");
  json gen = {{"_from_model_config", true}};
  gen["bos_token_id"] = bos >= 0 ? json(bos) : json(nullptr);
  gen["eos_token_id"] = eos >= 0 ? json(eos) : json(nullptr);
  LONGCTX_RETURN_IF_ERROR(WriteFileAtomic(o.out + "/generation_config.json", gen.dump(2) + "\n"));
  result.files.push_back("generation_config.json");
  absl::StatusOr<std::vector<std::string>> tok =
      WriteHfTokenizerFiles(config->data().tokenizer(), dims->max_positions, o.out);
  if (!tok.ok()) return tok.status();
  result.files.insert(result.files.end(), tok->begin(), tok->end());
  std::sort(result.files.begin(), result.files.end());
  return result;
}

// ---------------------------------------------------------------------------
// Import.

absl::StatusOr<ModelConfig> ModelConfigFromHfCheckpointJson(const json& in, std::string* architecture) {
  if (!in.is_object()) return absl::InvalidArgumentError("config.json: not a JSON object");
  auto arch_it = in.find("architectures");
  if (arch_it == in.end() || !arch_it->is_array() || arch_it->size() != 1 || !(*arch_it)[0].is_string())
    return absl::InvalidArgumentError(
        absl::StrCat("config.json: architectures: want a list of one class name (got ",
                     arch_it == in.end() ? "nothing" : arch_it->dump(), ")"));
  const std::string arch = (*arch_it)[0].get<std::string>();
  static const std::map<std::string, std::string> kTypes = {{"LlamaForCausalLM", "llama"},
                                                            {"MistralForCausalLM", "mistral"},
                                                            {"SmolLM3ForCausalLM", "smollm3"}};
  auto t = kTypes.find(arch);
  if (t == kTypes.end())
    return absl::InvalidArgumentError(absl::StrCat(
        "config.json: architectures: unknown architecture '", arch,
        "' (supported: LlamaForCausalLM, MistralForCausalLM, SmolLM3ForCausalLM)"));
  if (auto mt = in.find("model_type"); mt != in.end() && *mt != t->second)
    return absl::InvalidArgumentError(absl::StrCat("config.json: model_type: ", mt->dump(), " does not match ",
                                                   arch, " (want \"", t->second, "\")"));
  // Keep only what the class reads; the longctx_* keys of a longctx
  // checkpoint would otherwise override what transformers computes.
  json j = in;
  for (auto it = j.begin(); it != j.end();) {
    if (it.key().rfind("longctx_", 0) == 0 && it.key() != "longctx_name") {
      it = j.erase(it);
    } else {
      ++it;
    }
  }
  j.erase("use_qk_norm");
  const int layers = in.value("num_hidden_layers", 0);
  if (arch == "LlamaForCausalLM") {
    for (const char* k : {"layer_types", "sliding_window", "no_rope_layers"}) j.erase(k);
  } else if (arch == "MistralForCausalLM") {
    j.erase("no_rope_layers");
    j.erase("layer_types");
    if (j.contains("sliding_window") && !j["sliding_window"].is_null() && layers > 0)
      j["layer_types"] = json(std::vector<std::string>(layers, "sliding_attention"));
  } else {  // SmolLM3
    if (!j.contains("no_rope_layers") || j["no_rope_layers"].is_null()) {
      int interval = 4;
      if (auto it = j.find("no_rope_layer_interval"); it != j.end() && it->is_number_integer())
        interval = it->get<int>();
      if (interval <= 0) return absl::InvalidArgumentError("config.json: no_rope_layer_interval: must be > 0");
      json v = json::array();
      for (int i = 0; i < layers; ++i) v.push_back((i + 1) % interval != 0 ? 1 : 0);
      j["no_rope_layers"] = v;
    }
    const bool use_sw = j.value("use_sliding_window", false);
    const bool has_sw = j.contains("sliding_window") && !j["sliding_window"].is_null();
    if (!j.contains("layer_types") || j["layer_types"].is_null()) {
      // SmolLM3Config's default: the NoPE layers slide when use_sliding_window.
      json v = json::array();
      for (int i = 0; i < layers; ++i)
        v.push_back(use_sw && has_sw && j["no_rope_layers"][i] == 0 ? "sliding_attention" : "full_attention");
      j["layer_types"] = v;
    }
    bool any_sliding = false;
    if (j["layer_types"].is_array())
      for (const json& v : j["layer_types"]) any_sliding |= v == "sliding_attention";
    if (any_sliding && !use_sw)
      return absl::InvalidArgumentError(
          "config.json: use_sliding_window: false while layer_types has \"sliding_attention\" layers "
          "(ambiguous: set use_sliding_window true or make those layers full_attention)");
  }
  absl::StatusOr<ModelConfig> c = ModelConfigFromHfJson(j);
  if (!c.ok()) return c.status();
  // A longctx checkpoint's own config.json (before `convert`) says
  // LlamaForCausalLM whatever its layers are: read as transformers reads it,
  // an RNoPE-SWA one would become all-RoPE silently. Refuse the mismatch.
  if (auto k = in.find("longctx_attention_kinds"); k != in.end() && k->is_array()) {
    absl::StatusOr<ModelDims> d = ResolveModelConfig(*c);
    if (!d.ok()) return d.status();
    std::vector<std::string> as_hf;
    for (AttentionKind kind : d->kinds) as_hf.push_back(AttentionKind_Name(kind));
    if (*k != json(as_hf))
      return absl::InvalidArgumentError(absl::StrCat(
          "config.json: longctx_attention_kinds ", k->dump(), " disagree with what ", arch, " computes (",
          json(as_hf).dump(), "): this is a longctx checkpoint written before `longctx convert`; use the "
          "directory as it is (eval, train --init_from) or export it with `longctx convert --to hf`"));
  }
  if (architecture != nullptr) *architecture = arch;
  return c;
}

namespace {

std::string GuessTokenizer(int vocab) {
  if (vocab == 128256) return "llama3";
  if (vocab == 32000) return "llama2";
  return "byte";
}

}  // namespace

absl::StatusOr<HfImportResult> ImportFromHf(const HfImportOptions& o) {
  if (o.hf.empty()) return absl::InvalidArgumentError("--hf is required");
  absl::StatusOr<json> cj = ReadJsonFile(o.hf + "/config.json");
  if (!cj.ok()) return cj.status();
  HfImportResult result;
  absl::StatusOr<ModelConfig> model = ModelConfigFromHfCheckpointJson(*cj, &result.architecture);
  if (!model.ok()) return model.status();
  absl::StatusOr<ModelDims> dims = ResolveModelConfig(*model);
  if (!dims.ok()) return dims.status();
  if (o.layout == QkLayout::kMeta && dims->head_dim % 2 != 0)
    return absl::InvalidArgumentError("--layout meta: head_dim must be even");

  // name -> file: the index's weight_map, or every tensor of model.safetensors.
  std::map<std::string, std::string> where;
  std::map<std::string, std::unique_ptr<SafetensorsReader>> readers;
  const std::string index_path = o.hf + "/" + kIndexFile;
  std::error_code ec;
  if (fs::exists(index_path, ec)) {
    absl::StatusOr<json> index = ReadJsonFile(index_path);
    if (!index.ok()) return index.status();
    auto wm = index->find("weight_map");
    if (wm == index->end() || !wm->is_object() || wm->empty())
      return absl::InvalidArgumentError(absl::StrCat(index_path, ": weight_map: missing or empty"));
    for (auto it = wm->begin(); it != wm->end(); ++it) {
      if (!it.value().is_string() || it.value().get<std::string>().find('/') != std::string::npos)
        return absl::InvalidArgumentError(
            absl::StrCat(index_path, ": weight_map[\"", it.key(), "\"]: want a file name in the same directory"));
      where[it.key()] = it.value().get<std::string>();
    }
  } else {
    auto r = SafetensorsReader::Open(o.hf + "/" + kModelFile);
    if (!r.ok())
      return absl::Status(r.status().code(), absl::StrCat("no ", kIndexFile, " and ", r.status().message()));
    for (const std::string& n : r->names()) where[n] = kModelFile;
    readers[kModelFile] = std::make_unique<SafetensorsReader>(*std::move(r));
  }
  for (const auto& [name, file] : where) {
    if (readers.count(file)) continue;
    auto r = SafetensorsReader::Open(o.hf + "/" + file);
    if (!r.ok()) return r.status();
    readers[file] = std::make_unique<SafetensorsReader>(*std::move(r));
  }
  result.shards = static_cast<int>(readers.size());
  // A tensor in two files: the index's copy would win without a word, and
  // nothing says which one the model was trained with.
  {
    std::map<std::string, std::string> first_file;
    for (const auto& [file, r] : readers)
      for (const std::string& n : r->names()) {
        auto [it, fresh] = first_file.emplace(n, file);
        if (fresh) continue;
        auto w = where.find(n);
        return absl::InvalidArgumentError(absl::StrCat(
            "tensor '", n, "' is in two shards, ", o.hf, "/", it->second, " and ", o.hf, "/", file,
            w != where.end() ? absl::StrCat(" (", kIndexFile, " maps it to ", w->second, ")") : std::string(),
            "; refusing to guess which copy is the model's: remove the other"));
      }
  }

  const ParamLayout layout(*dims);
  std::set<std::string> used;
  for (const ParamSlice& s : layout.slices()) used.insert(s.name);
  for (const auto& [name, file] : where) {
    if (used.count(name)) continue;
    if (name.find("rotary_emb.inv_freq") != std::string::npos) continue;  // old transformers buffers
    if (name == "lm_head.weight" && dims->tied) continue;                  // tied: checked equal below
    return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "' in ", o.hf, "/", file,
                                                   " has no place in a ", result.architecture,
                                                   " with this config.json"));
  }
  std::vector<std::vector<float>> host(layout.slices().size());
  std::vector<SafetensorsEntry> entries;
  for (size_t i = 0; i < layout.slices().size(); ++i) {
    const ParamSlice& s = layout.slices()[i];
    auto w = where.find(s.name);
    if (w == where.end())
      return absl::NotFoundError(absl::StrCat("tensor '", s.name, "' is missing from ", o.hf,
                                              " (", result.architecture, " with config.json's sizes needs it)"));
    const SafetensorsReader& r = *readers[w->second];
    absl::StatusOr<SafetensorsTensorInfo> info = r.Info(s.name);
    if (!info.ok())
      return absl::NotFoundError(absl::StrCat("tensor '", s.name, "': ", kIndexFile, " maps it to ", w->second,
                                              ", which does not hold it"));
    if (info->shape != s.shape)
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor '", s.name, "' in ", r.path(), " has shape ", ShapeStr(info->shape), " but config.json (hidden_size ",
          dims->hidden, ", num_attention_heads ", dims->heads, ", num_key_value_heads ", dims->kv_heads,
          ", head_dim ", dims->head_dim, ", intermediate_size ", dims->ffn, ", vocab_size ", dims->vocab,
          ") implies ", ShapeStr(s.shape)));
    if (info->dtype_name != "F32" && info->dtype_name != "BF16" && info->dtype_name != "F16")
      return absl::InvalidArgumentError(absl::StrCat("tensor '", s.name, "' in ", r.path(), ": dtype ",
                                                     info->dtype_name, " (import reads F32, BF16 and F16)"));
    host[i].resize(s.numel());
    LONGCTX_RETURN_IF_ERROR(r.ReadInto(s.name, host[i].data(), DType::kF32, s.shape));
    LONGCTX_RETURN_IF_ERROR(CheckFinite(s.name, r.path(), host[i].data(), s.shape));
    if (o.layout == QkLayout::kMeta && IsQk(s.name))
      PermuteQkRows(host[i].data(), static_cast<int>(s.shape[0] / dims->head_dim), dims->head_dim, s.shape[1],
                    /*to_meta=*/false);
    SafetensorsEntry e;
    e.name = s.name;
    e.shape = s.shape;
    e.data = host[i].data();
    entries.push_back(std::move(e));
  }
  result.tensors = static_cast<int>(entries.size());
  result.model = *model;
  // tie_word_embeddings with an lm_head.weight in the files: transformers ties
  // (the file's lm_head is dropped), other readers may use it. Only when the
  // two are the same values is there one model to import.
  if (auto lm = where.find("lm_head.weight"); dims->tied && lm != where.end()) {
    const SafetensorsReader& r = *readers[lm->second];
    size_t emb = 0;
    while (emb < layout.slices().size() && layout.slices()[emb].name != "model.embed_tokens.weight") ++emb;
    if (emb == layout.slices().size()) return absl::InternalError("import: the layout has no model.embed_tokens.weight");
    const ParamSlice& es = layout.slices()[emb];
    absl::StatusOr<SafetensorsTensorInfo> info = r.Info(lm->first);
    if (!info.ok()) return info.status();
    if (info->shape != es.shape)
      return absl::InvalidArgumentError(absl::StrCat(
          "config.json: tie_word_embeddings is true, but ", r.path(), " holds an lm_head.weight of shape ",
          ShapeStr(info->shape), ", not the embedding's ", ShapeStr(es.shape),
          ": set tie_word_embeddings false to import an untied model, or remove lm_head.weight"));
    std::vector<float> head(static_cast<size_t>(es.numel()));
    LONGCTX_RETURN_IF_ERROR(r.ReadInto(lm->first, head.data(), DType::kF32, es.shape));
    for (int64_t k = 0; k < es.numel(); ++k)
      if (std::memcmp(&head[k], &host[emb][k], sizeof(float)) != 0)
        return absl::InvalidArgumentError(absl::StrCat(
            "config.json: tie_word_embeddings is true, but lm_head.weight in ", r.path(),
            " differs from model.embed_tokens.weight (first at element ", k, ": ", head[k], " vs ", host[emb][k],
            "); transformers would use the embedding for both and drop lm_head.weight, so which model this is "
            "is ambiguous: set tie_word_embeddings false in config.json to import both (untied), or remove "
            "lm_head.weight to keep them tied"));
  }

  LONGCTX_RETURN_IF_ERROR(PrepareOutDir(o.out));
  LONGCTX_RETURN_IF_ERROR(WriteSafetensors(o.out + "/" + kModelFile, entries, {{"format", "pt"}}));
  TrainConfig tc;
  *tc.mutable_model() = *model;
  tc.mutable_data()->set_tokenizer(o.tokenizer.empty() ? GuessTokenizer(dims->vocab) : o.tokenizer);
  const int bos = JsonIdOr(*cj, "bos_token_id", -1), eos = JsonIdOr(*cj, "eos_token_id", -1);
  LONGCTX_RETURN_IF_ERROR(
      WriteFileAtomic(o.out + "/" + kHfConfigFile, HfConfigJson(*dims, *model, bos, eos).dump(2) + "\n"));
  LONGCTX_RETURN_IF_ERROR(
      WriteFileAtomic(o.out + "/" + kTrainConfigFile, ToTextProto(tc, /*include_defaults=*/true)));
  const json state = {{"step", 0}, {"imported_from", o.hf}, {"architecture", result.architecture}};
  LONGCTX_RETURN_IF_ERROR(WriteFileAtomic(o.out + "/" + kTrainerStateFile, state.dump(2) + "\n"));
  // What loading checks the files against (a full layout, like a
  // consolidated checkpoint's), so a fresh import verifies.
  std::map<std::string, FileDigest> digests;
  for (const char* f : {kModelFile, kHfConfigFile, kTrainConfigFile, kTrainerStateFile}) {
    absl::StatusOr<FileDigest> d = HashFile(o.out + "/" + f);
    if (!d.ok()) return d.status();
    digests[f] = *d;
  }
  std::vector<int64_t> buffer_sizes;
  for (int b = 0; b < layout.num_buffers(); ++b) buffer_sizes.push_back(layout.buffer_size(b));
  LONGCTX_RETURN_IF_ERROR(WriteManifest(o.out, 0, 1, DDP, {{"kind", "full"}, {"buffer_sizes", buffer_sizes}}, digests));
  return result;
}

}  // namespace longctx
