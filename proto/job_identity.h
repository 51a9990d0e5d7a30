// A job's identity on the wire (Header.job): a 64-bit digest of the job token, a secret string
// every daemon of one job is given (--job_token_file; `sieve launch` makes one per job). Two jobs
// on the same network with different tokens drop each other's messages (proto/codec.h, Decode).
//
// The digest travels in clear text in plaintext mode: it keeps other jobs and peers that cannot
// read the job's traffic out, not an eavesdropper (docs/security.md). It is not a MAC.
// Pure functions, thread-safe.
#ifndef SIEVE_PROTO_JOB_IDENTITY_H_
#define SIEVE_PROTO_JOB_IDENTITY_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"

namespace sieve {

// Header.job of a job with `token`: 0 for the empty token (no token: the default, one job per
// network), else a nonzero 64-bit digest (FNV-1a over the bytes, then a 64-bit finalizer mix).
uint64_t JobDigest(std::string_view token);

// The token in a token file: its content without trailing whitespace (a newline written by an
// editor or `echo`). Errors: NotFound (unreadable), InvalidArgument (empty, or longer than 4 KiB).
StatusOr<std::string> ReadJobTokenFile(const std::string& path);

}  // namespace sieve

#endif  // SIEVE_PROTO_JOB_IDENTITY_H_
