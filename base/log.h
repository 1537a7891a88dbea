// Why: Debian 12's Abseil (20220623) has no absl/log, so longctx carries this
// small stream logger with the same spelling: LOG(INFO) << ...; CHECK(c) << ...;
// CHECK_EQ/NE/LT/LE/GT/GE. CHECK is for broken invariants only (it aborts with
// file:line); recoverable errors are absl::Status.
#ifndef LONGCTX_BASE_LOG_H_
#define LONGCTX_BASE_LOG_H_

#include <sstream>
#include <string>

namespace longctx::logging {

enum class Severity { kInfo, kWarning, kError, kFatal };

class LogMessage {
 public:
  LogMessage(const char* file, int line, Severity severity);
  ~LogMessage();  // emits; aborts for kFatal
  std::ostream& stream() { return stream_; }

 private:
  const char* file_;
  int line_;
  Severity severity_;
  std::ostringstream stream_;
};

// Swallows the stream of a CHECK that passed.
struct Voidify {
  void operator&(std::ostream&) {}
};

// Minimum severity printed (INFO by default; LONGCTX_LOG_LEVEL=warning|error).
void SetMinSeverity(Severity s);

}  // namespace longctx::logging

#define LONGCTX_LOG_INFO ::longctx::logging::Severity::kInfo
#define LONGCTX_LOG_WARNING ::longctx::logging::Severity::kWarning
#define LONGCTX_LOG_ERROR ::longctx::logging::Severity::kError
#define LONGCTX_LOG_FATAL ::longctx::logging::Severity::kFatal

#define LOG(sev) ::longctx::logging::LogMessage(__FILE__, __LINE__, LONGCTX_LOG_##sev).stream()

#define CHECK(cond)                                                                          \
  (cond) ? (void)0                                                                           \
         : ::longctx::logging::Voidify() &                                                   \
               ::longctx::logging::LogMessage(__FILE__, __LINE__, LONGCTX_LOG_FATAL).stream() \
                   << "Check failed: " #cond " "

#define LONGCTX_CHECK_OP(a, b, op) CHECK((a)op(b)) << "(" << (a) << " vs " << (b) << ") "
#define CHECK_EQ(a, b) LONGCTX_CHECK_OP(a, b, ==)
#define CHECK_NE(a, b) LONGCTX_CHECK_OP(a, b, !=)
#define CHECK_LT(a, b) LONGCTX_CHECK_OP(a, b, <)
#define CHECK_LE(a, b) LONGCTX_CHECK_OP(a, b, <=)
#define CHECK_GT(a, b) LONGCTX_CHECK_OP(a, b, >)
#define CHECK_GE(a, b) LONGCTX_CHECK_OP(a, b, >=)
#define CHECK_OK(expr)                                   \
  do {                                                   \
    const ::absl::Status _longctx_st = (expr);           \
    CHECK(_longctx_st.ok()) << _longctx_st.ToString();   \
  } while (0)

#endif  // LONGCTX_BASE_LOG_H_
