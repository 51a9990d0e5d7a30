// The protocol's error codes (pb::ErrorCode) as Statuses: the one table that says which StatusCode
// each wire code is, used by the codec for what a received message did wrong, by the nodes for a
// peer's ERROR reply, and by the server and scheduler for what they send back.
//
// Contract: WireError(code, message) is a non-OK Status with StatusCodeOf(code) and wire_code()
// == code; its message is "<ERROR_NAME>: <message>". WireCodeOf(s) is s's wire code (ERROR_NONE
// for OK or a status no peer or message caused). StatusCodeOf(ERROR_NONE) is kOk; a code this
// build does not know (from a newer peer) is kFailedPrecondition. Pure functions.
#ifndef SIEVE_PROTO_ERROR_CODE_H_
#define SIEVE_PROTO_ERROR_CODE_H_

#include <string>

#include "base/status.h"
#include "proto/sieve.pb.h"

namespace sieve {

StatusCode StatusCodeOf(pb::ErrorCode code);

Status WireError(pb::ErrorCode code, const std::string& message);

inline pb::ErrorCode WireCodeOf(const Status& s) {
  return pb::ErrorCode_IsValid(s.wire_code()) ? static_cast<pb::ErrorCode>(s.wire_code())
                                              : pb::ERROR_NONE;
}
inline bool HasWireCode(const Status& s, pb::ErrorCode code) {
  return !s.ok() && s.wire_code() == code;
}

}  // namespace sieve

#endif  // SIEVE_PROTO_ERROR_CODE_H_
