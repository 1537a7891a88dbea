// Why: supervised fine-tuning learns from conversations, and the model must see
// them in the exact form its tokenizer family was (or will be) chatted with,
// while only the assistant's words (and the token that ends its turn) are
// learned: the prompt is context, not a target. This file turns one parsed
// example into token ids plus a per-token loss flag, one template per
// tokenizer family:
//
//   llama3 (Llama3Tokenizer with <|start_header_id|>, <|end_header_id|>,
//           <|eot_id|> in its vocabulary), Meta's Llama-3 chat format:
//     <|begin_of_text|>
//     per message: <|start_header_id|>ROLE<|end_header_id|>\n\nCONTENT<|eot_id|>
//   llama2 (SentencePieceTokenizer), Meta's Llama-2-chat format:
//     per user/assistant pair: <s>[INST] (<<SYS>>\nSYSTEM\n<</SYS>>\n\n only in the
//     first, whenever a system message is given, even an empty one) USER [/INST] ASSISTANT </s>
//     (<s>, </s> are the BOS/EOS ids; the text pieces are encoded separately,
//     so each begins with SentencePiece's dummy-prefix space)
//   byte (ByteTokenizer), a plain form:
//     <bos> then per message "### System:\n" / "### User:\n" / "### Assistant:\n"
//     followed by CONTENT; system and user content is followed by "\n\n",
//     assistant content by <eos>.
//
// Whitespace: the released Llama-3 and Llama-2 chat templates strip each
// message's content (Llama-3: `message['content'] | trim`; Llama-2:
// `content.strip()`, where for the first user turn content is the <<SYS>>
// block followed by the user text, so the system text is kept as given), so
// these two do the same: Python's str.strip() with no argument, which is what
// Jinja's trim calls, removes the code points for which str.isspace() is true
// (StripPythonWhitespace below). An example is encoded as the model sees it
// when served through its own template; an assistant turn that is only
// whitespace is an error (nothing to learn). The byte template is this
// project's own and keeps content as given.
//
// Loss: token i carries loss (loss[i] = 1, i.e. it is a kept target when it is
// predicted from token i−1) iff it is in an assistant message's content or is
// the token that ends that turn (<|eot_id|>, </s>, <eos>). Headers, system and
// user text, BOS, and everything else carry none.
//
// Fragile: content is encoded as text, so a Llama-3 user message containing
// the literal "<|eot_id|>" becomes the special id (Hugging Face does the same).
#ifndef LONGCTX_DATA_CHAT_TEMPLATE_H_
#define LONGCTX_DATA_CHAT_TEMPLATE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "data/tokenizer.h"

namespace longctx {

enum class ChatRole { kSystem, kUser, kAssistant };
const char* ChatRoleName(ChatRole role);  // "system", "user", "assistant"

struct ChatMessage {
  ChatRole role = ChatRole::kUser;
  std::string content;
};

struct SftExample {
  std::vector<ChatMessage> messages;
};

// One JSON line → example. Accepted:
//   {"messages": [{"role": "system"|"user"|"assistant", "content": STRING}, ...]}
//   {"prompt": STRING, "response": STRING} (optional "system": STRING)
// Other members are ignored. InvalidArgument (message says what is wrong, no
// location: the caller adds file:line; it starts with "malformed JSON" when
// the line is not JSON that can be read) for malformed JSON, invalid UTF-8, a
// raw NUL byte anywhere in the line, a number out of double range (1e400), a
// missing or mistyped member, an unknown role, an empty assistant content or
// response, or no assistant message.
absl::StatusOr<SftExample> ParseSftJsonLine(std::string_view line);

// Python's str.isspace() for one code point: U+0009..U+000D, U+001C..U+0020,
// U+0085, U+00A0, U+1680, U+2000..U+200A, U+2028, U+2029, U+202F, U+205F,
// U+3000 (not U+200B or U+FEFF).
bool IsPythonWhitespace(char32_t cp);
// s without leading and trailing IsPythonWhitespace code points: Python's
// s.strip(), Jinja's `s | trim`. Invalid UTF-8 stops the strip.
std::string_view StripPythonWhitespace(std::string_view s);

struct TemplatedExample {
  std::vector<int32_t> tokens;
  std::vector<uint8_t> loss;  // same size; 1 = this token is a target with loss
};

enum class ChatTemplateKind { kLlama3, kLlama2, kPlain };
const char* ChatTemplateKindName(ChatTemplateKind kind);  // "llama3", "llama2", "plain"

class ChatTemplate {
 public:
  // Picks the template by the tokenizer's class (see the top of the file);
  // tokenizer must outlive the template. Error: a Llama-3-style tokenizer
  // without the three header/eot special tokens, or an unknown tokenizer class.
  static absl::StatusOr<ChatTemplate> ForTokenizer(const Tokenizer* tokenizer);

  // Error (InvalidArgument): llama2 with messages that are not [system] user
  // assistant user assistant … (must end with an assistant message).
  absl::StatusOr<TemplatedExample> Apply(const SftExample& example) const;

  ChatTemplateKind kind() const { return kind_; }
  // llama3 and llama2 strip each message's content (see the top of the file).
  bool trims_content() const { return kind_ != ChatTemplateKind::kPlain; }

 private:
  ChatTemplate() = default;
  void Append(TemplatedExample* out, std::string_view text, bool loss) const;
  static void AppendId(TemplatedExample* out, int32_t id, bool loss);

  const Tokenizer* tokenizer_ = nullptr;
  ChatTemplateKind kind_ = ChatTemplateKind::kPlain;
  int32_t start_header_ = -1, end_header_ = -1, eot_ = -1;  // llama3 only
};

}  // namespace longctx

#endif  // LONGCTX_DATA_CHAT_TEMPLATE_H_
