// Why: see sentencepiece_tokenizer.h. The merge table is rebuilt from the
// scores at load time (about 61k merges for Llama-2, a few milliseconds), so
// the file stays a plain SentencePiece-style piece list.
#include "data/sentencepiece_tokenizer.h"

#include <algorithm>
#include <cstdio>
#include <tuple>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "data/tokenizer_files.h"
#include "data/unicode_classes.h"

namespace longctx {
namespace {

using nlohmann::json;

constexpr char32_t kSpaceMark = 0x2581;  // "▁"
constexpr std::string_view kSpaceMarkUtf8 = "\xE2\x96\x81";

absl::Status Invalid(const std::string& name, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("tokenizer ", name, ": ", what));
}

}  // namespace

absl::StatusOr<std::unique_ptr<SentencePieceTokenizer>> SentencePieceTokenizer::FromFile(const std::string& path,
                                                                                         std::string name) {
  absl::StatusOr<json> j = ReadJsonFile(path);
  if (!j.ok()) return j.status();
  absl::StatusOr<std::unique_ptr<SentencePieceTokenizer>> t = FromJson(*j, std::move(name));
  if (!t.ok()) return absl::Status(t.status().code(), absl::StrCat(path, ": ", t.status().message()));
  return t;
}

absl::StatusOr<std::unique_ptr<SentencePieceTokenizer>> SentencePieceTokenizer::FromJson(const json& j,
                                                                                         std::string name) {
  std::unique_ptr<SentencePieceTokenizer> t(new SentencePieceTokenizer());
  t->name_ = name;
  std::vector<double> scores;
  try {
    if (!j.is_object() || j.value("format", "") != "longctx-sentencepiece-bpe")
      return Invalid(name, "not a longctx-sentencepiece-bpe file");
    if (j.value("version", 0) != 1) return Invalid(name, "unsupported version " + j.value("version", json()).dump());
    if (!j.value("byte_fallback", false)) return Invalid(name, "byte_fallback must be true");
    t->add_dummy_prefix_ = j.value("add_dummy_prefix", true);
    const json& pieces = j.at("pieces");
    if (!pieces.is_array() || pieces.empty()) return Invalid(name, "no pieces");
    int32_t unk = -1;
    t->byte_ids_.fill(-1);
    for (size_t id = 0; id < pieces.size(); ++id) {
      const json& p = pieces[id];
      std::string piece = p.at("piece").get<std::string>();
      const std::string type = p.at("type").get<std::string>();
      const double score = p.at("score").get<double>();
      if (piece.empty()) return Invalid(name, absl::StrCat("piece ", id, " is empty"));
      Type ty;
      if (type == "normal") {
        ty = Type::kNormal;
      } else if (type == "unknown") {
        ty = Type::kUnknown;
        if (unk >= 0) return Invalid(name, "more than one unknown piece");
        unk = static_cast<int32_t>(id);
      } else if (type == "control") {
        ty = Type::kControl;
      } else if (type == "byte") {
        ty = Type::kByte;
        unsigned int b = 0;
        if (piece.size() != 6 || std::sscanf(piece.c_str(), "<0x%2X>", &b) != 1 ||
            piece != absl::StrFormat("<0x%02X>", b))
          return Invalid(name, "byte piece \"" + piece + "\" is not <0xHH>");
        if (t->byte_ids_[b] >= 0) return Invalid(name, "byte piece " + piece + " listed twice");
        t->byte_ids_[b] = static_cast<int32_t>(id);
      } else {
        return Invalid(name, "piece type \"" + type + "\" is not supported");
      }
      if (!t->piece_ids_.emplace(piece, static_cast<int32_t>(id)).second)
        return Invalid(name, "piece \"" + piece + "\" listed twice");
      if (ty == Type::kNormal) {
        char32_t cp;
        if (DecodeUtf8(piece, 0, &cp) == static_cast<int>(piece.size()) && cp != kInvalidCodePoint)
          t->char_ids_[cp] = static_cast<int32_t>(id);
      }
      t->pieces_.push_back(std::move(piece));
      t->types_.push_back(ty);
      scores.push_back(score);
    }
    if (unk < 0) return Invalid(name, "no unknown piece");
    const int32_t n = static_cast<int32_t>(t->pieces_.size());
    t->byte_values_.assign(n, 0);
    for (int b = 0; b < 256; ++b) {
      if (t->byte_ids_[b] < 0) return Invalid(name, absl::StrFormat("byte piece <0x%02X> missing", b));
      t->byte_values_[t->byte_ids_[b]] = static_cast<uint8_t>(b);
    }
    auto id_field = [&](const char* key, int32_t dflt) -> int32_t {
      if (!j.contains(key)) return dflt;
      // A float or out-of-range value reads as -2, which the range check below rejects.
      const json& v = j[key];
      if (!v.is_number_integer() || v.get<int64_t>() < INT32_MIN || v.get<int64_t>() > INT32_MAX) return -2;
      return static_cast<int32_t>(v.get<int64_t>());
    };
    t->bos_ = id_field("bos_id", -1);
    t->eos_ = id_field("eos_id", -1);
    t->pad_ = id_field("pad_id", unk);
    for (int32_t id : {t->bos_, t->eos_, t->pad_})
      if (id < 0 || id >= n) return Invalid(name, absl::StrCat("bos/eos/pad id ", id, " is not a piece"));
    auto sp = t->char_ids_.find(kSpaceMark);
    t->space_id_ = sp == t->char_ids_.end() ? -1 : sp->second;
    t->split_before_space_ = t->space_id_ >= 0;
    for (int32_t id = 0; id < n && t->split_before_space_; ++id) {
      if (t->types_[id] != Type::kNormal) continue;
      const std::string& p = t->pieces_[id];
      for (size_t k = p.find(kSpaceMarkUtf8, 1); k != std::string::npos; k = p.find(kSpaceMarkUtf8, k + 1)) {
        if (k < kSpaceMarkUtf8.size() || p.compare(k - kSpaceMarkUtf8.size(), kSpaceMarkUtf8.size(), kSpaceMarkUtf8) != 0) {
          t->split_before_space_ = false;
          break;
        }
      }
    }
  } catch (const json::exception& e) {
    return Invalid(name, std::string("malformed file: ") + e.what());
  }

  // Merges from scores (see the header).
  struct Candidate {
    double score;
    int32_t left, right, result;
  };
  std::vector<Candidate> cands;
  for (int32_t id = 0; id < static_cast<int32_t>(t->pieces_.size()); ++id) {
    if (t->types_[id] != Type::kNormal) continue;
    const std::string& p = t->pieces_[id];
    char32_t cp;
    for (size_t k = DecodeUtf8(p, 0, &cp); k < p.size(); k += DecodeUtf8(p, k, &cp)) {
      auto l = t->piece_ids_.find(absl::string_view(p.data(), k));
      auto r = t->piece_ids_.find(absl::string_view(p.data() + k, p.size() - k));
      if (l != t->piece_ids_.end() && r != t->piece_ids_.end()) cands.push_back({scores[id], l->second, r->second, id});
    }
  }
  std::sort(cands.begin(), cands.end(), [](const Candidate& a, const Candidate& b) {
    if (a.score != b.score) return a.score > b.score;
    return std::tie(a.left, a.right) < std::tie(b.left, b.right);
  });
  for (const Candidate& c : cands) t->merges_.Add(c.left, c.right, c.result);
  return t;
}

int32_t SentencePieceTokenizer::PieceId(std::string_view piece) const {
  auto it = piece_ids_.find(absl::string_view(piece.data(), piece.size()));
  return it == piece_ids_.end() ? -1 : it->second;
}

std::vector<int32_t> SentencePieceTokenizer::Encode(std::string_view text) const {
  std::vector<int32_t> symbols;
  if (text.empty()) return symbols;
  symbols.reserve(text.size() + 1);
  auto emit = [&](char32_t cp, std::string_view bytes) {
    if (cp != kInvalidCodePoint) {
      auto it = char_ids_.find(cp);
      if (it != char_ids_.end()) {
        symbols.push_back(it->second);
        return;
      }
    }
    for (char b : bytes) symbols.push_back(byte_ids_[static_cast<unsigned char>(b)]);
  };
  auto emit_space = [&] {
    if (space_id_ >= 0) {
      symbols.push_back(space_id_);
    } else {
      emit(kInvalidCodePoint, kSpaceMarkUtf8);
    }
  };
  if (add_dummy_prefix_) emit_space();
  for (size_t i = 0; i < text.size();) {
    char32_t cp;
    const int len = DecodeUtf8(text, i, &cp);
    if (cp == ' ') {
      emit_space();
    } else {
      emit(cp, text.substr(i, len));
    }
    i += len;
  }
  if (!split_before_space_) {
    merges_.Apply(&symbols);
    return symbols;
  }
  // Merge each word (a run that starts where a "▁" follows another symbol)
  // on its own.
  std::vector<int32_t> out, word;
  out.reserve(symbols.size());
  size_t start = 0;
  for (size_t i = 1; i <= symbols.size(); ++i) {
    if (i < symbols.size() && !(symbols[i] == space_id_ && symbols[i - 1] != space_id_)) continue;
    word.assign(symbols.begin() + start, symbols.begin() + i);
    merges_.Apply(&word);
    out.insert(out.end(), word.begin(), word.end());
    start = i;
  }
  return out;
}

std::string SentencePieceTokenizer::Decode(absl::Span<const int32_t> ids) const {
  std::string out;
  for (int32_t id : ids) {
    if (id < 0 || id >= static_cast<int32_t>(pieces_.size())) continue;
    switch (types_[id]) {
      case Type::kNormal: {
        const std::string& p = pieces_[id];
        for (size_t k = 0; k < p.size();) {
          if (p.compare(k, kSpaceMarkUtf8.size(), kSpaceMarkUtf8) == 0) {
            out.push_back(' ');
            k += kSpaceMarkUtf8.size();
          } else {
            out.push_back(p[k++]);
          }
        }
        break;
      }
      case Type::kByte:
        out.push_back(static_cast<char>(byte_values_[id]));
        break;
      case Type::kUnknown:
      case Type::kControl:
        break;
    }
  }
  if (add_dummy_prefix_ && !out.empty() && out[0] == ' ') out.erase(0, 1);
  return out;
}

}  // namespace longctx
