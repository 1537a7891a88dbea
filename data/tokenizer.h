// Why: the data pipeline (text → token file → packed rows) and the evaluation
// probes must not care which vocabulary is in use. Everything that turns text
// into ids goes through this interface: the byte tokenizer, the Llama-3
// byte-level BPE (llama3_tokenizer.h) and the Llama-2 SentencePiece BPE
// (sentencepiece_tokenizer.h) implement it; make_tokenizer.h builds one from
// a spec string.
#ifndef LONGCTX_DATA_TOKENIZER_H_
#define LONGCTX_DATA_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace longctx {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Text → ids. Never adds BOS/EOS: callers decide (the corpus builder appends
  // EOS per document, TinyLlama style).
  virtual std::vector<int32_t> Encode(std::string_view text) const = 0;
  // Ids → text. What happens to special ids is implementation-defined and
  // documented by each implementation.
  virtual std::string Decode(absl::Span<const int32_t> ids) const = 0;

  virtual int32_t vocab_size() const = 0;  // every id is in [0, vocab_size)
  virtual int32_t bos_id() const = 0;
  virtual int32_t eos_id() const = 0;
  virtual int32_t pad_id() const = 0;
  // Stable name, stored in token files so a file can be matched with the
  // tokenizer that wrote it (e.g. "byte").
  virtual std::string name() const = 0;
};

}  // namespace longctx

#endif  // LONGCTX_DATA_TOKENIZER_H_
