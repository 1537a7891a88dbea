// Why: see llama3_tokenizer.h. Loading validates everything the encoder relies
// on (the pre-tokenizer, the byte-level alphabet, that every merge yields a
// vocabulary token) so that an unsupported file fails at load time with a
// message instead of producing wrong ids.
#include "data/llama3_tokenizer.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "data/llama3_pretokenizer.h"
#include "data/tokenizer_files.h"
#include "data/unicode_classes.h"

namespace longctx {
namespace {

using nlohmann::json;

absl::Status Invalid(const std::string& name, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("tokenizer ", name, ": ", what));
}

// Inverse of ByteToUnicode: code point → byte, -1 for code points outside the
// alphabet (all of which are < 0x200).
const std::array<int16_t, 0x200>& UnicodeToByte() {
  static const std::array<int16_t, 0x200> table = [] {
    std::array<int16_t, 0x200> t;
    t.fill(-1);
    for (int b = 0; b < 256; ++b) t[ByteToUnicode()[b]] = static_cast<int16_t>(b);
    return t;
  }();
  return table;
}

// A byte-level token string (e.g. "Ġthe") → its bytes (" the"); false when it
// has a code point outside the alphabet.
bool ByteLevelToBytes(std::string_view s, std::string* out) {
  out->clear();
  for (size_t i = 0; i < s.size();) {
    char32_t cp;
    i += DecodeUtf8(s, i, &cp);
    if (cp >= 0x200 || UnicodeToByte()[cp] < 0) return false;
    out->push_back(static_cast<char>(UnicodeToByte()[cp]));
  }
  return true;
}

bool IsNullOrEmpty(const json& j, const char* key) {
  if (!j.contains(key) || j[key].is_null()) return true;
  return j[key].is_string() && j[key].get<std::string>().empty();
}

// The pre_tokenizer must be Meta's: Split(Llama-3 regex, Isolated) then
// ByteLevel(add_prefix_space false, use_regex false).
absl::Status CheckPreTokenizer(const json& j, const std::string& name) {
  const std::string want = "the Llama-3 pre_tokenizer (Sequence of Split with the Llama-3 regex, behavior Isolated, "
                           "then ByteLevel with use_regex false)";
  if (!j.contains("pre_tokenizer") || !j["pre_tokenizer"].is_object())
    return Invalid(name, "no pre_tokenizer; longctx supports only " + want);
  const json& pt = j["pre_tokenizer"];
  if (pt.value("type", "") != "Sequence" || !pt.contains("pretokenizers") || !pt["pretokenizers"].is_array() ||
      pt["pretokenizers"].size() != 2)
    return Invalid(name, "unsupported pre_tokenizer " + pt.dump().substr(0, 200) + "; longctx supports only " + want);
  const json& split = pt["pretokenizers"][0];
  const json& bl = pt["pretokenizers"][1];
  const bool split_ok = split.value("type", "") == "Split" && split.contains("pattern") &&
                        split["pattern"].is_object() && split["pattern"].value("Regex", "") == kLlama3SplitRegex &&
                        split.value("behavior", "") == "Isolated" && !split.value("invert", false);
  const bool bl_ok = bl.value("type", "") == "ByteLevel" && !bl.value("add_prefix_space", false) &&
                     !bl.value("use_regex", true);
  if (!split_ok || !bl_ok)
    return Invalid(name, "unsupported pre_tokenizer " + pt.dump().substr(0, 300) + "; longctx supports only " + want);
  return absl::OkStatus();
}

}  // namespace

const std::array<char32_t, 256>& ByteToUnicode() {
  static const std::array<char32_t, 256> table = [] {
    std::array<char32_t, 256> t{};
    std::array<bool, 256> printable{};
    for (int b = '!'; b <= '~'; ++b) printable[b] = true;
    for (int b = 0xA1; b <= 0xAC; ++b) printable[b] = true;
    for (int b = 0xAE; b <= 0xFF; ++b) printable[b] = true;
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) t[b] = printable[b] ? static_cast<char32_t>(b) : next++;
    return t;
  }();
  return table;
}

absl::StatusOr<std::unique_ptr<Llama3Tokenizer>> Llama3Tokenizer::FromFile(const std::string& path,
                                                                           std::string name) {
  absl::StatusOr<json> j = ReadJsonFile(path);
  if (!j.ok()) return j.status();
  absl::StatusOr<std::unique_ptr<Llama3Tokenizer>> t = FromJson(*j, std::move(name));
  if (!t.ok()) return absl::Status(t.status().code(), absl::StrCat(path, ": ", t.status().message()));
  return t;
}

absl::StatusOr<std::unique_ptr<Llama3Tokenizer>> Llama3Tokenizer::FromJson(const json& j, std::string name) {
  std::unique_ptr<Llama3Tokenizer> t(new Llama3Tokenizer());
  t->name_ = name;
  try {
    if (!j.is_object() || !j.contains("model") || !j["model"].is_object())
      return Invalid(name, "not a tokenizer.json (no \"model\" object)");
    const json& model = j["model"];
    if (model.value("type", "BPE") != "BPE")
      return Invalid(name, "model.type is " + model.value("type", "") + "; only BPE is supported");
    if (model.value("byte_fallback", false))
      return Invalid(name, "model.byte_fallback is set (a SentencePiece-style tokenizer.json); not supported");
    if (model.contains("dropout") && !model["dropout"].is_null() && model["dropout"].get<double>() != 0.0)
      return Invalid(name, "model.dropout is set; not supported");
    if (!IsNullOrEmpty(model, "continuing_subword_prefix") || !IsNullOrEmpty(model, "end_of_word_suffix"))
      return Invalid(name, "continuing_subword_prefix/end_of_word_suffix are not supported");
    if (j.contains("normalizer") && !j["normalizer"].is_null())
      return Invalid(name, "a normalizer is not supported (Llama-3 has none)");
    absl::Status st = CheckPreTokenizer(j, name);
    if (!st.ok()) return st;
    t->ignore_merges_ = model.value("ignore_merges", false);

    if (!model.contains("vocab") || !model["vocab"].is_object()) return Invalid(name, "model.vocab missing");
    const json& vocab = model["vocab"];
    int32_t max_id = -1;
    std::vector<std::pair<int32_t, std::string>> entries;
    entries.reserve(vocab.size());
    std::string bytes;
    for (auto it = vocab.begin(); it != vocab.end(); ++it) {
      // An integer, not any number: get<int64_t>() of 1e300 is undefined behaviour and of 1.5 is 1.
      if (!it.value().is_number_integer())
        return Invalid(name, absl::StrCat("vocab id of \"", it.key(), "\" is ", it.value().dump(), ", not an integer"));
      const int64_t id = it.value().get<int64_t>();
      if (id < 0 || id >= (int64_t{1} << 24)) return Invalid(name, absl::StrCat("vocab id ", id, " out of range"));
      if (!ByteLevelToBytes(it.key(), &bytes))
        return Invalid(name, "vocab token \"" + it.key() + "\" is not in the byte-level alphabet");
      entries.emplace_back(static_cast<int32_t>(id), bytes);
      max_id = std::max(max_id, static_cast<int32_t>(id));
    }
    std::vector<std::pair<int32_t, std::string>> added;
    if (j.contains("added_tokens") && j["added_tokens"].is_array()) {
      for (const json& a : j["added_tokens"]) {
        if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer())
          return Invalid(name, "added token without an integer id: " + a.dump());
        const int64_t id = a.at("id").get<int64_t>();
        const std::string content = a.at("content").get<std::string>();
        if (id < 0 || id >= (int64_t{1} << 24) || content.empty())
          return Invalid(name, "bad added token " + a.dump());
        if (a.value("lstrip", false) || a.value("rstrip", false) || a.value("single_word", false))
          return Invalid(name, "added token " + content + ": lstrip/rstrip/single_word are not supported");
        added.emplace_back(static_cast<int32_t>(id), content);
        max_id = std::max(max_id, static_cast<int32_t>(id));
      }
    }
    t->vocab_size_ = max_id + 1;
    t->token_bytes_.assign(t->vocab_size_, std::string());
    std::vector<bool> used(t->vocab_size_, false);
    for (auto& [id, b] : entries) {
      if (used[id]) return Invalid(name, absl::StrCat("vocab id ", id, " used twice"));
      used[id] = true;
      if (!t->regular_ids_.emplace(b, id).second) return Invalid(name, "vocab token listed twice");
      t->token_bytes_[id] = std::move(b);
    }
    for (int b = 0; b < 256; ++b) {
      auto found = t->regular_ids_.find(std::string(1, static_cast<char>(b)));
      if (found == t->regular_ids_.end())
        return Invalid(name, absl::StrCat("no token for byte ", b, "; not a byte-level vocabulary"));
      t->byte_ids_[b] = found->second;
    }
    for (auto& [id, content] : added) {
      if (used[id]) {
        // Hugging Face allows an added token that repeats a vocab entry; it
        // must then be the same token.
        if (t->token_bytes_[id] != content) return Invalid(name, absl::StrCat("added token id ", id, " clashes"));
      }
      used[id] = true;
      t->token_bytes_[id] = content;
      t->added_ids_[content] = id;
      t->added_first_byte_[static_cast<unsigned char>(content[0])] = true;
      if (std::find(t->added_lengths_.begin(), t->added_lengths_.end(), content.size()) == t->added_lengths_.end())
        t->added_lengths_.push_back(content.size());
    }
    std::sort(t->added_lengths_.rbegin(), t->added_lengths_.rend());

    if (!model.contains("merges") || !model["merges"].is_array()) return Invalid(name, "model.merges missing");
    std::string lb, rb;
    for (const json& m : model["merges"]) {
      std::string l, r;
      if (m.is_string()) {
        const std::string s = m.get<std::string>();
        const size_t sp = s.find(' ');
        if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
          return Invalid(name, "merge \"" + s + "\" is not \"left right\"");
        l = s.substr(0, sp);
        r = s.substr(sp + 1);
      } else if (m.is_array() && m.size() == 2) {
        l = m[0].get<std::string>();
        r = m[1].get<std::string>();
      } else {
        return Invalid(name, "bad merge " + m.dump());
      }
      if (!ByteLevelToBytes(l, &lb) || !ByteLevelToBytes(r, &rb))
        return Invalid(name, "merge \"" + l + " " + r + "\" is not in the byte-level alphabet");
      auto li = t->regular_ids_.find(lb), ri = t->regular_ids_.find(rb), oi = t->regular_ids_.find(lb + rb);
      if (li == t->regular_ids_.end() || ri == t->regular_ids_.end() || oi == t->regular_ids_.end())
        return Invalid(name, "merge \"" + l + " " + r + "\" uses or yields a token not in the vocab");
      t->merges_.Add(li->second, ri->second, oi->second);
    }

    auto special = [&](const char* s) {
      auto it = t->added_ids_.find(s);
      return it == t->added_ids_.end() ? -1 : it->second;
    };
    t->bos_ = special("<|begin_of_text|>");
    t->eos_ = special("<|end_of_text|>");
    t->pad_ = special("<|finetune_right_pad_id|>");
    if (t->bos_ < 0 || t->eos_ < 0)
      return Invalid(name, "added_tokens lack <|begin_of_text|> or <|end_of_text|> (Llama-3 BOS/EOS)");
    if (t->pad_ < 0) t->pad_ = t->eos_;
  } catch (const json::exception& e) {
    return Invalid(name, std::string("malformed tokenizer.json: ") + e.what());
  }
  return t;
}

int32_t Llama3Tokenizer::TokenId(std::string_view bytes) const {
  const absl::string_view key(bytes.data(), bytes.size());
  if (auto it = regular_ids_.find(key); it != regular_ids_.end()) return it->second;
  if (auto it = added_ids_.find(key); it != added_ids_.end()) return it->second;
  return -1;
}

void Llama3Tokenizer::EncodeOrdinary(std::string_view text, std::vector<int32_t>* out) const {
  std::vector<int32_t> symbols;
  Llama3Splitter splitter(text);
  for (std::string_view piece; splitter.Next(&piece);) {
    if (ignore_merges_) {
      auto it = regular_ids_.find(absl::string_view(piece.data(), piece.size()));
      if (it != regular_ids_.end()) {
        out->push_back(it->second);
        continue;
      }
    }
    symbols.resize(piece.size());
    for (size_t k = 0; k < piece.size(); ++k) symbols[k] = byte_ids_[static_cast<unsigned char>(piece[k])];
    merges_.Apply(&symbols);
    out->insert(out->end(), symbols.begin(), symbols.end());
  }
}

std::vector<int32_t> Llama3Tokenizer::Encode(std::string_view text) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 1);
  size_t start = 0;  // start of the text not yet encoded
  if (!added_ids_.empty()) {
    for (size_t i = 0; i < text.size(); ++i) {
      if (!added_first_byte_[static_cast<unsigned char>(text[i])]) continue;
      for (size_t len : added_lengths_) {
        if (i + len > text.size()) continue;
        auto it = added_ids_.find(absl::string_view(text.data() + i, len));
        if (it == added_ids_.end()) continue;
        EncodeOrdinary(text.substr(start, i - start), &out);
        out.push_back(it->second);
        start = i + len;
        i = start - 1;
        break;
      }
    }
  }
  EncodeOrdinary(text.substr(start), &out);
  return out;
}

std::string Llama3Tokenizer::Decode(absl::Span<const int32_t> ids) const {
  std::string out;
  for (int32_t id : ids) {
    if (id >= 0 && id < vocab_size_) out += token_bytes_[id];
  }
  return out;
}

}  // namespace longctx
