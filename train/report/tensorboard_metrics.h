// Why: every number the trainer reports is already one metrics.jsonl event;
// the TensorBoard records are derived from those same events (so the two can
// never disagree, and a test can check one against the other). This maps an
// event to scalars, histograms and images:
//   train   -> train/loss, train/lr, train/grad_norm, train/tokens_per_s
//   eval    -> eval/loss
//   probe   -> probe/effective_length, probe/pass_rate/len_<L>,
//              probe/answer_loss/len_<L>, image probe/heatmap (out_dir/probe/step-N.png)
//   loss_by_position -> loss_by_position/pos_<lo>_<hi> (mean loss per bucket),
//              image loss_by_position/plot
//   posfreq -> posfreq/<full|sliding>/share_ge_half, .../share_ge_three_quarters,
//              .../share_le_half, histogram posfreq/<kind>/distance (pair counts
//              per relative distance bin), image posfreq/plot
#ifndef LONGCTX_TRAIN_REPORT_TENSORBOARD_METRICS_H_
#define LONGCTX_TRAIN_REPORT_TENSORBOARD_METRICS_H_

#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "train/report/event_file.h"

namespace longctx {

// Writes the records of one metrics event (other kinds: nothing). out_dir
// locates the probe heatmaps; a missing heatmap is skipped.
absl::Status WriteMetricsEventToTensorBoard(EventFileWriter& writer, const nlohmann::json& event,
                                            const std::string& out_dir);

}  // namespace longctx

#endif  // LONGCTX_TRAIN_REPORT_TENSORBOARD_METRICS_H_
