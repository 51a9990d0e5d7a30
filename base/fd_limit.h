// RaiseFdLimit: raises this process's soft limit on open file descriptors (RLIMIT_NOFILE) to its
// hard limit, at most `cap`, and never lowers it. Every sieve daemon calls it at start-up: each
// TCP connection a peer opens costs a descriptor, and at the limit libzmq retries the failed
// accept in a loop (docs/security.md), so a daemon starts with as many descriptors as it may
// have; a connection that never completes its handshake is closed after 10 s (net/transport.h).
// Returns the soft limit in effect afterwards. Errors: Internal when the limits cannot be read or
// set. Call from main()'s thread.
#ifndef SIEVE_BASE_FD_LIMIT_H_
#define SIEVE_BASE_FD_LIMIT_H_

#include <cstdint>

#include "base/status.h"

namespace sieve {

StatusOr<uint64_t> RaiseFdLimit(uint64_t cap = uint64_t{1} << 20);

}  // namespace sieve

#endif  // SIEVE_BASE_FD_LIMIT_H_
