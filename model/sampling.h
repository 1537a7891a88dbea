// Why: turning logits into the next token is the one random step of
// generation, so it lives in one small, seeded, testable place: greedy
// (temperature 0: argmax, ties to the lowest id), or a draw from
// softmax(logits / temperature) restricted to the top_k largest logits
// (top_k 0 = the whole vocabulary). The draw is computed in double from one
// uniform number per step of a std::mt19937_64 seeded with `seed`, so a seed
// reproduces a generation on any machine.
#ifndef LONGCTX_MODEL_SAMPLING_H_
#define LONGCTX_MODEL_SAMPLING_H_

#include <cstdint>
#include <random>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace longctx {

struct SamplingOptions {
  double temperature = 0.0;  // 0 = greedy
  int top_k = 0;             // 0 = no top-k cut
  uint64_t seed = 1;
};

// InvalidArgument naming the option (temperature < 0 or not finite, top_k < 0).
absl::Status ValidateSamplingOptions(const SamplingOptions& o);

class Sampler {
 public:
  explicit Sampler(const SamplingOptions& options);
  // The next token for logits [V]. Non-finite logits are never chosen (a NaN
  // or -inf entry has probability 0); all non-finite gives id 0.
  int32_t Next(absl::Span<const float> logits);
  // The distribution Next draws from (for tests): probabilities [V].
  std::vector<double> Probabilities(absl::Span<const float> logits) const;

 private:
  SamplingOptions options_;
  std::mt19937_64 rng_;
};

}  // namespace longctx

#endif  // LONGCTX_MODEL_SAMPLING_H_
