// Why: `--tokenizer PATH` and a checkpoint's tokenizer name load a
// tokenizer.json (byte-level BPE) or a longctx-sentencepiece-bpe JSON written
// elsewhere; a malformed one must be an error naming the file. A loaded one
// must encode and decode a short text without reading outside its tables.
#include <cstdint>
#include <string>

#include "data/make_tokenizer.h"
#include "data/tokenizer.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = longctx::fuzz::WriteScratch(data, size, ".tokenizer.json");
  auto tok = longctx::MakeTokenizer(path);
  if (!tok.ok()) return 0;
  const std::string text = "Hello, world! 123 \xc3\xa9t\xc3\xa9\n\tend<|eot_id|>";
  const std::vector<int32_t> ids = (*tok)->Encode(text);
  for (int32_t id : ids)
    if (id < 0 || id >= (*tok)->vocab_size()) __builtin_trap();
  (void)(*tok)->Decode(ids);
  return 0;
}
