// Why: which longctx a binary is — the release version, the commit it was
// built from and how it was built — asked in one place, for `longctx
// --version` and anything that records where a figure came from. The values
// come from the build (cmake/LongctxVersion.cmake); only version.cc sees the
// generated header, so a new commit recompiles one file.
#ifndef LONGCTX_BASE_VERSION_H_
#define LONGCTX_BASE_VERSION_H_

namespace longctx {

// The project version of CMakeLists.txt's project(), e.g. "0.1.0".
const char* LongctxVersion();
// `git describe --always --dirty` of the source tree when CMake configured it
// (e.g. "452c63b", "452c63b-dirty"); "unknown" when it was no git checkout.
const char* LongctxGitDescription();
// CMAKE_BUILD_TYPE ("Release", "RelWithDebInfo", ...; empty when unset).
const char* LongctxBuildType();
// Whether the CUDA backend was compiled in (LONGCTX_CUDA resolved to ON).
bool LongctxBuiltWithCuda();
// Whether the code was compiled for the building machine's CPU
// (LONGCTX_NATIVE=ON, -march=native): such a binary may not run on an older CPU.
bool LongctxBuiltNative();

}  // namespace longctx

#endif  // LONGCTX_BASE_VERSION_H_
