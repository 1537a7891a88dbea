// Why: early return on a non-OK absl::Status, the one macro Abseil 20220623
// does not ship publicly.
#ifndef LONGCTX_BASE_STATUS_MACROS_H_
#define LONGCTX_BASE_STATUS_MACROS_H_

#include "absl/status/status.h"

#define LONGCTX_RETURN_IF_ERROR(expr)                 \
  do {                                                \
    const ::absl::Status _longctx_status = (expr);    \
    if (!_longctx_status.ok()) return _longctx_status; \
  } while (0)

#endif  // LONGCTX_BASE_STATUS_MACROS_H_
