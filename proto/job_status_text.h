// The job status (JobStatus, sieve.proto) in the forms it leaves the scheduler in:
// - JobStatusToJson: protobuf's JSON mapping with the .proto's field names (snake_case), every
//   field present (zeros and empty lists included; an unset optional value is left out), enums by
//   name, 64-bit integers as strings (the mapping's rule); one object, indented. GET /v1/job and
//   --status_file serve this.
// - JobStatusFromJson: the inverse; fields it does not know are ignored (a newer scheduler).
//   Errors: InvalidArgument naming what does not parse.
// - JobStatusSeries: the job-level Prometheus series (text format 0.0.4, each with # HELP and
//   # TYPE), every one labelled role="scheduler": sieve_job_phase{phase} (1 for the current phase,
//   0 for the others), sieve_job_round, sieve_job_total_rounds, sieve_job_rounds_per_second,
//   sieve_job_loss and sieve_job_test_accuracy (left out until known), sieve_job_bytes_pushed,
//   sieve_job_workers{state} and sieve_job_servers{state} (nodes per NodeState).
// - JobStatusBrief: one line for a person or a Kubernetes termination message, at most 1024
//   bytes: "phase=FINISHED rounds=1875/1875 loss=0.3120 test_acc=0.8512 workers=4/4 finished
//   time=21.3s" (loss, test_acc left out when unknown), " foreign=N" / " impostors=N" when the
//   scheduler dropped such messages, then for a failed job
//   " failure=UNAVAILABLE node=server 1: MESSAGE".
// - PhaseName / NodeStateName: "FORMING", "ALIVE", ... (the enum names without their prefix).
// Pure functions; thread-safe.
#ifndef SIEVE_PROTO_JOB_STATUS_TEXT_H_
#define SIEVE_PROTO_JOB_STATUS_TEXT_H_

#include <string>
#include <string_view>

#include "base/status.h"
#include "proto/sieve.pb.h"

namespace sieve {

std::string JobStatusToJson(const pb::JobStatus& status);
StatusOr<pb::JobStatus> JobStatusFromJson(std::string_view json);
std::string JobStatusSeries(const pb::JobStatus& status);
std::string JobStatusBrief(const pb::JobStatus& status);
std::string PhaseName(pb::JobPhase phase);
std::string NodeStateName(pb::NodeState state);

}  // namespace sieve

#endif  // SIEVE_PROTO_JOB_STATUS_TEXT_H_
