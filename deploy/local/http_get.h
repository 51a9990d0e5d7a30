// HttpGet: one HTTP/1.0 GET, enough to read a sieve daemon's metrics endpoint (`sieve status`
// reads the scheduler's GET /v1/job). Blocking, on the calling thread, bounded by `timeout` as a
// whole (connect, send, receive).
//
// Returns the response body of a 200 answer. Errors: InvalidArgument (an address that is not
// HOST:PORT), Unavailable (cannot resolve or connect, the connection broke), DeadlineExceeded
// (timeout), FailedPrecondition (any other status, with the status line), DataLoss (not HTTP, or
// a body over 16 MiB). Thread-safe.
#ifndef SIEVE_DEPLOY_LOCAL_HTTP_GET_H_
#define SIEVE_DEPLOY_LOCAL_HTTP_GET_H_

#include <chrono>
#include <string>

#include "base/status.h"

namespace sieve {

StatusOr<std::string> HttpGet(const std::string& host_port, const std::string& path,
                              std::chrono::milliseconds timeout);

}  // namespace sieve

#endif  // SIEVE_DEPLOY_LOCAL_HTTP_GET_H_
