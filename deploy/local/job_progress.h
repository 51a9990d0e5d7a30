// JobProgressText: the one line `sieve launch` (and `sieve status`) shows for a job, from the
// scheduler's job status (JobStatus, sieve.proto; proto/job_status_text.h):
//   forming: "waiting for 2 of 4 workers and 1 of 2 servers; scheduler at HOST:PORT";
//   running, before any worker reported a round: "job formed (2 servers, 4 workers); waiting for
//     the first round";
//   then: "epoch 3/10 round 5000/18740 27% loss 0.4321 52.3 rounds/s pushed 12.3 MB ETA 4m23s"
// where the round is the slowest live worker's, the loss the mean of the live workers' latest,
// the bytes every worker process's (restarted ones' predecessors too), the rate the scheduler's
// (over its last 30 s; left out, with the ETA, until it has one). A total of 0 is unknown (a
// Python worker without steps_per_epoch): the round is shown alone, with no total, percentage or
// ETA ("round 16 loss 0.4321 2.0 rounds/s pushed 1.2 MB"), and the epoch is left out too when
// its total is 0; the loss is left out while no worker reported one. A finished or failed job:
// its JobStatusBrief (proto/job_status_text.h).
// Pure function; thread-safe.
#ifndef SIEVE_DEPLOY_LOCAL_JOB_PROGRESS_H_
#define SIEVE_DEPLOY_LOCAL_JOB_PROGRESS_H_

#include <cstdint>
#include <string>

#include "proto/sieve.pb.h"

namespace sieve {

// "12.3 MB", "4.0 kB", "512 B" (decimal units).
std::string FormatBytes(uint64_t bytes);

std::string JobProgressText(const pb::JobStatus& status);

}  // namespace sieve

#endif  // SIEVE_DEPLOY_LOCAL_JOB_PROGRESS_H_
