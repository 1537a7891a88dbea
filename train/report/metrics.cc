// Why: see metrics.h.
#include "train/report/metrics.h"

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace longctx {

absl::StatusOr<MetricsWriter> MetricsWriter::Open(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "a");
  if (f == nullptr) return absl::UnavailableError(absl::StrCat(path, ": cannot open for append: ", std::strerror(errno)));
  return MetricsWriter(path, f);
}

MetricsWriter::~MetricsWriter() {
  if (f_) std::fclose(f_);
}

absl::Status MetricsWriter::Write(const nlohmann::json& event) {
  const std::string line = event.dump() + "\n";
  if (std::fwrite(line.data(), 1, line.size(), f_) != line.size() || std::fflush(f_) != 0)
    return absl::UnavailableError(absl::StrCat(path_, ": write failed: ", std::strerror(errno)));
  return absl::OkStatus();
}

}  // namespace longctx
