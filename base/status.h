// Status and StatusOr<T>: the error-as-value types used at every boundary of sieve (peers, files,
// flags, caller arguments). A Status is either OK or carries a code and a human-readable message;
// an error a peer reported on the wire, or one a received message caused, also carries the
// protocol's error code (wire_code(), a pb::ErrorCode value; proto/error_code.h maps between the
// two), so a caller tells such errors apart by value, never by their text.
// Both are plain values: copyable, movable, and safe to use from any thread (no shared state).
// glog CHECK is reserved for sieve's own invariants; anything a peer, a file or a user can get
// wrong is reported through these types instead.
#ifndef SIEVE_BASE_STATUS_H_
#define SIEVE_BASE_STATUS_H_

#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace sieve {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument = 1,     // caller or peer supplied something malformed
  kOutOfRange = 2,          // an index, count or size outside its bound
  kFailedPrecondition = 3,  // the system is not in a state where this is allowed
  kNotFound = 4,
  kAlreadyExists = 5,
  kUnavailable = 6,       // a peer or resource cannot be reached (may be retried)
  kDeadlineExceeded = 7,  // a bounded wait ran out
  kDataLoss = 8,          // truncated or corrupt file / frame
  kUnimplemented = 9,
  kAborted = 10,  // stopped by shutdown or a dead peer
  kInternal = 11,
  kNonFinite = 12,  // NaN or Inf where finite values are required (e.g. a diverged residual)
};

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // The protocol's error code (pb::ErrorCode) of a wire error; 0 (ERROR_NONE) for any other.
  int wire_code() const { return wire_code_; }
  // This status with `code` as its wire code (an OK status stays OK, with none).
  Status WithWireCode(int code) const {
    Status s = *this;
    if (!s.ok()) s.wire_code_ = code;
    return s;
  }
  // This status with `context` put before its message; code and wire code kept.
  Status Prefixed(std::string_view context) const {
    Status s = *this;
    if (!s.ok()) s.message_ = std::string(context) + s.message_;
    return s;
  }
  // "OK" or "<CODE_NAME>: <message>".
  std::string ToString() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
  int wire_code_ = 0;
};

inline Status InvalidArgumentError(std::string m) {
  return {StatusCode::kInvalidArgument, std::move(m)};
}
inline Status OutOfRangeError(std::string m) { return {StatusCode::kOutOfRange, std::move(m)}; }
inline Status FailedPreconditionError(std::string m) {
  return {StatusCode::kFailedPrecondition, std::move(m)};
}
inline Status NotFoundError(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status AlreadyExistsError(std::string m) {
  return {StatusCode::kAlreadyExists, std::move(m)};
}
inline Status UnavailableError(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
inline Status DeadlineExceededError(std::string m) {
  return {StatusCode::kDeadlineExceeded, std::move(m)};
}
inline Status DataLossError(std::string m) { return {StatusCode::kDataLoss, std::move(m)}; }
inline Status UnimplementedError(std::string m) {
  return {StatusCode::kUnimplemented, std::move(m)};
}
inline Status AbortedError(std::string m) { return {StatusCode::kAborted, std::move(m)}; }
inline Status InternalError(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
inline Status NonFiniteError(std::string m) { return {StatusCode::kNonFinite, std::move(m)}; }

namespace internal {
// Prints `status` and what was asked of it to stderr, then aborts: the CHECK of StatusOr.
[[noreturn]] void DieOfBadStatusOrAccess(const Status& status);
}  // namespace internal

// Either a T or a non-OK Status. Built from an OK Status (which carries no value) it holds
// INTERNAL "StatusOr built from an OK status" instead. Reading value() (or * / ->) of an error is
// a programming error: the process prints the status and aborts, like a failed CHECK.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(Status status)  // NOLINT: implicit by design
      : v_(status.ok() ? InternalError("StatusOr built from an OK status") : std::move(status)) {}
  StatusOr(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design

  bool ok() const { return std::holds_alternative<T>(v_); }
  Status status() const { return ok() ? Status::Ok() : std::get<Status>(v_); }
  T& value() & {
    CheckOk();
    return std::get<T>(v_);
  }
  const T& value() const& {
    CheckOk();
    return std::get<T>(v_);
  }
  T&& value() && {
    CheckOk();
    return std::get<T>(std::move(v_));
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }

 private:
  void CheckOk() const {
    if (!ok()) internal::DieOfBadStatusOrAccess(std::get<Status>(v_));
  }

  std::variant<Status, T> v_;
};

}  // namespace sieve

// Returns early from the enclosing function with the Status if it is not OK.
#define SIEVE_RETURN_IF_ERROR(expr)                \
  do {                                             \
    ::sieve::Status sieve_status_ = (expr);        \
    if (!sieve_status_.ok()) return sieve_status_; \
  } while (0)

// Evaluates `rexpr` (a StatusOr<T>); on error returns its Status from the enclosing function,
// else moves the value into `lhs` (a declaration such as `auto x` or an existing variable).
#define SIEVE_ASSIGN_OR_RETURN(lhs, rexpr) \
  SIEVE_ASSIGN_OR_RETURN_IMPL_(SIEVE_STATUS_CONCAT_(sieve_statusor_, __LINE__), lhs, rexpr)
#define SIEVE_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, rexpr) \
  auto tmp = (rexpr);                                 \
  if (!tmp.ok()) return tmp.status();                 \
  lhs = std::move(tmp).value()
#define SIEVE_STATUS_CONCAT_(a, b) SIEVE_STATUS_CONCAT_INNER_(a, b)
#define SIEVE_STATUS_CONCAT_INNER_(a, b) a##b

#endif  // SIEVE_BASE_STATUS_H_
