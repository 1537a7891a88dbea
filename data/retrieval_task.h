// Why: the multi-needle needle-in-a-haystack sample (SPECS.md "Effective-length
// probe: 4-needle NIAH") is needed twice, and both uses must agree token for
// token: the effective-length probe (train/probe/niah_probe.h) builds test prompts
// from eval-split documents, and the retrieval training task
// (data/retrieval_task_mixer.h) builds training rows in the same format from
// train-split documents so that small models can learn to retrieve. This file
// is that one builder: a sample format, a haystack of natural sentences cut
// from the run's own documents, and the deterministic assembly of prompt and
// answer from a seed.
//
// Layout (text; each piece is encoded on its own and the ids concatenated, so
// the token count is exact and every needle starts at a known token):
//   prefix                     "There is an important info hidden ... there."
//   " " + sentence  (× n)      the haystack, with needle j inserted as
//   " " + needle_j              " One of the magic numbers is NNNNNN."
//   "\n" + question            "What are the magic numbers mentioned in the provided
//                               text? The numbers are"
// answer: " N1, N2, ..., Nk." (the numbers in document order), then EOS in
// training rows. No BOS: training documents carry none (TinyLlama style).
//
// Haystack: we have no Paul Graham essays, so the haystack is the run's own
// natural text: a random document of the given split, decoded with the run's
// tokenizer, whitespace-normalised and split into sentences (a sentence ends at
// . ! or ? followed by optional closing quotes/brackets and whitespace; the
// partial first and last sentences of a window are dropped). Sentences are
// taken in order while they fit the budget, then the rest of the budget is
// filled first-fit from the following sentences; a gap that remains is closed
// by turning single-space sentence separators into paragraph breaks ("\n\n",
// +1 token each with the byte and Llama tokenizers), so a prompt is exactly the
// requested length unless the haystack is tiny (the shortfall is reported).
//
// Needle depths: needle j of k (0-based) gets nominal depth
// d_j = j·w + U(0, w), w = 0.99/k (the paper's 0.2475 for k = 4), and goes in
// at the sentence boundary nearest d_j·(haystack tokens) (ties: the earlier
// one); needles sharing a boundary keep their order. The nominal depth is what
// is reported (the paper's heatmap rows).
#ifndef LONGCTX_DATA_RETRIEVAL_TASK_H_
#define LONGCTX_DATA_RETRIEVAL_TASK_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "data/document_source.h"
#include "data/splitmix64.h"
#include "data/tokenizer.h"

namespace longctx {

struct NeedleFormat {
  std::string name;
  std::string prefix;         // may be empty
  std::string needle_before;  // needle sentence = needle_before + number + needle_after
  std::string needle_after;
  std::string question;
  int digits = 6;             // numbers are uniform in [10^(digits-1), 10^digits)
};

// The STRING paper's strings (Sec. 3 / Table 5), verbatim.
NeedleFormat PaperNeedleFormat();
// For byte-level models with short rows, where the paper's prefix and question
// (224 bytes) leave little room: no prefix, question "The magic numbers are",
// same needle sentence and answer.
NeedleFormat CompactNeedleFormat();
// "paper" or "compact"; anything else → InvalidArgument naming `field`.
absl::StatusOr<NeedleFormat> NeedleFormatByName(const std::string& name, const std::string& field);

// Splits text into whitespace-normalised sentences (see the header comment).
// drop_first discards the first sentence (a window cut into a document starts
// mid-sentence); text after the last terminator (where such a window ends) is
// never a sentence. Sentences without a letter are dropped.
std::vector<std::string> SplitSentences(const std::string& text, bool drop_first);

// One haystack: sentence pieces (each " sentence" or "\n\nsentence"), as ids.
struct Haystack {
  std::vector<std::vector<int32_t>> pieces;
  std::vector<std::string> texts;  // the sentences, for debugging and tests
  int64_t tokens = 0;              // Σ piece sizes, <= the budget
};

// Natural sentences from a set of documents of a DocumentSource.
class HaystackSource {
 public:
  // docs: document indices to draw from (non-empty); all pointers must outlive
  // this object.
  HaystackSource(const DocumentSource* source, std::vector<uint32_t> docs, const Tokenizer* tokenizer);

  // Sentences totalling at most `budget` tokens (and exactly budget unless the
  // documents cannot provide it), drawn with rng. Errors: a source whose
  // sampled documents hold no sentence at all.
  absl::StatusOr<Haystack> Fill(int64_t budget, SplitMix64* rng) const;

  const Tokenizer& tokenizer() const { return *tokenizer_; }
  int64_t num_docs() const { return static_cast<int64_t>(docs_.size()); }

 private:
  const DocumentSource* source_;
  std::vector<uint32_t> docs_;
  const Tokenizer* tokenizer_;
};

// The documents of a split, as the packer defines it (data/packer.h,
// DocumentInEvalSplit), non-empty ones only, ascending.
std::vector<uint32_t> SplitDocuments(const DocumentSource& source, double eval_fraction, bool eval_split);

struct NeedleSample {
  std::vector<int32_t> prompt;            // prefix .. question
  std::vector<int32_t> answer;            // " N1, ..., Nk." (no EOS)
  std::vector<std::string> numbers;       // in document (= depth) order
  std::vector<double> depths;             // nominal depth of each needle, in [0, 0.99)
  std::vector<int64_t> needle_offsets;    // first prompt token of each needle piece
  // Haystack token offsets of its sentence boundaries (0 .. haystack_tokens),
  // needles not counted: where needles may go.
  std::vector<int64_t> boundaries;
  int64_t haystack_tokens = 0;
  int64_t shortfall = 0;                  // requested prompt tokens − prompt.size()
};

// Fixed (non-haystack) prompt tokens of a format with k needles: the smallest
// prompt it can build. Uses the largest possible number (all nines) per needle.
int64_t NeedleFixedTokens(const NeedleFormat& format, int needles, const Tokenizer& tokenizer);

// Builds a sample whose prompt has `prompt_tokens` tokens (see shortfall),
// deterministically from seed. depths, when given, replaces the random
// nominal depths (one per needle, ascending, in [0, 1)); the random ones are
// still drawn, so numbers and haystack are those of the same seed without it
// and only the needles' places differ. Errors: needles < 1, a budget smaller
// than the fixed parts (FailedPrecondition saying how many tokens they take),
// bad depths.
absl::StatusOr<NeedleSample> BuildNeedleSample(const NeedleFormat& format, int needles, int64_t prompt_tokens,
                                               const HaystackSource& haystack, uint64_t seed,
                                               const std::vector<double>* depths = nullptr);

// The answer text for numbers in order: " N1, N2, ..., Nk.".
std::string NeedleAnswerText(const std::vector<std::string>& numbers);

}  // namespace longctx

#endif  // LONGCTX_DATA_RETRIEVAL_TASK_H_
