// Why: tokenizing SlimPajama (627B tokens, ~59k shards) takes hours and is
// interrupted; this turns raw shards into one token file per shard, in
// parallel over shards, and picks up where it stopped: a shard whose output
// exists, verifies (checksum, tokenizer, the source's size and mtime, the
// reader settings) and has its sidecar record is skipped. Outputs are
// published by rename (TokenFileWriter), so a killed run leaves no half file
// under a real name. Each output depends only on its shard, so the result is
// the same for any thread count.
//
// Layout under out_dir:
//   <rel>.ltok         one token file per shard; <rel> is the shard's path
//                      relative to the input directory (or its file name for a
//                      file input) minus .jsonl(.zst); EOS after every document
//   <rel>.ltok.json    the shard's record (source, size/mtime, reader settings,
//                      docs, tokens, checksum, ShardReadStats); the resume key
//   manifest.json      per shard: source, output, docs, tokens, checksum (hex
//                      XXH64 from the token file), stats with error counts;
//                      totals; tokenizer name, vocab size, eos id
#ifndef LONGCTX_DATA_TOKENIZE_SHARDS_H_
#define LONGCTX_DATA_TOKENIZE_SHARDS_H_

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "absl/status/statusor.h"
#include "data/shard_reader.h"

namespace longctx {

inline constexpr char kTokenizeManifestName[] = "manifest.json";

struct TokenizeShardsOptions {
  std::vector<std::string> inputs;  // shard files or directories (ListShardFiles)
  std::string out_dir;
  std::string tokenizer = "byte";  // MakeTokenizer spec; one instance per worker
  int threads = 0;                 // 0 = hardware concurrency; capped at the shard count
  ShardReaderOptions reader;
  bool progress = true;            // progress line on stderr
};

struct ShardOutcome {
  std::string source;  // as listed
  std::string output;  // relative to out_dir
  bool resumed = false;  // skipped: a verified output from an earlier run
  int64_t docs = 0, tokens = 0;
  uint64_t checksum = 0;
  ShardReadStats stats;
};

struct TokenizeShardsResult {
  std::vector<ShardOutcome> shards;  // in shard order
  ShardReadStats totals;
  int64_t docs = 0, tokens = 0;
  int64_t resumed = 0;
  double seconds = 0;
  std::string manifest_path;
};

absl::StatusOr<TokenizeShardsResult> TokenizeShards(const TokenizeShardsOptions& options);

// The XXH64 stored in a token file's last 8 bytes.
absl::StatusOr<uint64_t> ReadTokenFileChecksum(const std::string& path);

}  // namespace longctx

#endif  // LONGCTX_DATA_TOKENIZE_SHARDS_H_
