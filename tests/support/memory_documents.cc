// Why: see memory_documents.h.
#include "tests/support/memory_documents.h"

#include <cctype>
#include <cstdlib>

#include "data/splitmix64.h"

namespace longctx::testing {

int64_t MemoryDocuments::n_tokens() const {
  int64_t n = 0;
  for (const auto& d : docs_) n += static_cast<int64_t>(d.size());
  return n;
}

void MemoryDocuments::ReadTokens(int64_t doc, int64_t start, int64_t count, int32_t* out) const {
  if (doc < 0 || doc >= n_docs() || start < 0 || count < 0 || start + count > doc_length(doc)) std::abort();
  for (int64_t i = 0; i < count; ++i) out[i] = docs_[doc][start + i];
}

MemoryDocuments MakeProseDocuments(const Tokenizer& tokenizer, int docs, uint64_t seed) {
  static const char* kWords[] = {"the",   "jury",  "said",   "that",    "city",  "election", "was",   "held",
                                 "with",  "care",  "report", "county",  "of",    "a",        "new",   "law",
                                 "and",   "it",    "is",     "in",      "house", "river",    "people", "found",
                                 "money", "school", "water", "year",    "long",  "short",    "they",  "would",
                                 "not",   "agree", "because", "evening", "music", "road",    "north", "quietly"};
  constexpr int kNumWords = sizeof(kWords) / sizeof(kWords[0]);
  const char kEnds[] = {'.', '.', '.', '.', '!', '?'};
  SplitMix64 rng(seed);
  std::vector<std::vector<int32_t>> out;
  for (int d = 0; d < docs; ++d) {
    std::string text;
    const int sentences = 3 + static_cast<int>(rng.Below(60));
    for (int s = 0; s < sentences; ++s) {
      const int words = 1 + static_cast<int>(rng.Below(14));
      for (int w = 0; w < words; ++w) {
        std::string t = kWords[rng.Below(kNumWords)];
        if (w == 0) t[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(t[0])));
        text += t;
        if (w + 1 < words) text += ' ';
      }
      text += kEnds[rng.Below(sizeof(kEnds))];
      text += (s % 5 == 4) ? "\n\n" : " ";
    }
    std::vector<int32_t> ids = tokenizer.Encode(text);
    ids.push_back(tokenizer.eos_id());
    out.push_back(std::move(ids));
  }
  return MemoryDocuments(std::move(out), tokenizer.vocab_size());
}

}  // namespace longctx::testing
