// Why: the one translation unit that includes the generated version header
// (base/version.h says why there is only one).
#include "base/version.h"

#include "base/longctx_version.h"

namespace longctx {

const char* LongctxVersion() { return LONGCTX_VERSION_STRING; }
const char* LongctxGitDescription() { return LONGCTX_GIT_DESCRIPTION; }
const char* LongctxBuildType() { return LONGCTX_BUILD_TYPE; }
bool LongctxBuiltWithCuda() { return LONGCTX_BUILT_WITH_CUDA != 0; }
bool LongctxBuiltNative() { return LONGCTX_BUILT_NATIVE != 0; }

}  // namespace longctx
