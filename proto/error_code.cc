#include "proto/error_code.h"

namespace sieve {

StatusCode StatusCodeOf(pb::ErrorCode code) {
  switch (code) {
    case pb::ERROR_NONE:
      return StatusCode::kOk;
    // What the message itself got wrong: its sender's fault.
    case pb::ERROR_MALFORMED_HEADER:
    case pb::ERROR_BAD_FRAME_COUNT:
    case pb::ERROR_BAD_FRAME_SIZE:
    case pb::ERROR_INDEX_ORDER:
    case pb::ERROR_NON_FINITE:
    case pb::ERROR_WRONG_SHARD:
    case pb::ERROR_UNEXPECTED_TYPE:
    case pb::ERROR_BAD_REGISTRATION:
    case pb::ERROR_BAD_BARRIER:
    case pb::ERROR_BAD_ENCODING:
    case pb::ERROR_BAD_COLLECTIVE:
      return StatusCode::kInvalidArgument;
    // A number past its bound; JOIN_TOO_LATE: a round already passed (asked again later).
    case pb::ERROR_INDEX_RANGE:
    case pb::ERROR_BAD_COUNT:
    case pb::ERROR_JOIN_TOO_LATE:
      return StatusCode::kOutOfRange;
    case pb::ERROR_CHECKSUM:
      return StatusCode::kDataLoss;
    // A rank another node holds.
    case pb::ERROR_REGISTRATION_FULL:
    case pb::ERROR_DUPLICATE_RANK:
    case pb::ERROR_RANK_TAKEN:
      return StatusCode::kAlreadyExists;
    // A well-formed message the receiver's state does not allow now.
    case pb::ERROR_VERSION_MISMATCH:
    case pb::ERROR_UNKNOWN_ROUND:
    case pb::ERROR_NOT_REGISTERED:
    case pb::ERROR_FOREIGN_JOB:
    case pb::ERROR_NOT_INITIALIZED:
    case pb::ERROR_LATE_PUSH:
    case pb::ERROR_NOT_PRIMARY:
    case pb::ERROR_NOT_REPLICA:
    case pb::ERROR_FAILED_OVER:
      return StatusCode::kFailedPrecondition;
    default:
      return StatusCode::kFailedPrecondition;
  }
}

Status WireError(pb::ErrorCode code, const std::string& message) {
  const StatusCode status = StatusCodeOf(code);
  if (status == StatusCode::kOk) return Status::Ok();
  return Status(status, pb::ErrorCode_Name(code) + ": " + message).WithWireCode(code);
}

}  // namespace sieve
