// Why: see chat_template.h.
#include "data/chat_template.h"

#include <utility>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "data/byte_tokenizer.h"
#include "data/llama3_tokenizer.h"
#include "data/sentencepiece_tokenizer.h"
#include "data/unicode_classes.h"

namespace longctx {

const char* ChatRoleName(ChatRole role) {
  switch (role) {
    case ChatRole::kSystem: return "system";
    case ChatRole::kUser: return "user";
    case ChatRole::kAssistant: return "assistant";
  }
  return "?";
}

const char* ChatTemplateKindName(ChatTemplateKind kind) {
  switch (kind) {
    case ChatTemplateKind::kLlama3: return "llama3";
    case ChatTemplateKind::kLlama2: return "llama2";
    case ChatTemplateKind::kPlain: return "plain";
  }
  return "?";
}

namespace {

// nlohmann's messages quote the offending token, which for a 100,000-digit
// number or a long bad string is the whole of it: at most 200 bytes of it,
// cut before a UTF-8 continuation byte, and how long it was.
std::string Shortened(std::string_view what) {
  constexpr size_t kMax = 200;
  if (what.size() <= kMax) return std::string(what);
  size_t cut = kMax;
  while (cut > 0 && (static_cast<unsigned char>(what[cut]) & 0xC0) == 0x80) --cut;
  return absl::StrCat(std::string(what.substr(0, cut)), "... (", what.size(), " bytes)");
}

}  // namespace

bool IsPythonWhitespace(char32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
         cp == 0x3000;
}

std::string_view StripPythonWhitespace(std::string_view s) {
  size_t begin = 0, end = s.size();
  while (begin < end) {
    char32_t cp;
    const int n = DecodeUtf8(s, begin, &cp);
    if (cp == kInvalidCodePoint || !IsPythonWhitespace(cp)) break;
    begin += n;
  }
  while (end > begin) {
    size_t start = end - 1;  // the first byte of the last code point
    while (start > begin && end - start < 4 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
    char32_t cp;
    const int n = DecodeUtf8(s, start, &cp);
    if (cp == kInvalidCodePoint || start + n != end || !IsPythonWhitespace(cp)) break;
    end = start;
  }
  return s.substr(begin, end - begin);
}

absl::StatusOr<SftExample> ParseSftJsonLine(std::string_view line) {
  // nlohmann's lexer takes a NUL byte for the end of the input, so
  // `{...}\0anything` would parse as the object alone. JSON text cannot hold a
  // raw NUL (inside a string it must be written \u0000), so any is an error.
  if (const size_t nul = line.find('\0'); nul != std::string_view::npos)
    return absl::InvalidArgumentError(absl::StrCat("malformed JSON: NUL byte at byte ", nul + 1,
                                                   " (JSON text cannot hold one; in a string write \\u0000)"));
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(line.begin(), line.end());
  } catch (const nlohmann::json::parse_error& e) {
    return absl::InvalidArgumentError(absl::StrCat("malformed JSON: ", Shortened(e.what())));
  } catch (const nlohmann::json::out_of_range& e) {
    // 1e400, or an integer of more digits than a double holds: valid JSON
    // grammar, but no value nlohmann can store. e.what() quotes the whole
    // number, which may be megabytes; the caller shortens it.
    return absl::InvalidArgumentError(absl::StrCat("malformed JSON: number out of range: ", Shortened(e.what())));
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("malformed JSON: ", Shortened(e.what())));
  }
  if (!j.is_object()) return absl::InvalidArgumentError("not a JSON object");
  SftExample ex;
  if (j.contains("messages")) {
    const nlohmann::json& m = j["messages"];
    if (!m.is_array()) return absl::InvalidArgumentError("\"messages\" is not an array");
    for (size_t i = 0; i < m.size(); ++i) {
      const nlohmann::json& msg = m[i];
      if (!msg.is_object() || !msg.contains("role") || !msg["role"].is_string() || !msg.contains("content") ||
          !msg["content"].is_string()) {
        return absl::InvalidArgumentError(
            absl::StrCat("messages[", i, "] is not {\"role\": STRING, \"content\": STRING}"));
      }
      const std::string role = msg["role"].get<std::string>();
      ChatMessage cm;
      if (role == "system") {
        cm.role = ChatRole::kSystem;
      } else if (role == "user") {
        cm.role = ChatRole::kUser;
      } else if (role == "assistant") {
        cm.role = ChatRole::kAssistant;
      } else {
        return absl::InvalidArgumentError(
            absl::StrCat("messages[", i, "]: unknown role \"", role, "\" (system, user, assistant)"));
      }
      cm.content = msg["content"].get<std::string>();
      if (cm.role == ChatRole::kAssistant && cm.content.empty())
        return absl::InvalidArgumentError(
            absl::StrCat("messages[", i, "]: assistant content is empty (nothing to learn but the end of the turn)"));
      ex.messages.push_back(std::move(cm));
    }
  } else if (j.contains("prompt") || j.contains("response")) {
    if (!j.contains("prompt") || !j["prompt"].is_string() || !j.contains("response") || !j["response"].is_string()) {
      return absl::InvalidArgumentError("\"prompt\" and \"response\" must both be strings");
    }
    if (j.contains("system")) {
      if (!j["system"].is_string()) return absl::InvalidArgumentError("\"system\" is not a string");
      ex.messages.push_back({ChatRole::kSystem, j["system"].get<std::string>()});
    }
    if (j["response"].get_ref<const std::string&>().empty())
      return absl::InvalidArgumentError("\"response\" is empty (nothing to learn but the end of the turn)");
    ex.messages.push_back({ChatRole::kUser, j["prompt"].get<std::string>()});
    ex.messages.push_back({ChatRole::kAssistant, j["response"].get<std::string>()});
  } else {
    return absl::InvalidArgumentError("neither \"messages\" nor \"prompt\"/\"response\"");
  }
  bool any_assistant = false;
  for (const ChatMessage& m : ex.messages) any_assistant |= m.role == ChatRole::kAssistant;
  if (!any_assistant) return absl::InvalidArgumentError("no assistant message (nothing to learn)");
  return ex;
}

absl::StatusOr<ChatTemplate> ChatTemplate::ForTokenizer(const Tokenizer* tokenizer) {
  ChatTemplate t;
  t.tokenizer_ = tokenizer;
  if (dynamic_cast<const ByteTokenizer*>(tokenizer) != nullptr) {
    t.kind_ = ChatTemplateKind::kPlain;
  } else if (dynamic_cast<const SentencePieceTokenizer*>(tokenizer) != nullptr) {
    t.kind_ = ChatTemplateKind::kLlama2;
  } else if (const auto* l3 = dynamic_cast<const Llama3Tokenizer*>(tokenizer); l3 != nullptr) {
    t.kind_ = ChatTemplateKind::kLlama3;
    t.start_header_ = l3->TokenId("<|start_header_id|>");
    t.end_header_ = l3->TokenId("<|end_header_id|>");
    t.eot_ = l3->TokenId("<|eot_id|>");
    if (t.start_header_ < 0 || t.end_header_ < 0 || t.eot_ < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tokenizer ", tokenizer->name(),
          " has no <|start_header_id|>, <|end_header_id|> or <|eot_id|> token: no Llama-3 chat template"));
    }
  } else {
    return absl::InvalidArgumentError(absl::StrCat("no chat template for tokenizer ", tokenizer->name()));
  }
  return t;
}

void ChatTemplate::AppendId(TemplatedExample* out, int32_t id, bool loss) {
  out->tokens.push_back(id);
  out->loss.push_back(loss ? 1 : 0);
}

void ChatTemplate::Append(TemplatedExample* out, std::string_view text, bool loss) const {
  if (text.empty()) return;
  for (int32_t id : tokenizer_->Encode(text)) AppendId(out, id, loss);
}

absl::StatusOr<TemplatedExample> ChatTemplate::Apply(const SftExample& example) const {
  TemplatedExample out;
  // Llama-3 and Llama-2 strip each assistant turn; one that is only
  // whitespace would teach the end-of-turn token alone.
  if (trims_content()) {
    for (size_t i = 0; i < example.messages.size(); ++i) {
      const ChatMessage& m = example.messages[i];
      if (m.role == ChatRole::kAssistant && StripPythonWhitespace(m.content).empty())
        return absl::InvalidArgumentError(absl::StrCat("messages[", i, "]: assistant content is only whitespace (",
                                                       ChatTemplateKindName(kind_),
                                                       " template: empty once trimmed, nothing to learn)"));
    }
  }
  switch (kind_) {
    case ChatTemplateKind::kPlain: {
      AppendId(&out, tokenizer_->bos_id(), false);
      for (const ChatMessage& m : example.messages) {
        switch (m.role) {
          case ChatRole::kSystem: Append(&out, "### System:\n", false); break;
          case ChatRole::kUser: Append(&out, "### User:\n", false); break;
          case ChatRole::kAssistant: Append(&out, "### Assistant:\n", false); break;
        }
        if (m.role == ChatRole::kAssistant) {
          Append(&out, m.content, true);
          AppendId(&out, tokenizer_->eos_id(), true);
        } else {
          Append(&out, m.content, false);
          Append(&out, "\n\n", false);
        }
      }
      break;
    }
    case ChatTemplateKind::kLlama3: {
      AppendId(&out, tokenizer_->bos_id(), false);
      for (const ChatMessage& m : example.messages) {
        const bool loss = m.role == ChatRole::kAssistant;
        AppendId(&out, start_header_, false);
        Append(&out, ChatRoleName(m.role), false);
        AppendId(&out, end_header_, false);
        Append(&out, "\n\n", false);
        Append(&out, StripPythonWhitespace(m.content), loss);  // message['content'] | trim
        AppendId(&out, eot_, loss);
      }
      break;
    }
    case ChatTemplateKind::kLlama2: {
      size_t i = 0;
      const std::string* system = nullptr;  // present, even when empty: the <<SYS>> block is written
      if (!example.messages.empty() && example.messages[0].role == ChatRole::kSystem) {
        system = &example.messages[0].content;
        i = 1;
      }
      if (i == example.messages.size()) return absl::InvalidArgumentError("llama2 template: no user message");
      bool first = true;
      for (; i < example.messages.size(); i += 2) {
        if (example.messages[i].role != ChatRole::kUser || i + 1 >= example.messages.size() ||
            example.messages[i + 1].role != ChatRole::kAssistant) {
          return absl::InvalidArgumentError(absl::StrCat(
              "llama2 template: messages must be [system] user assistant user assistant …; message ", i,
              " breaks the pattern"));
        }
        // As the released template: content = [<<SYS>> block +] user text,
        // then content.strip(), so the system text is not stripped on its
        // own and the user text only at its end.
        std::string content;
        if (first && system != nullptr) absl::StrAppend(&content, "<<SYS>>\n", *system, "\n<</SYS>>\n\n");
        absl::StrAppend(&content, example.messages[i].content);
        const std::string inst = absl::StrCat("[INST] ", std::string(StripPythonWhitespace(content)), " [/INST]");
        AppendId(&out, tokenizer_->bos_id(), false);
        Append(&out, inst, false);
        Append(&out, StripPythonWhitespace(example.messages[i + 1].content), true);
        AppendId(&out, tokenizer_->eos_id(), true);
        first = false;
      }
      break;
    }
  }
  return out;
}

}  // namespace longctx
