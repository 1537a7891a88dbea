// Why: `longctx data sft` reads JSON-lines files written by people and
// scripts. Any bytes must give counted, reported bad lines — never an abort —
// the counts must add up (lines = examples + blank + malformed + bad + too
// long), the problems must be valid UTF-8 (report.json holds them), and the
// examples kept must write an .lsft file that reads back the same.
#include <cstdint>
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "data/byte_tokenizer.h"
#include "data/chat_template.h"
#include "data/sft_jsonl.h"
#include "data/sft_token_file.h"
#include "data/text_corpus.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const longctx::ByteTokenizer tokenizer;
  static const absl::StatusOr<longctx::ChatTemplate> tmpl = longctx::ChatTemplate::ForTokenizer(&tokenizer);
  if (!tmpl.ok()) __builtin_trap();
  const std::string path = longctx::fuzz::WriteScratch(data, size, ".jsonl");
  longctx::SftDataset out(tokenizer.vocab_size(), tokenizer.name());
  longctx::SftReadOptions options;
  options.max_line_bytes = 4096;
  options.max_logged = 0;
  absl::StatusOr<longctx::SftReadStats> stats = longctx::ReadSftJsonl({path}, *tmpl, &out, options);
  if (!stats.ok()) return 0;
  const longctx::SftReadStats& s = *stats;
  if (s.lines != s.examples + s.blank_lines + s.malformed_json + s.bad_example + s.line_too_long) __builtin_trap();
  if (s.examples != out.n_examples()) __builtin_trap();
  for (const std::string& p : s.problems)
    if (longctx::FindInvalidUtf8(p) >= 0) __builtin_trap();
  // What report.json holds: must serialize without an exception.
  (void)nlohmann::json{{"problems", s.problems}, {"lines", s.lines}}.dump(2);
  if (out.n_examples() == 0) return 0;
  const std::string lsft = path + ".lsft";
  if (!out.Write(lsft).ok()) __builtin_trap();
  absl::StatusOr<longctx::SftDataset> back = longctx::SftDataset::Read(lsft);
  if (!back.ok() || back->n_examples() != out.n_examples()) __builtin_trap();
  std::remove(lsft.c_str());
  return 0;
}
