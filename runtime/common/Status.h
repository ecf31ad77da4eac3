//===- Status.h - What failed, set where it failed --------------*- C++ -*-===//
//
// Every fallible call of the runtime's C++ layers (Device, Session, the
// communicators) returns a Status: a code (loom_status_code) and a message.
// The layer that sees a failure chooses the code: a Device for a kernel,
// CUDA or cuBLAS failure (kernel) or a failed allocation (out of memory),
// a communicator or the watchdog for MPI and NCCL (communication), the
// executor for a bad argument. Callers above only add context to the
// message, so the C ABI returns the code it is given and never reads the
// text. Foreign errors (CUDA, NCCL, MPI) become a Status with the file and
// line of the call that failed (LOOM_FOREIGN_STATUS).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_COMMON_STATUS_H
#define LOOM_RUNTIME_COMMON_STATUS_H

#include "loom/loom_program.h"

#include <string>
#include <utility>

namespace loom::rt {

class [[nodiscard]] Status {
public:
  /// Success.
  Status() = default;
  Status(loom_status_code code, std::string message)
      : statusCode(code), text(std::move(message)) {}

  bool ok() const { return statusCode == LOOM_OK; }
  loom_status_code code() const { return statusCode; }
  const std::string &message() const { return text; }

  /// The same failure with `context: ` before its message (success stays
  /// success).
  Status withContext(const std::string &context) const {
    if (ok())
      return *this;
    return Status(statusCode, context + ": " + text);
  }

private:
  loom_status_code statusCode = LOOM_OK;
  std::string text;
};

inline Status invalidArgument(std::string message) {
  return Status(LOOM_ERROR_INVALID_ARGUMENT, std::move(message));
}
inline Status artifactError(std::string message) {
  return Status(LOOM_ERROR_ARTIFACT, std::move(message));
}
inline Status kernelError(std::string message) {
  return Status(LOOM_ERROR_KERNEL, std::move(message));
}
inline Status communicationError(std::string message) {
  return Status(LOOM_ERROR_COMMUNICATION, std::move(message));
}
inline Status outOfMemory(std::string message) {
  return Status(LOOM_ERROR_OUT_OF_MEMORY, std::move(message));
}
inline Status unavailable(std::string message) {
  return Status(LOOM_ERROR_UNAVAILABLE, std::move(message));
}

/// " (File.cpp:123)": where a foreign call failed, for its message.
inline std::string foreignWhere(const char *file, int line) {
  std::string name = file;
  if (size_t slash = name.rfind('/'); slash != std::string::npos)
    name = name.substr(slash + 1);
  return " (" + name + ":" + std::to_string(line) + ")";
}

/// A foreign library's failure at `file`:`line`: `what` (the call) and
/// `detail` (the library's own text for its error code).
inline Status foreignStatus(loom_status_code code, const char *file, int line,
                            const std::string &what,
                            const std::string &detail) {
  return Status(code, what + " failed: " + detail + foreignWhere(file, line));
}

} // namespace loom::rt

/// A foreign call's failure as a Status with this file and line.
#define LOOM_FOREIGN_STATUS(code, what, detail)                                \
  ::loom::rt::foreignStatus(code, __FILE__, __LINE__, what, detail)

/// Returns the status of `expr` from the enclosing function unless it is
/// success.
#define LOOM_RETURN_IF_ERROR(expr)                                             \
  do {                                                                         \
    if (::loom::rt::Status loomStatus = (expr); !loomStatus.ok())              \
      return loomStatus;                                                       \
  } while (false)

#endif // LOOM_RUNTIME_COMMON_STATUS_H
