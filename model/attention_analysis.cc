// Why: see attention_analysis.h. Straight loops in double: the sizes analysed
// (a few thousand tokens, a handful of layers) make exactness cheaper than
// cleverness.
#include "model/attention_analysis.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include <nlohmann/json.hpp>

#include "base/log.h"
#include "kernels/math/attention_visibility.h"

namespace longctx {
namespace {

const float* QRow(const CapturedAttention& a, int64_t i, int64_t h) {
  return a.q.data() + (i * a.heads + h) * a.head_dim;
}
const float* KRow(const CapturedAttention& a, int64_t j, int64_t h) {
  const int64_t group = a.heads / a.kv_heads;
  return a.k.data() + (j * a.kv_heads + h / group) * a.head_dim;
}
// The keys [first, end) query i sees: one document from position 0, queries
// and keys the same tokens (kernels/math/attention_visibility.h).
struct KeyRange {
  int64_t first, end;
};
KeyRange VisibleKeys(const CapturedAttention& a, int64_t i) {
  const math::AttentionMask mask{a.window, 0};
  return {math::FirstVisibleKey(mask, 0, i), math::EndVisibleKey(mask, i)};
}
void CheckShapes(const CapturedAttention& a) {
  CHECK(a.tokens > 0 && a.heads > 0 && a.kv_heads > 0 && a.head_dim > 0 && a.heads % a.kv_heads == 0)
      << "layer " << a.layer << ": bad captured shape";
  CHECK(static_cast<int64_t>(a.q.size()) == a.tokens * a.heads * a.head_dim) << "layer " << a.layer << ": q size";
  CHECK(static_cast<int64_t>(a.k.size()) == a.tokens * a.kv_heads * a.head_dim) << "layer " << a.layer << ": k size";
}

std::vector<double> Ranks(const std::vector<double>& x) {
  std::vector<size_t> idx(x.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return x[a] < x[b]; });
  std::vector<double> r(x.size());
  for (size_t s = 0; s < idx.size();) {
    size_t e = s;
    while (e + 1 < idx.size() && x[idx[e + 1]] == x[idx[s]]) ++e;
    const double avg = 0.5 * (static_cast<double>(s) + static_cast<double>(e));
    for (size_t t = s; t <= e; ++t) r[idx[t]] = avg;
    s = e + 1;
  }
  return r;
}

}  // namespace

const char* SegmentName(Segment s) {
  switch (s) {
    case Segment::kBegin: return "begin";
    case Segment::kNeedle: return "needle";
    case Segment::kContext: return "context";
    case Segment::kQc: return "qc";
  }
  return "?";
}

std::vector<double> AttentionRow(const CapturedAttention& a, int64_t head, int64_t i) {
  CheckShapes(a);
  CHECK(head >= 0 && head < a.heads && i >= 0 && i < a.tokens) << "AttentionRow out of range";
  const double scale = 1.0 / std::sqrt(static_cast<double>(a.head_dim));
  std::vector<double> p(i + 1, 0.0);
  const auto [j0, j1] = VisibleKeys(a, i);
  double mx = -std::numeric_limits<double>::infinity();
  const float* q = QRow(a, i, head);
  for (int64_t j = j0; j < j1; ++j) {
    const float* k = KRow(a, j, head);
    double s = 0;
    for (int64_t d = 0; d < a.head_dim; ++d) s += static_cast<double>(q[d]) * k[d];
    p[j] = s * scale;
    mx = std::max(mx, p[j]);
  }
  double z = 0;
  for (int64_t j = j0; j < j1; ++j) z += (p[j] = std::exp(p[j] - mx));
  for (int64_t j = j0; j < j1; ++j) p[j] /= z;
  return p;
}

std::vector<LayerMass> AttentionMass(const std::vector<CapturedAttention>& layers,
                                     const std::vector<Segment>& labels) {
  std::vector<LayerMass> out;
  for (const CapturedAttention& a : layers) {
    CheckShapes(a);
    CHECK(static_cast<int64_t>(labels.size()) == a.tokens) << "labels: " << labels.size() << " for " << a.tokens
                                                           << " tokens";
    LayerMass lm;
    lm.layer = a.layer;
    lm.kind = a.kind;
    std::vector<double> mean(a.tokens, 0.0);
    int64_t rows = 0;
    for (int64_t i = 0; i < a.tokens; ++i) {
      if (labels[i] != Segment::kQc) continue;
      for (int64_t h = 0; h < a.heads; ++h) {
        std::vector<double> p = AttentionRow(a, h, i);
        for (int64_t j = 0; j <= i; ++j) mean[j] += p[j];
        ++rows;
      }
    }
    CHECK(rows > 0) << "AttentionMass: no token is labelled qc";
    double entropy = 0;
    for (int64_t j = 0; j < a.tokens; ++j) {
      const double p = mean[j] / static_cast<double>(rows);
      lm.mass[static_cast<int>(labels[j])] += p;
      if (p > 0) entropy -= p * std::log(p);
    }
    lm.entropy = entropy;
    out.push_back(lm);
  }
  return out;
}

std::vector<MassSummary> SummarizeMass(const std::vector<LayerMass>& per_layer) {
  std::vector<MassSummary> groups = {{"rope"}, {"nope"}, {"all"}};
  for (const LayerMass& lm : per_layer) {
    const bool rope = lm.kind.rfind("rope", 0) == 0;
    for (MassSummary& g : groups) {
      if ((g.group == "rope" && !rope) || (g.group == "nope" && rope)) continue;
      ++g.layers;
      for (int s = 0; s < kNumSegments; ++s) g.mass[s] += lm.mass[s];
      g.entropy += lm.entropy;
    }
  }
  std::vector<MassSummary> out;
  for (MassSummary& g : groups) {
    if (g.layers == 0) continue;
    for (double& m : g.mass) m /= g.layers;
    g.entropy /= g.layers;
    out.push_back(g);
  }
  return out;
}

double SpearmanCorrelation(const std::vector<double>& x, const std::vector<double>& y) {
  CHECK(x.size() == y.size()) << "SpearmanCorrelation: sizes differ";
  if (x.size() < 2) return 0;
  const std::vector<double> rx = Ranks(x), ry = Ranks(y);
  const double n = static_cast<double>(x.size());
  const double mx = std::accumulate(rx.begin(), rx.end(), 0.0) / n, my = std::accumulate(ry.begin(), ry.end(), 0.0) / n;
  double sxy = 0, sxx = 0, syy = 0;
  for (size_t i = 0; i < rx.size(); ++i) {
    sxy += (rx[i] - mx) * (ry[i] - my);
    sxx += (rx[i] - mx) * (rx[i] - mx);
    syy += (ry[i] - my) * (ry[i] - my);
  }
  if (sxx <= 0 || syy <= 0) return 0;
  return sxy / std::sqrt(sxx * syy);
}

std::vector<HeadContribution> RopePairContributions(const std::vector<CapturedAttention>& layers,
                                                    int64_t max_pairs, uint64_t seed) {
  std::vector<HeadContribution> out;
  for (const CapturedAttention& a : layers) {
    if (!a.uses_rope) continue;
    CheckShapes(a);
    const int64_t rd = a.rotary_dim > 0 ? a.rotary_dim : a.head_dim;
    CHECK(rd % 2 == 0 && rd <= a.head_dim) << "layer " << a.layer << ": rotary_dim " << rd;
    const int64_t half = rd / 2;
    const bool extra = rd < a.head_dim;
    // Every visible (i, j) pair, or a seeded sample of them.
    std::vector<std::pair<int64_t, int64_t>> pairs;
    int64_t total = 0;
    for (int64_t i = 0; i < a.tokens; ++i) total += VisibleKeys(a, i).end - VisibleKeys(a, i).first;
    std::mt19937_64 rng(seed + 7919 * static_cast<uint64_t>(a.layer));
    if (total <= max_pairs) {
      for (int64_t i = 0; i < a.tokens; ++i)
        for (int64_t j = VisibleKeys(a, i).first; j < VisibleKeys(a, i).end; ++j) pairs.emplace_back(i, j);
    } else {
      std::uniform_int_distribution<int64_t> qi(0, a.tokens - 1);
      while (static_cast<int64_t>(pairs.size()) < max_pairs) {
        const int64_t i = qi(rng);
        std::uniform_int_distribution<int64_t> kj(VisibleKeys(a, i).first, VisibleKeys(a, i).end - 1);
        pairs.emplace_back(i, kj(rng));
      }
    }
    for (int64_t h = 0; h < a.heads; ++h) {
      HeadContribution hc;
      hc.layer = a.layer;
      hc.head = static_cast<int>(h);
      hc.share.assign(half + (extra ? 1 : 0), 0.0);
      std::vector<double> dominant, distance;
      std::vector<double> c(hc.share.size());
      for (const auto& [i, j] : pairs) {
        const float* q = QRow(a, i, h);
        const float* k = KRow(a, j, h);
        for (int64_t p = 0; p < half; ++p)
          c[p] = static_cast<double>(q[p]) * k[p] + static_cast<double>(q[p + half]) * k[p + half];
        if (extra) {
          c[half] = 0;
          for (int64_t d = rd; d < a.head_dim; ++d) c[half] += static_cast<double>(q[d]) * k[d];
        }
        double total_abs = 0;
        for (double v : c) total_abs += std::abs(v);
        if (total_abs > 0)
          for (size_t p = 0; p < c.size(); ++p) hc.share[p] += std::abs(c[p]) / total_abs;
        dominant.push_back(static_cast<double>(std::max_element(c.begin(), c.begin() + half) - c.begin()));
        distance.push_back(static_cast<double>(i - j));
      }
      for (double& s : hc.share) s /= static_cast<double>(pairs.size());
      hc.pairs = static_cast<int64_t>(pairs.size());
      hc.dominant_distance_corr = SpearmanCorrelation(dominant, distance);
      out.push_back(std::move(hc));
    }
  }
  return out;
}

nlohmann::json MassToJson(const std::vector<LayerMass>& per_layer, const std::vector<MassSummary>& summary) {
  nlohmann::json j;
  auto seg = [](const std::array<double, kNumSegments>& m) {
    nlohmann::json o;
    for (int s = 0; s < kNumSegments; ++s) o[SegmentName(static_cast<Segment>(s))] = m[s];
    return o;
  };
  for (const LayerMass& lm : per_layer)
    j["layers"].push_back({{"layer", lm.layer}, {"kind", lm.kind}, {"mass", seg(lm.mass)}, {"entropy", lm.entropy}});
  for (const MassSummary& g : summary)
    j["summary"].push_back({{"group", g.group}, {"layers", g.layers}, {"mass", seg(g.mass)}, {"entropy", g.entropy}});
  return j;
}

nlohmann::json ContributionsToJson(const std::vector<HeadContribution>& heads, double positional_threshold) {
  nlohmann::json j = nlohmann::json::object();
  j["positional_threshold"] = positional_threshold;
  j["heads"] = nlohmann::json::array();
  j["positional_heads"] = nlohmann::json::array();
  for (const HeadContribution& hc : heads) {
    j["heads"].push_back({{"layer", hc.layer},
                          {"head", hc.head},
                          {"pairs", hc.pairs},
                          {"share", hc.share},
                          {"dominant_distance_corr", hc.dominant_distance_corr}});
    if (std::abs(hc.dominant_distance_corr) >= positional_threshold)
      j["positional_heads"].push_back({{"layer", hc.layer}, {"head", hc.head}});
  }
  return j;
}

}  // namespace longctx
