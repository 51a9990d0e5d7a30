#include "base/status.h"

#include <cstdio>
#include <cstdlib>

#include "base/enum_names.h"

namespace sieve {

namespace {

constexpr EnumName<StatusCode> kStatusCodeNames[] = {
    {StatusCode::kOk, "OK"},
    {StatusCode::kInvalidArgument, "INVALID_ARGUMENT"},
    {StatusCode::kOutOfRange, "OUT_OF_RANGE"},
    {StatusCode::kFailedPrecondition, "FAILED_PRECONDITION"},
    {StatusCode::kNotFound, "NOT_FOUND"},
    {StatusCode::kAlreadyExists, "ALREADY_EXISTS"},
    {StatusCode::kUnavailable, "UNAVAILABLE"},
    {StatusCode::kDeadlineExceeded, "DEADLINE_EXCEEDED"},
    {StatusCode::kDataLoss, "DATA_LOSS"},
    {StatusCode::kUnimplemented, "UNIMPLEMENTED"},
    {StatusCode::kAborted, "ABORTED"},
    {StatusCode::kInternal, "INTERNAL"},
    {StatusCode::kNonFinite, "NON_FINITE"}};

}  // namespace

std::string_view StatusCodeName(StatusCode code) {
  return EnumNameOf(kStatusCodeNames, code, "UNKNOWN");
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  return std::string(StatusCodeName(code_)) + ": " + message_;
}

namespace internal {

void DieOfBadStatusOrAccess(const Status& status) {
  std::fprintf(stderr, "StatusOr::value() called on an error: %s\n", status.ToString().c_str());
  std::abort();
}

}  // namespace internal

}  // namespace sieve
