// Why: the byte tokenizer is the identity on bytes plus four reserved ids.
#include "data/byte_tokenizer.h"

#include "absl/strings/str_cat.h"

namespace longctx {

std::vector<int32_t> ByteTokenizer::Encode(std::string_view text) const {
  std::vector<int32_t> ids(text.size());
  for (size_t i = 0; i < text.size(); ++i) ids[i] = static_cast<unsigned char>(text[i]);
  return ids;
}

std::string ByteTokenizer::Decode(absl::Span<const int32_t> ids) const {
  std::string out;
  out.reserve(ids.size());
  for (int32_t id : ids) {
    if (id >= 0 && id < 256) {
      out.push_back(static_cast<char>(static_cast<unsigned char>(id)));
      continue;
    }
    if (!render_specials_) continue;
    switch (id) {
      case kBos: out += "<bos>"; break;
      case kEos: out += "<eos>"; break;
      case kPad: out += "<pad>"; break;
      case kUnk: out += "<unk>"; break;
      default: absl::StrAppend(&out, "<id:", id, ">"); break;
    }
  }
  return out;
}

}  // namespace longctx
