// Why: `longctx --version` answers what a bug report or a benchmark row needs
// to name the binary: the release, the commit, and what this build can run
// here (the backends compiled in, the CPU instruction sets the attention
// dispatches to on this machine). Kept out of the command table so the table
// only knows that a version flag exists.
#ifndef LONGCTX_TRAIN_CLI_VERSION_TEXT_H_
#define LONGCTX_TRAIN_CLI_VERSION_TEXT_H_

#include <string>

namespace longctx::cli {

// Lines without a trailing newline; the first is "longctx VERSION (GIT)",
// e.g. "longctx 0.1.0 (452c63b)".
std::string VersionText();

}  // namespace longctx::cli

#endif  // LONGCTX_TRAIN_CLI_VERSION_TEXT_H_
