// Why: the packer only needs "how many documents, how long is each, copy some
// of its tokens". A single token file (TokenFileReader) and a directory of them
// (TokenDataset, e.g. the output of `longctx data tokenize`) both provide that,
// so the packer and trainer take either through this interface.
#ifndef LONGCTX_DATA_DOCUMENT_SOURCE_H_
#define LONGCTX_DATA_DOCUMENT_SOURCE_H_

#include <cstdint>
#include <string>

namespace longctx {

class DocumentSource {
 public:
  virtual ~DocumentSource() = default;
  virtual int64_t n_docs() const = 0;
  virtual int64_t n_tokens() const = 0;
  virtual int64_t vocab_size() const = 0;
  virtual int64_t doc_length(int64_t doc) const = 0;
  // Copies tokens [start, start + count) of document `doc` (CHECKed in range).
  virtual void ReadTokens(int64_t doc, int64_t start, int64_t count, int32_t* out) const = 0;
  // For messages: a path or "N token files under DIR".
  virtual std::string source_name() const = 0;
};

}  // namespace longctx

#endif  // LONGCTX_DATA_DOCUMENT_SOURCE_H_
