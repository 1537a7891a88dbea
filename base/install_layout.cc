// Why: see install_layout.h. LONGCTX_DATA_FROM_BIN (base/CMakeLists.txt) is
// the install's data directory relative to its binary directory, e.g.
// "../share/longctx".
#include "base/install_layout.h"

#include <filesystem>
#include <system_error>

namespace longctx {

std::string ExecutableDir() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : exe.parent_path().string();
}

std::string InstalledDataPath(const std::string& relative) {
  const std::string bin = ExecutableDir();
  if (bin.empty()) return {};
  return (std::filesystem::path(bin) / LONGCTX_DATA_FROM_BIN / relative).lexically_normal().string();
}

}  // namespace longctx
