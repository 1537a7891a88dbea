// Why: the papers explain long-context behaviour through where attention goes,
// so longctx must measure it on its own models:
//  * attention mass (RNoPE paper, Tables 3, 4, 8, 9): for the question/answer
//    ("qc") queries of a needle prompt, the attention probability summed over
//    the key segments begin (first 10 tokens) / needle / context / qc, averaged
//    over heads, per layer, then per layer kind; and the entropy of that
//    aggregated attention distribution;
//  * RoPE dimension contribution (Hong et al.): q·k split into its rotary pairs
//    (rotate-half pairing: dim p with p + rotary_dim/2), the share each pair
//    contributes per head, and how strongly the dominant pair tracks the
//    relative distance ("positional heads").
// Everything here is plain double arithmetic on host copies of the post-RoPE q
// and k that an inference prefill captured (model/inference.h), so it is exact
// and independent of the tiled kernels it is used to analyse.
#ifndef LONGCTX_MODEL_ATTENTION_ANALYSIS_H_
#define LONGCTX_MODEL_ATTENTION_ANALYSIS_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace longctx {

// One layer's attention inputs for a single sequence (one document, positions
// 0..T-1), as the attention kernel saw them (after QK-norm and RoPE).
struct CapturedAttention {
  int layer = 0;
  std::string kind;      // "rope_full", "rope_swa", "nope_full"
  bool uses_rope = false;
  int window = 0;        // 0 = full causal; else keys i-window < j <= i
  int rotary_dim = 0;    // rotated dims per head (pairs p, p + rotary_dim/2)
  int64_t tokens = 0, heads = 0, kv_heads = 0, head_dim = 0;
  std::vector<float> q;  // [tokens, heads, head_dim]
  std::vector<float> k;  // [tokens, kv_heads, head_dim]
};

// Attention probabilities of query i (head h) over keys 0..i (softmax of
// q·k/sqrt(head_dim), causal, window applied; masked keys get 0).
std::vector<double> AttentionRow(const CapturedAttention& a, int64_t head, int64_t i);

enum class Segment : int { kBegin = 0, kNeedle = 1, kContext = 2, kQc = 3 };
inline constexpr int kNumSegments = 4;
const char* SegmentName(Segment s);

struct LayerMass {
  int layer = 0;
  std::string kind;
  std::array<double, kNumSegments> mass{};  // sums to 1 (mean over heads and qc queries)
  double entropy = 0;  // nats, of the mean attention distribution over key positions
};

// Attention mass per segment for the queries labelled kQc. labels: [tokens].
std::vector<LayerMass> AttentionMass(const std::vector<CapturedAttention>& layers,
                                     const std::vector<Segment>& labels);

// Mean of per-layer results over the layers of each kind ("rope" = every layer
// that uses RoPE, "nope" = the others, "all"), as the RNoPE paper aggregates.
struct MassSummary {
  std::string group;
  int layers = 0;
  std::array<double, kNumSegments> mass{};
  double entropy = 0;
};
std::vector<MassSummary> SummarizeMass(const std::vector<LayerMass>& per_layer);

// RoPE pair contributions of one head, over the (query, key) pairs it attends
// to. share[p] = mean over pairs of |c_p| / Σ_p' |c_p'| where c_p is pair p's
// term of q·k (pairs beyond rotary_dim, which do not rotate, are one extra
// bucket at the end). dominant_distance_corr: Spearman correlation between the
// dominant pair argmax_p c_p and the distance i − j over the sampled pairs.
struct HeadContribution {
  int layer = 0;
  int head = 0;
  std::vector<double> share;  // rotary_dim/2 pairs (+1 bucket if rotary_dim < head_dim)
  double dominant_distance_corr = 0;
  int64_t pairs = 0;
};
// Samples up to max_pairs (query, key) pairs per head, deterministically from
// seed (all pairs when there are fewer). Layers without RoPE are skipped.
std::vector<HeadContribution> RopePairContributions(const std::vector<CapturedAttention>& layers,
                                                    int64_t max_pairs, uint64_t seed);

// Spearman rank correlation (average ranks for ties); 0 when either side is constant.
double SpearmanCorrelation(const std::vector<double>& x, const std::vector<double>& y);

nlohmann::json MassToJson(const std::vector<LayerMass>& per_layer, const std::vector<MassSummary>& summary);
nlohmann::json ContributionsToJson(const std::vector<HeadContribution>& heads, double positional_threshold);

}  // namespace longctx

#endif  // LONGCTX_MODEL_ATTENTION_ANALYSIS_H_
