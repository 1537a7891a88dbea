// Why: see string_config.h.
#include "train/string_config.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace longctx {

absl::StatusOr<StringOptions> ResolveStringOptions(StringOptions flags, const TrainConfig& config) {
  if (!flags.enabled) return flags;
  if (flags.s < 0) return absl::InvalidArgumentError(absl::StrCat("--string_s: must be >= 0 (got ", flags.s, ")"));
  if (flags.w < 0) return absl::InvalidArgumentError(absl::StrCat("--string_w: must be >= 0 (got ", flags.w, ")"));
  if (flags.s == 0) flags.s = std::max(1, config.data().seq_len() / 3);
  absl::Status st = ValidateStringOptions(flags);
  if (!st.ok()) return st;
  return flags;
}

}  // namespace longctx
