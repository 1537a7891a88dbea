// Why: the one table of backend names, apart from the code that makes them,
// so that what only needs to know what a name is (the config check, the
// memory check; also the fuzz build of the config reader, which links no
// backend) asks it without linking every backend. See backend_registry.h.
#include <array>

#include "absl/strings/str_cat.h"
#include "kernels/backend_registry.h"

namespace longctx {
namespace {

struct NameEntry {
  const char* name;
  Device device;
};
constexpr std::array<NameEntry, 2> kBackends = {{{"cpu", Device::kCpu}, {"cuda", Device::kCuda}}};

}  // namespace

absl::StatusOr<BackendInfo> FindBackend(std::string_view name) {
  for (const NameEntry& e : kBackends)
    if (name == e.name) return BackendInfo{e.name, e.device};
  std::string expected;
  for (size_t i = 0; i < kBackends.size(); ++i)
    absl::StrAppend(&expected, i == 0 ? "" : i + 1 == kBackends.size() ? " or " : ", ", kBackends[i].name);
  return absl::NotFoundError(absl::StrCat("unknown backend '", std::string(name), "' (expected ", expected, ")"));
}

std::string KnownBackendNames() {
  std::string s;
  for (size_t i = 0; i < kBackends.size(); ++i)
    absl::StrAppend(&s, i == 0 ? "" : i + 1 == kBackends.size() ? " or " : ", ", "\"", kBackends[i].name, "\"");
  return s;
}

}  // namespace longctx
