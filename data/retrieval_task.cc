// Why: see retrieval_task.h.
#include "data/retrieval_task.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "data/packer.h"

namespace longctx {
namespace {

constexpr uint64_t kSampleSalt = 0x6C6F6E676374784EULL;  // "longctxN"
constexpr int kMaxDocsPerHaystack = 64;   // documents sampled for one haystack at most
constexpr int kMaxFillScan = 512;         // sentences scanned first-fit once one did not fit
constexpr int64_t kMinWindow = 2048;      // tokens read from a document at least

bool IsSpace(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool IsTerminator(char c) { return c == '.' || c == '!' || c == '?'; }
bool IsCloser(char c) { return c == '"' || c == '\'' || c == ')' || c == ']'; }
bool HasLetter(const std::string& s) {
  for (unsigned char c : s)
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80) return true;
  return false;
}

double Uniform01(SplitMix64* rng) { return static_cast<double>(rng->Next() >> 11) * 0x1.0p-53; }

void Append(std::vector<int32_t>* out, const std::vector<int32_t>& ids) { out->insert(out->end(), ids.begin(), ids.end()); }

}  // namespace

NeedleFormat PaperNeedleFormat() {
  NeedleFormat f;
  f.name = "paper";
  f.prefix =
      "There is an important info hidden inside a lot of irrelevant text. Find it and memorize them. I will quiz "
      "you about the important information there.";
  f.needle_before = "One of the magic numbers is ";
  f.needle_after = ".";
  f.question = "What are the magic numbers mentioned in the provided text? The numbers are";
  return f;
}

NeedleFormat CompactNeedleFormat() {
  NeedleFormat f = PaperNeedleFormat();
  f.name = "compact";
  f.prefix = "";
  f.question = "The magic numbers are";
  return f;
}

absl::StatusOr<NeedleFormat> NeedleFormatByName(const std::string& name, const std::string& field) {
  if (name == "paper") return PaperNeedleFormat();
  if (name == "compact") return CompactNeedleFormat();
  return absl::InvalidArgumentError(absl::StrCat(field, ": unknown needle format \"", name,
                                                 "\" (known: paper, compact)"));
}

std::vector<std::string> SplitSentences(const std::string& text, bool drop_first) {
  std::vector<std::string> out;
  std::string cur;
  bool dropped = !drop_first;
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    const char c = text[i];
    if (IsSpace(static_cast<unsigned char>(c))) {
      if (!cur.empty() && cur.back() != ' ') cur.push_back(' ');
      ++i;
      continue;
    }
    cur.push_back(c);
    ++i;
    if (!IsTerminator(c)) continue;
    while (i < n && (IsTerminator(text[i]) || IsCloser(text[i]))) cur.push_back(text[i++]);
    if (i < n && !IsSpace(static_cast<unsigned char>(text[i]))) continue;  // "3.5", "e.g.x"
    if (!dropped) {
      dropped = true;
    } else if (HasLetter(cur)) {
      out.push_back(cur);
    }
    cur.clear();
  }
  return out;
}

HaystackSource::HaystackSource(const DocumentSource* source, std::vector<uint32_t> docs, const Tokenizer* tokenizer)
    : source_(source), docs_(std::move(docs)), tokenizer_(tokenizer) {}

std::vector<uint32_t> SplitDocuments(const DocumentSource& source, double eval_fraction, bool eval_split) {
  std::vector<uint32_t> docs;
  for (int64_t i = 0; i < source.n_docs(); ++i)
    if (source.doc_length(i) > 0 && DocumentInEvalSplit(i, eval_fraction) == eval_split)
      docs.push_back(static_cast<uint32_t>(i));
  return docs;
}

absl::StatusOr<Haystack> HaystackSource::Fill(int64_t budget, SplitMix64* rng) const {
  Haystack h;
  if (budget <= 0) return h;
  if (docs_.empty()) return absl::FailedPreconditionError(absl::StrCat("haystack: no documents in ", source_->source_name()));
  const int32_t specials[] = {tokenizer_->bos_id(), tokenizer_->eos_id(), tokenizer_->pad_id()};
  int64_t remaining = budget;
  bool filling = false;  // a sentence did not fit: now first-fit over the following ones
  int scanned = 0;
  int64_t sentences_seen = 0;
  const int64_t window = std::max<int64_t>(4 * budget, kMinWindow);
  std::vector<int32_t> ids;
  for (int d = 0; d < kMaxDocsPerHaystack && remaining > 0 && scanned <= kMaxFillScan; ++d) {
    const uint32_t doc = docs_[rng->Below(docs_.size())];
    const int64_t len = source_->doc_length(doc);
    const int64_t take = std::min(len, window);
    const int64_t start = len > take ? static_cast<int64_t>(rng->Below(static_cast<uint64_t>(len - take + 1))) : 0;
    ids.resize(take);
    source_->ReadTokens(doc, start, take, ids.data());
    ids.erase(std::remove_if(ids.begin(), ids.end(),
                             [&](int32_t t) { return std::find(std::begin(specials), std::end(specials), t) != std::end(specials); }),
              ids.end());
    for (const std::string& s : SplitSentences(tokenizer_->Decode(ids), start > 0)) {
      ++sentences_seen;
      std::vector<int32_t> piece = tokenizer_->Encode(absl::StrCat(" ", s));
      if (static_cast<int64_t>(piece.size()) <= remaining) {
        remaining -= static_cast<int64_t>(piece.size());
        h.pieces.push_back(std::move(piece));
        h.texts.push_back(s);
      } else {
        filling = true;
      }
      if (remaining == 0 || (filling && ++scanned > kMaxFillScan)) break;
    }
  }
  if (sentences_seen == 0)
    return absl::FailedPreconditionError(absl::StrCat("haystack: ", kMaxDocsPerHaystack, " sampled documents of ",
                                                      source_->source_name(), " hold no sentence (. ! or ?)"));
  // Close the gap with paragraph breaks, spread evenly over the sentences.
  const int64_t n = static_cast<int64_t>(h.pieces.size());
  std::vector<char> changed(n, 0);
  for (int pass = 0; pass < 2 && remaining > 0; ++pass) {
    const int64_t want = std::min(remaining, n);
    for (int64_t t = 0; t < n && remaining > 0; ++t) {
      const int64_t i = pass == 0 ? std::min(n - 1, (2 * t + 1) * n / (2 * want)) : t;
      if (pass == 0 && t >= want) break;
      if (changed[i]) continue;
      std::vector<int32_t> alt = tokenizer_->Encode(absl::StrCat("\n\n", h.texts[i]));
      if (alt.size() != h.pieces[i].size() + 1) continue;
      h.pieces[i] = std::move(alt);
      changed[i] = 1;
      --remaining;
    }
  }
  h.tokens = budget - remaining;
  return h;
}

std::string NeedleAnswerText(const std::vector<std::string>& numbers) {
  return absl::StrCat(" ", absl::StrJoin(numbers, ", "), ".");
}

int64_t NeedleFixedTokens(const NeedleFormat& format, int needles, const Tokenizer& tokenizer) {
  int64_t n = 0;
  if (!format.prefix.empty()) n += static_cast<int64_t>(tokenizer.Encode(format.prefix).size());
  const std::string nines(format.digits, '9');
  n += needles * static_cast<int64_t>(
                     tokenizer.Encode(absl::StrCat(" ", format.needle_before, nines, format.needle_after)).size());
  n += static_cast<int64_t>(tokenizer.Encode(absl::StrCat("\n", format.question)).size());
  return n;
}

absl::StatusOr<NeedleSample> BuildNeedleSample(const NeedleFormat& format, int needles, int64_t prompt_tokens,
                                               const HaystackSource& haystack, uint64_t seed,
                                               const std::vector<double>* depths) {
  if (needles < 1) return absl::InvalidArgumentError(absl::StrCat("needles: must be >= 1 (got ", needles, ")"));
  if (format.digits < 1 || format.digits > 18)
    return absl::InvalidArgumentError(absl::StrCat("needle digits: must be in [1, 18] (got ", format.digits, ")"));
  const Tokenizer& tok = haystack.tokenizer();
  SplitMix64 rng(Mix64(seed ^ kSampleSalt));
  NeedleSample s;
  uint64_t lo = 1;
  for (int i = 1; i < format.digits; ++i) lo *= 10;
  const uint64_t range = format.digits == 1 ? 10 : 9 * lo;
  if (format.digits == 1) lo = 0;
  if (static_cast<uint64_t>(needles) > range)
    return absl::InvalidArgumentError(absl::StrCat("needles: ", needles, " distinct ", format.digits,
                                                   "-digit numbers do not exist"));
  while (static_cast<int>(s.numbers.size()) < needles) {
    std::string num = std::to_string(lo + rng.Below(range));
    if (std::find(s.numbers.begin(), s.numbers.end(), num) == s.numbers.end()) s.numbers.push_back(std::move(num));
  }
  const double w = 0.99 / needles;
  for (int j = 0; j < needles; ++j) s.depths.push_back(j * w + w * Uniform01(&rng));
  if (depths != nullptr) {
    if (static_cast<int>(depths->size()) != needles)
      return absl::InvalidArgumentError(
          absl::StrCat("needle depths: ", depths->size(), " given for ", needles, " needles"));
    for (size_t j = 0; j < depths->size(); ++j)
      if (!((*depths)[j] >= 0 && (*depths)[j] < 1) || (j > 0 && (*depths)[j] < (*depths)[j - 1]))
        return absl::InvalidArgumentError(absl::StrCat("needle depths: depth ", j, " is ", (*depths)[j],
                                                       "; depths must be ascending and in [0, 1)"));
    s.depths = *depths;
  }

  const std::vector<int32_t> prefix = format.prefix.empty() ? std::vector<int32_t>() : tok.Encode(format.prefix);
  std::vector<std::vector<int32_t>> needle_ids;
  int64_t fixed = static_cast<int64_t>(prefix.size());
  for (const std::string& num : s.numbers) {
    needle_ids.push_back(tok.Encode(absl::StrCat(" ", format.needle_before, num, format.needle_after)));
    fixed += static_cast<int64_t>(needle_ids.back().size());
  }
  const std::vector<int32_t> question = tok.Encode(absl::StrCat("\n", format.question));
  fixed += static_cast<int64_t>(question.size());
  if (fixed > prompt_tokens)
    return absl::FailedPreconditionError(absl::StrCat("a ", prompt_tokens, "-token prompt is too short for the '",
                                                      format.name, "' needle format with ", needles,
                                                      " needles: its fixed parts take ", fixed, " tokens"));
  absl::StatusOr<Haystack> hay = haystack.Fill(prompt_tokens - fixed, &rng);
  if (!hay.ok()) return hay.status();
  s.haystack_tokens = hay->tokens;

  // Sentence boundaries b_0 = 0 .. b_n = haystack tokens; needle j at the nearest one.
  const size_t n = hay->pieces.size();
  std::vector<int64_t> bounds(n + 1, 0);
  for (size_t i = 0; i < n; ++i) bounds[i + 1] = bounds[i] + static_cast<int64_t>(hay->pieces[i].size());
  s.boundaries = bounds;
  std::vector<size_t> at(needles, 0);
  for (int j = 0; j < needles; ++j) {
    const double target = s.depths[j] * static_cast<double>(hay->tokens);
    size_t best = 0;
    for (size_t i = 1; i <= n; ++i)
      if (std::fabs(static_cast<double>(bounds[i]) - target) < std::fabs(static_cast<double>(bounds[best]) - target))
        best = i;
    at[j] = best;
  }
  s.prompt = prefix;
  int j = 0;
  for (size_t i = 0; i <= n; ++i) {
    for (; j < needles && at[j] == i; ++j) {
      s.needle_offsets.push_back(static_cast<int64_t>(s.prompt.size()));
      Append(&s.prompt, needle_ids[j]);
    }
    if (i < n) Append(&s.prompt, hay->pieces[i]);
  }
  Append(&s.prompt, question);
  s.answer = tok.Encode(NeedleAnswerText(s.numbers));
  s.shortfall = prompt_tokens - static_cast<int64_t>(s.prompt.size());
  return s;
}

}  // namespace longctx
