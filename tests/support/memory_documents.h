// Why: the retrieval-task and probe tests need a DocumentSource of natural
// sentences without writing token files: documents held in memory, built from
// deterministic English-like prose with sentences of varied length (short ones
// included, as real text has).
#ifndef LONGCTX_TESTS_SUPPORT_MEMORY_DOCUMENTS_H_
#define LONGCTX_TESTS_SUPPORT_MEMORY_DOCUMENTS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "data/document_source.h"
#include "data/tokenizer.h"

namespace longctx::testing {

class MemoryDocuments final : public DocumentSource {
 public:
  explicit MemoryDocuments(std::vector<std::vector<int32_t>> docs, int64_t vocab = 260)
      : docs_(std::move(docs)), vocab_(vocab) {}
  int64_t n_docs() const override { return static_cast<int64_t>(docs_.size()); }
  int64_t n_tokens() const override;
  int64_t vocab_size() const override { return vocab_; }
  int64_t doc_length(int64_t doc) const override { return static_cast<int64_t>(docs_[doc].size()); }
  void ReadTokens(int64_t doc, int64_t start, int64_t count, int32_t* out) const override;
  std::string source_name() const override { return "memory documents"; }

 private:
  std::vector<std::vector<int32_t>> docs_;
  int64_t vocab_;
};

// `docs` documents of prose (sentences of 1..14 words from a small word list,
// blank lines between paragraphs), each encoded with tokenizer and followed by
// its EOS, as the corpus builder writes them. Deterministic for a seed.
MemoryDocuments MakeProseDocuments(const Tokenizer& tokenizer, int docs, uint64_t seed);

}  // namespace longctx::testing

#endif  // LONGCTX_TESTS_SUPPORT_MEMORY_DOCUMENTS_H_
