// Why: the probe and the retrieval task are configured by TrainConfig fields
// (probe_*, data.retrieval_*); turning those into ProbeSettings and a
// RetrievalMixer happens here, once, for the trainer and for the commands that
// must rebuild what the trainer saw (`longctx eval --batch=last_train`
// replays the last batch with its retrieval rows). Errors name the field.
#ifndef LONGCTX_TRAIN_NIAH_PROBE_CONFIG_H_
#define LONGCTX_TRAIN_NIAH_PROBE_CONFIG_H_

#include <memory>

#include "absl/status/statusor.h"
#include "data/packer.h"
#include "data/retrieval_task_mixer.h"
#include "data/tokenizer.h"
#include "train/probe/niah_probe.h"
#include "train/train.pb.h"

namespace longctx {

// probe_* fields → settings (probe_max_len 0 = 2 × data.seq_len). Does not
// look at probe_every.
absl::StatusOr<ProbeSettings> ProbeSettingsFromConfig(const TrainConfig& config);

// data.retrieval_* → a mixer over the train split of tokens; nullptr when
// data.retrieval_fraction is 0.
absl::StatusOr<std::unique_ptr<RetrievalMixer>> MakeRetrievalMixer(const TrainConfig& config,
                                                                   const DocumentSource* tokens,
                                                                   const Tokenizer* tokenizer);

// Mixes retrieval rows into a replayed training batch exactly as the trainer
// did at `step` (no-op when the config has no retrieval task); first_row is
// the packer's rows_emitted before the batch was cut.
absl::Status MixRetrievalRows(const TrainConfig& config, const DocumentSource* tokens, int64_t step,
                              uint64_t first_row, PackedBatch* batch);

}  // namespace longctx

#endif  // LONGCTX_TRAIN_NIAH_PROBE_CONFIG_H_
