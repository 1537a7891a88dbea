// Why: an installed longctx (`cmake --install build --prefix P`) has no source
// tree to read files from: what it needs at run time beside the binary (the
// PyTorch peer script, the converted tokenizer vocabularies) lies under
// P/share/longctx, and the binary finds that folder from its own path, so an
// install can move as a whole (any prefix, no absolute path compiled in).
#ifndef LONGCTX_BASE_INSTALL_LAYOUT_H_
#define LONGCTX_BASE_INSTALL_LAYOUT_H_

#include <string>

namespace longctx {

// The directory of the running executable (from /proc/self/exe); empty when
// it cannot be read.
std::string ExecutableDir();

// P/share/longctx/`relative` for the binary P/bin/longctx (the install's data
// directory, found relative to ExecutableDir(); the bin → data step comes
// from CMake's install directories). The path whether or not it exists (a
// binary in a build tree has none); empty when ExecutableDir() is.
std::string InstalledDataPath(const std::string& relative);

}  // namespace longctx

#endif  // LONGCTX_BASE_INSTALL_LAYOUT_H_
