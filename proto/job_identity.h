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
#include <span>
#include <string>
#include <string_view>

#include "base/status.h"
#include "proto/sieve.pb.h"

namespace sieve {

// Header.job of a job with `token`: 0 for the empty token (no token: the default, one job per
// network), else a nonzero 64-bit digest (FNV-1a over the bytes, then a 64-bit finalizer mix).
uint64_t JobDigest(std::string_view token);

// Header.job of every message after the node table of a job instance (NodeTable.job_instance,
// a random id the scheduler draws at its start): 0 for job 0 (no token: nothing is filtered);
// else a nonzero digest of both that differs from `job` and from every other instance's, so a
// message recorded in one job is foreign in every other job with the same token.
uint64_t JobInstanceDigest(uint64_t job, uint64_t instance);

// Which message types may carry the token's digest (JobDigest) rather than the instance's, by
// who receives them (DecodeLimits::token_types). Only messages that travel before their receiver
// knows the job instance do:
//  - a node before its first node table accepts the scheduler's answers to its REGISTER
//    (REGISTER_ACK, REGISTER_CHALLENGE, ERROR) and that table (NODE_TABLE), and nothing else;
//  - the scheduler accepts a REGISTER (a node not yet in the table, or restarted) and a
//    STATUS_QUERY (a status client, which never learns the instance), and nothing else;
//  - a status client accepts the STATUS it asked for;
//  - a node that has its table accepts none: every message after it carries the instance.
// The scheduler stamps a message of a type in kTokenStampedToNode with the token's digest only
// while its recipient has not been sent the node table (scheduler/scheduler.h, JobFor).
inline constexpr pb::MsgType kTokenStampedToNode[] = {
    pb::MSG_REGISTER_ACK, pb::MSG_REGISTER_CHALLENGE, pb::MSG_NODE_TABLE, pb::MSG_ERROR,
    pb::MSG_STATUS};
inline constexpr pb::MsgType kTokenStampedToScheduler[] = {pb::MSG_REGISTER, pb::MSG_STATUS_QUERY};

// Whether `type` is one of `types` (one of the lists above).
bool IsOneOf(std::span<const pb::MsgType> types, int type);

// The token in a token file: its content without trailing whitespace (a newline written by an
// editor or `echo`). Errors: NotFound (unreadable), InvalidArgument (empty, or longer than 4 KiB).
StatusOr<std::string> ReadJobTokenFile(const std::string& path);

}  // namespace sieve

#endif  // SIEVE_PROTO_JOB_IDENTITY_H_
