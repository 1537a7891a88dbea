// Why: the shard reader streams downloaded JSON-lines shards, plain or zstd;
// it promises never to fail on bad input, only to count and skip it. The
// first input byte picks the form (odd: the rest is a .jsonl.zst file, even:
// a .jsonl file), so one corpus covers the frame decoder and the line parser.
#include <cstdint>

#include "data/shard_reader.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool zstd = data[0] & 1;
  const std::string path = longctx::fuzz::WriteScratch(data + 1, size - 1, zstd ? ".jsonl.zst" : ".jsonl");
  longctx::ShardReaderOptions options;
  options.max_logged_per_file = 0;
  options.max_line_bytes = 1 << 16;  // small, so the too-long path is reachable
  if (data[0] & 2) options.exclude_sets = {"RedPajamaGithub"};
  longctx::ShardReader reader({path}, options);
  longctx::ShardDocument doc;
  int64_t docs = 0, bytes = 0;
  while (reader.Next(&doc)) {
    ++docs;
    bytes += static_cast<int64_t>(doc.text.size());
  }
  const longctx::ShardReadStats& s = reader.stats();
  if (s.docs != docs || s.text_bytes != bytes) __builtin_trap();  // the counts the reader reports must be true
  return 0;
}
