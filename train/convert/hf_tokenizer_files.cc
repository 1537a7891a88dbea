// Why: see hf_tokenizer_files.h. The chat templates are the Llama 3 and
// Llama 2 chat formats (Jinja, as tokenizer_config.json's chat_template).
#include "train/convert/hf_tokenizer_files.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "data/tokenizer_files.h"
#include "base/status_macros.h"
#include "train/checkpoint/checkpoint_dir.h"

namespace longctx {
namespace {

using json = nlohmann::json;

constexpr char kLlama3Chat[] =
    "{{ bos_token }}{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + "
    "'<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}";

constexpr char kLlama2Chat[] =
    "{% if messages[0]['role'] == 'system' %}{% set system = '<<SYS>>\\n' + messages[0]['content'] | trim + "
    "'\\n<</SYS>>\\n\\n' %}{% set messages = messages[1:] %}{% else %}{% set system = '' %}{% endif %}"
    "{% for message in messages %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + "
    "(system if loop.first else '') + message['content'] | trim + ' [/INST]' }}{% elif message['role'] == "
    "'assistant' %}{{ ' ' + message['content'] | trim + ' ' + eos_token }}{% endif %}{% endfor %}";

json AddedToken(int id, const std::string& content) {
  return {{"id", id},           {"content", content}, {"single_word", false}, {"lstrip", false},
          {"rstrip", false},    {"normalized", false}, {"special", true}};
}

json BosTemplate(const std::string& bos, int bos_id) {
  return {{"type", "TemplateProcessing"},
          {"single", json::array({{{"SpecialToken", {{"id", bos}, {"type_id", 0}}}},
                                  {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
          {"pair", json::array({{{"SpecialToken", {{"id", bos}, {"type_id", 0}}}},
                                {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
                                {{"SpecialToken", {{"id", bos}, {"type_id", 1}}}},
                                {{"Sequence", {{"id", "B"}, {"type_id", 1}}}}})},
          {"special_tokens", {{bos, {{"id", bos}, {"ids", {bos_id}}, {"tokens", {bos}}}}}}};
}

// Code-point boundaries of a UTF-8 string (1..size-1).
std::vector<size_t> CharBoundaries(const std::string& s) {
  std::vector<size_t> out;
  for (size_t i = 1; i < s.size(); ++i)
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) out.push_back(i);
  return out;
}

}  // namespace

json Llama2TokenizerJson(const json& f) {
  const json& pieces = f["pieces"];
  json vocab = json::object();
  std::map<std::string, int> ids;
  for (size_t i = 0; i < pieces.size(); ++i) {
    const std::string p = pieces[i]["piece"].get<std::string>();
    vocab[p] = static_cast<int>(i);
    ids[p] = static_cast<int>(i);
  }
  // transformers' SentencePieceExtractor: for every piece, every split into
  // two pieces of the vocabulary; sorted by (left id, right id), then stably
  // by the merged piece's score, highest first.
  struct Merge {
    double score;
    int left, right;
    std::string l, r;
  };
  std::vector<Merge> merges;
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (pieces[i].value("type", "normal") != "normal") continue;
    const std::string p = pieces[i]["piece"].get<std::string>();
    const double score = pieces[i].value("score", 0.0);
    for (size_t cut : CharBoundaries(p)) {
      const std::string l = p.substr(0, cut), r = p.substr(cut);
      auto li = ids.find(l), ri = ids.find(r);
      if (li != ids.end() && ri != ids.end()) merges.push_back({score, li->second, ri->second, l, r});
    }
  }
  std::sort(merges.begin(), merges.end(),
            [](const Merge& a, const Merge& b) { return std::tie(a.left, a.right) < std::tie(b.left, b.right); });
  std::stable_sort(merges.begin(), merges.end(), [](const Merge& a, const Merge& b) { return a.score > b.score; });
  json merge_list = json::array();
  for (const Merge& m : merges) merge_list.push_back(json::array({m.l, m.r}));
  const int unk = f.value("unk_id", 0), bos = f.value("bos_id", 1), eos = f.value("eos_id", 2);
  const std::string unk_s = pieces[unk]["piece"], bos_s = pieces[bos]["piece"], eos_s = pieces[eos]["piece"];
  json j;
  j["version"] = "1.0";
  j["truncation"] = nullptr;
  j["padding"] = nullptr;
  j["added_tokens"] = json::array({AddedToken(unk, unk_s), AddedToken(bos, bos_s), AddedToken(eos, eos_s)});
  j["normalizer"] = {{"type", "Sequence"},
                     {"normalizers", json::array({{{"type", "Prepend"}, {"prepend", "\u2581"}},
                                                  {{"type", "Replace"},
                                                   {"pattern", {{"String", " "}}},
                                                   {"content", "\u2581"}}})}};
  j["pre_tokenizer"] = nullptr;
  j["post_processor"] = BosTemplate(bos_s, bos);
  j["decoder"] = {{"type", "Sequence"},
                  {"decoders", json::array({{{"type", "Replace"}, {"pattern", {{"String", "\u2581"}}}, {"content", " "}},
                                            {{"type", "ByteFallback"}},
                                            {{"type", "Fuse"}},
                                            {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}})}};
  j["model"] = {{"type", "BPE"},         {"dropout", nullptr},  {"unk_token", unk_s},
                {"continuing_subword_prefix", nullptr},        {"end_of_word_suffix", nullptr},
                {"fuse_unk", true},      {"byte_fallback", true}, {"ignore_merges", false},
                {"vocab", vocab},        {"merges", merge_list}};
  return j;
}

absl::StatusOr<std::vector<std::string>> WriteHfTokenizerFiles(const std::string& tokenizer, int model_max_length,
                                                              const std::string& out) {
  if (tokenizer != "llama3" && tokenizer != "llama2") return std::vector<std::string>{};
  absl::StatusOr<std::string> path = FindTokenizerFile(tokenizer);
  if (!path.ok()) return path.status();
  absl::StatusOr<json> src = ReadJsonFile(*path);
  if (!src.ok()) return src.status();
  json tok, cfg;
  std::string bos, eos;
  if (tokenizer == "llama3") {
    tok = *src;
    bos = "<|begin_of_text|>";
    eos = "<|end_of_text|>";
    int bos_id = -1;
    for (const json& a : tok["added_tokens"])
      if (a["content"] == bos && a["id"].is_number_integer()) bos_id = a["id"].get<int>();
    if (bos_id < 0) return absl::DataLossError(absl::StrCat(*path, ": no added token ", bos));
    tok["post_processor"] = BosTemplate(bos, bos_id);
    cfg["chat_template"] = kLlama3Chat;
    cfg["tokenizer_class"] = "PreTrainedTokenizerFast";
  } else {
    tok = Llama2TokenizerJson(*src);
    bos = tok["added_tokens"][1]["content"];
    eos = tok["added_tokens"][2]["content"];
    cfg["unk_token"] = tok["added_tokens"][0]["content"];
    cfg["chat_template"] = kLlama2Chat;
    cfg["tokenizer_class"] = "LlamaTokenizerFast";
    cfg["add_bos_token"] = true;
    cfg["add_eos_token"] = false;
  }
  cfg["bos_token"] = bos;
  cfg["eos_token"] = eos;
  cfg["model_max_length"] = model_max_length;
  cfg["clean_up_tokenization_spaces"] = false;
  json special = {{"bos_token", bos}, {"eos_token", eos}};
  if (cfg.contains("unk_token")) special["unk_token"] = cfg["unk_token"];
  LONGCTX_RETURN_IF_ERROR(WriteFileAtomic(out + "/tokenizer.json", tok.dump() + "\n"));
  LONGCTX_RETURN_IF_ERROR(WriteFileAtomic(out + "/tokenizer_config.json", cfg.dump(2) + "\n"));
  LONGCTX_RETURN_IF_ERROR(WriteFileAtomic(out + "/special_tokens_map.json", special.dump(2) + "\n"));
  return std::vector<std::string>{"special_tokens_map.json", "tokenizer.json", "tokenizer_config.json"};
}

}  // namespace longctx
