// Why: see log.h. Lines look like "I1122 17:50:38.123 file.cc:42] message".
#include "base/log.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

namespace longctx::logging {
namespace {

Severity InitialSeverity() {
  const char* env = std::getenv("LONGCTX_LOG_LEVEL");
  if (env == nullptr) return Severity::kInfo;
  if (std::strcmp(env, "warning") == 0) return Severity::kWarning;
  if (std::strcmp(env, "error") == 0) return Severity::kError;
  return Severity::kInfo;
}

std::atomic<int>& MinSeverity() {
  static std::atomic<int> s{static_cast<int>(InitialSeverity())};
  return s;
}

}  // namespace

void SetMinSeverity(Severity s) { MinSeverity().store(static_cast<int>(s)); }

LogMessage::LogMessage(const char* file, int line, Severity severity)
    : file_(file), line_(line), severity_(severity) {}

LogMessage::~LogMessage() {
  if (severity_ != Severity::kFatal && static_cast<int>(severity_) < MinSeverity().load()) return;
  const char* base = std::strrchr(file_, '/');
  base = base ? base + 1 : file_;
  auto now = std::chrono::system_clock::now();
  std::time_t t = std::chrono::system_clock::to_time_t(now);
  int ms = static_cast<int>(
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000);
  std::tm tm;
  localtime_r(&t, &tm);
  static const char kLetters[] = {'I', 'W', 'E', 'F'};
  std::fprintf(stderr, "%c%02d%02d %02d:%02d:%02d.%03d %s:%d] %s\n", kLetters[static_cast<int>(severity_)],
               tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ms, base, line_,
               stream_.str().c_str());
  if (severity_ == Severity::kFatal) {
    std::fflush(stderr);
    std::abort();
  }
}

}  // namespace longctx::logging
