// Why: .ltok files are mmapped and indexed by offsets read from the file; a
// header or offset table that lies must be an error at Open, never a read
// outside the mapping later. Opens each input (checksum off, so the fuzzer
// reaches the structure behind it; tokens checked), then reads every document.
#include <cstdint>
#include <vector>

#include "data/token_file.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = longctx::fuzz::WriteScratch(data, size, ".ltok");
  longctx::TokenFileReadOptions options;
  options.verify_checksum = size > 0 && (data[size - 1] & 1);  // both paths, chosen by the input
  auto reader = longctx::TokenFileReader::Open(path, options);
  if (!reader.ok()) return 0;
  int64_t total = 0;
  std::vector<int32_t> buffer;
  for (int64_t i = 0; i < reader->n_docs() && i < 4096; ++i) {
    const int64_t len = reader->doc_length(i);
    if (len < 0) __builtin_trap();
    total += len;
    auto span = reader->doc(i, &buffer);
    for (int32_t t : span)
      if (t < 0 || t >= reader->vocab_size()) __builtin_trap();  // verify_tokens promised this
    if (len > 0) {
      int32_t last;
      reader->ReadTokens(i, len - 1, 1, &last);
    }
  }
  if (reader->n_docs() <= 4096 && total != reader->n_tokens()) __builtin_trap();
  return 0;
}
