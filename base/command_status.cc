// Why: see command_status.h.
#include "base/command_status.h"

#include <cstdio>
#include <string>

namespace longctx {

int FailCommand(const absl::Status& st) {
  std::fprintf(stderr, "longctx: error: %s\n", std::string(st.message()).c_str());
  return 1;
}

}  // namespace longctx
