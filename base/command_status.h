// Why: every `longctx` subcommand and benchmark ends the same way on a failed
// absl::Status — one line on stderr saying what and where, exit status 1 —
// and the benchmarks must not depend on the command line's room to do so.
#ifndef LONGCTX_BASE_COMMAND_STATUS_H_
#define LONGCTX_BASE_COMMAND_STATUS_H_

#include "absl/status/status.h"

namespace longctx {

// Prints "longctx: error: MESSAGE" on stderr. Returns the exit status, 1.
int FailCommand(const absl::Status& st);

}  // namespace longctx

#endif  // LONGCTX_BASE_COMMAND_STATUS_H_
