// Errors are values: a library reports what went wrong to a DiagnosticEngine
// and returns failure; only the CLI turns that into a message and exit code.
#pragma once

#include <optional>
#include <utility>

namespace mgc {

class [[nodiscard]] LogicalResult {
public:
  static LogicalResult success() { return LogicalResult(true); }
  static LogicalResult failure() { return LogicalResult(false); }
  bool succeeded() const { return ok_; }
  bool failed() const { return !ok_; }

private:
  explicit LogicalResult(bool ok) : ok_(ok) {}
  bool ok_;
};

inline LogicalResult success() { return LogicalResult::success(); }
inline LogicalResult failure() { return LogicalResult::failure(); }
inline bool failed(LogicalResult r) { return r.failed(); }
inline bool succeeded(LogicalResult r) { return r.succeeded(); }

// A value or nothing; the reason for nothing has gone to a DiagnosticEngine.
template <typename T> class [[nodiscard]] FailureOr : public std::optional<T> {
public:
  FailureOr(LogicalResult r) { (void)r; }
  FailureOr(T value) : std::optional<T>(std::move(value)) {}
  bool failed() const { return !this->has_value(); }
  bool succeeded() const { return this->has_value(); }
};

} // namespace mgc
