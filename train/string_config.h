// Why: STRING's shift S defaults to a third of the length the model was
// trained at (the paper's L/3), which only the checkpoint's config knows, so
// every command that offers STRING (eval, generate, probe) resolves its flags
// against the checkpoint the same way, here.
#ifndef LONGCTX_TRAIN_STRING_CONFIG_H_
#define LONGCTX_TRAIN_STRING_CONFIG_H_

#include "absl/status/statusor.h"
#include "model/layer_attention.h"
#include "train/train.pb.h"

namespace longctx {

// flags.s == 0 becomes config.data.seq_len / 3 (at least 1); the result is
// validated (InvalidArgument names --string_s / --string_w). Disabled flags
// pass through unchanged.
absl::StatusOr<StringOptions> ResolveStringOptions(StringOptions flags, const TrainConfig& config);

}  // namespace longctx

#endif  // LONGCTX_TRAIN_STRING_CONFIG_H_
