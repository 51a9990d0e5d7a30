// StatusQuerier: asks a running sieve-scheduler for its job status over the protocol itself
// (STATUS_QUERY -> STATUS, docs/protocol.md "Job status"), for `sieve status --scheduler=HOST:PORT`
// when the scheduler serves no metrics endpoint. It binds a receive socket of its own (a free port
// on `bind`, advertised to the scheduler as `host`), sends each query stamped with the job token's
// digest, and waits for the answer carrying that query's nonce.
//
// The scheduler answers at most 50 queries per 10 s and never answers with an error: a query it
// drops (another job's token, another protocol version, a CURVE job, whose receive socket admits
// only the job's keys, or a rate limit) ends in DeadlineExceeded after `timeout`, with the likely
// causes in the message. Errors: InvalidArgument (a malformed address or token file), Unavailable
// (the receive socket cannot be bound), DeadlineExceeded. Owns its transport; one thread at a time.
#ifndef SIEVE_DEPLOY_LOCAL_STATUS_QUERY_H_
#define SIEVE_DEPLOY_LOCAL_STATUS_QUERY_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "base/status.h"
#include "proto/sieve.pb.h"

namespace sieve {

class Transport;

struct StatusQueryOptions {
  std::string scheduler;                    // HOST:PORT of sieve-scheduler (its --port)
  std::string job_token;                    // the job's token ("" for a job without one)
  std::string bind = "0.0.0.0";             // where the answer is received
  std::string host;                         // the address the scheduler answers to; "" = detect
  std::chrono::milliseconds timeout{5000};  // per query
};

class StatusQuerier {
 public:
  static StatusOr<std::unique_ptr<StatusQuerier>> Create(const StatusQueryOptions& options);
  ~StatusQuerier();
  StatusQuerier(const StatusQuerier&) = delete;
  StatusQuerier& operator=(const StatusQuerier&) = delete;

  // One query and its answer.
  StatusOr<pb::JobStatus> Query();

 private:
  StatusQuerier(const StatusQueryOptions& options, std::unique_ptr<Transport> transport,
                uint64_t job);

  const StatusQueryOptions options_;
  std::unique_ptr<Transport> transport_;
  const uint64_t job_;  // the token's digest: what the query carries and the answer must
  uint64_t nonce_;
};

}  // namespace sieve

#endif  // SIEVE_DEPLOY_LOCAL_STATUS_QUERY_H_
