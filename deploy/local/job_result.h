// JobResult: the one job-level line `sieve launch` ends with, from the scheduler's final job
// status (JobStatus, sieve.proto) and what the launcher itself saw of its processes.
//
// Contract:
// - WorkerLost(rank, how) records a worker the job went on without (--min_workers).
// - Finished(seconds, status) is the line of a job that succeeded:
//     "job finished: test_acc=0.8512 rounds=1875 time=21.3s pushed=12.3MB workers=4/4"
//   test_acc: the status's (the lowest rank's last; left out when none reported one); rounds: the
//   most any worker reported (left out when none reported); time: `seconds`; pushed: every worker
//   process's bytes, restarted ones' predecessors too (left out when no worker reported); workers:
//   the workers that finished, of W; then the lowest-ranked reporting worker's own metrics (a
//   Python script's `opt.record(perplexity=...)`: " perplexity=3.46", %.6g), in name order (a
//   metric named time, pushed or workers is left out); then "; lost worker 2 (killed by signal 9
//   (Killed))" per lost worker. Without a status (the scheduler wrote none) only time= and
//   workers=0/W are known.
// - Failed(reason, status) is "job FAILED: REASON", followed by " (scheduler: CODE: MESSAGE)"
//   when the status names the job's failure, then the lost workers as in Finished().
// Pure state, no I/O; thread-compatible.
#ifndef SIEVE_DEPLOY_LOCAL_JOB_RESULT_H_
#define SIEVE_DEPLOY_LOCAL_JOB_RESULT_H_

#include <map>
#include <string>

#include "proto/sieve.pb.h"

namespace sieve {

class JobResult {
 public:
  explicit JobResult(int num_workers) : num_workers_(num_workers) {}

  void WorkerLost(int rank, std::string how) { lost_[rank] = std::move(how); }

  std::string Finished(double seconds, const pb::JobStatus* status) const;
  std::string Failed(const std::string& reason, const pb::JobStatus* status) const;

 private:
  std::string LostWorkers() const;  // "; lost worker 2 (...)" each

  int num_workers_;
  std::map<int, std::string> lost_;
};

}  // namespace sieve

#endif  // SIEVE_DEPLOY_LOCAL_JOB_RESULT_H_
