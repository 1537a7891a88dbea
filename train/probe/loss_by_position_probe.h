// Why: the loss-by-position probe run on a model: the same long held-out
// documents every time (so two checkpoints' curves are comparable point by
// point), each its own attention segment from position 0, forward passes
// only, bucketed by train/probe/loss_by_position.h; and the one metrics event
// that the trainer's hook and `longctx eval --loss_by_position` both write.
// The model's STRING options, when set, apply to its forwards as they are.
#ifndef LONGCTX_TRAIN_PROBE_LOSS_BY_POSITION_PROBE_H_
#define LONGCTX_TRAIN_PROBE_LOSS_BY_POSITION_PROBE_H_

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "data/document_source.h"
#include "model/transformer.h"
#include "train/device_batch.h"
#include "train/probe/loss_by_position.h"

namespace longctx {

struct LossByPositionSettings {
  int64_t train_len = 0;  // L: data.seq_len of the run
  int64_t max_len = 0;    // positions probed: [0, max_len)
  int max_docs = 16;      // documents (longer than L) read
  // Tokens of one forward pass (documents are grouped into one row up to this;
  // a document longer than it still gets a forward of its own).
  int64_t tokens_per_forward = 4096;
};

// InvalidArgument naming `prefix` + the field for settings that cannot run.
absl::Status ValidateLossByPositionSettings(const LossByPositionSettings& s, const std::string& prefix);

// The first max_docs of `docs` (a split's documents) with more than
// train_len tokens, in the given order.
std::vector<uint32_t> LongDocuments(const DocumentSource& source, const std::vector<uint32_t>& docs,
                                    int64_t train_len, int max_docs);

// Forward passes over `docs` (each cut to its first max_len + 1 tokens: max_len
// loss positions), per-token losses bucketed. FailedPrecondition for no docs.
absl::StatusOr<LossByPosition> RunLossByPosition(Transformer& model, DeviceBatch& device_batch,
                                                 const DocumentSource& source, const std::vector<uint32_t>& docs,
                                                 const LossByPositionSettings& settings);

// {"kind": "loss_by_position", "step", "train_len", "max_len", "documents",
//  "buckets": [{"lo", "hi", "loss" (null when no document covers it), "tokens", "docs"}]}.
nlohmann::json LossByPositionEvent(const LossByPosition& r, int64_t step);

// "0-32 2.31 | 32-64 2.05 | ... (16 docs)" for the stdout line.
std::string LossByPositionSummary(const LossByPosition& r);

}  // namespace longctx

#endif  // LONGCTX_TRAIN_PROBE_LOSS_BY_POSITION_PROBE_H_
