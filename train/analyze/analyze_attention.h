// Why: `longctx analyze attention` runs the papers' attention analyses on a
// trained checkpoint: needle prompts in the probe's format (data/retrieval_task.h)
// with the needle near a chosen depth (the RNoPE paper uses about 50 %), the
// correct answer appended (teacher-forced, so the "qc" segment is question +
// completion), one prefill per sample through the inference engine with the
// capture hook, then model/attention_analysis.h on what each layer's attention
// saw: segment mass and entropy per layer and per layer kind (Tables 3, 4, 8, 9)
// and RoPE pair contributions / positional heads (Hong et al.). With
// ablate_heads, the answer loss is measured with and without those heads
// (their attention output zeroed) to test what a head does.
#ifndef LONGCTX_TRAIN_ANALYZE_ATTENTION_H_
#define LONGCTX_TRAIN_ANALYZE_ATTENTION_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"

namespace longctx {

struct AnalyzeAttentionOptions {
  std::string checkpoint;
  std::string data;             // overrides the checkpoint's data.path when set
  int64_t length = 0;           // prompt tokens; 0 = the checkpoint's data.seq_len
  int samples = 8;
  double depth = 0.5;           // needle depth; samples are drawn until the needle is within ±0.05
  int needles = 1;
  std::string format = "";      // "paper" / "compact"; "" = the checkpoint's probe_format
  int64_t max_pairs = 20000;    // (query, key) pairs sampled per layer for the pair analysis
  double positional_threshold = 0.3;  // |Spearman(dominant pair, distance)| for a positional head
  uint64_t seed = 1;
  std::vector<std::pair<int, int>> ablate_heads;  // (layer, head)
};

// The whole report (also printed by the command): options, per-layer mass,
// per-kind summary, head contributions, positional heads, and (with ablation)
// answer losses with and without the heads.
absl::StatusOr<nlohmann::json> AnalyzeAttention(const AnalyzeAttentionOptions& options);

// `longctx analyze attention --checkpoint DIR [--length N] [--samples K] [--depth 0.5]
//  [--needles 1] [--format paper|compact] [--max_pairs N] [--positional_threshold T]
//  [--ablate_heads L:H,L:H] [--seed S] [--json_out FILE]`
int RunAnalyzeAttentionCommand(const AnalyzeAttentionOptions& options, const std::string& json_out);

// "3:1,5:0" → {(3,1),(5,0)}; InvalidArgument naming the bad item.
absl::StatusOr<std::vector<std::pair<int, int>>> ParseHeadList(const std::string& text);

}  // namespace longctx

#endif  // LONGCTX_TRAIN_ANALYZE_ATTENTION_H_
