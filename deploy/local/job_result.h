// JobResult: the one job-level line `sieve launch` ends with, gathered from the workers' summary
// and progress lines, their exits and the scheduler's verdict.
//
// Contract:
// - Worker processes are named by an id the caller gives (the launcher's child index); a rank may
//   have several (a restarted worker). WorkerStarted(process, rank) comes first; WorkerLine takes
//   every stdout line of that process, in any order with its exit: a summary line
//   (worker_summary.h) is its result, a progress line (base/progress_line.h) its bytes pushed so
//   far. WorkerExited(process, ok): ok is exit 0. WorkerLost(rank, how) records a worker the job
//   went on without (--min_workers).
// - SchedulerLine(line): the scheduler's "sieve-scheduler: job failed: REASON" gives the reason a
//   failed job names.
// - Finished(seconds) is the line of a job that succeeded:
//     "job finished: test_acc=0.8512 rounds=1875 time=21.3s pushed=12.3MB workers=4/4"
//   test_acc: the lowest rank's that reported one (left out when none did); rounds: the most any
//   worker's summary reached (left out without summaries); time: `seconds`; pushed: every
//   process's bytes_up summed, restarted ones' predecessors too (left out when nothing was
//   reported); workers: the ranks whose latest process exited 0, of W; then the workers' own
//   metrics (a Python script's `opt.record(perplexity=...)`: " perplexity=3.46"), each the
//   lowest rank's that reported it, as its summary line wrote it, in that rank's order (a
//   metric named time, pushed or workers is left out); then "; lost worker 2 (killed by signal
//   9 (Killed))" per lost worker.
// - Failed(reason) is "job FAILED: REASON", followed by " (scheduler: ...)" when the scheduler
//   named its own reason, then the lost workers as in Finished().
// Pure state, no I/O; thread-compatible.
#ifndef SIEVE_DEPLOY_LOCAL_JOB_RESULT_H_
#define SIEVE_DEPLOY_LOCAL_JOB_RESULT_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "deploy/local/worker_summary.h"

namespace sieve {

class JobResult {
 public:
  explicit JobResult(int num_workers) : num_workers_(num_workers) {}

  void WorkerStarted(size_t process, int rank) { processes_[process].rank = rank; }
  void WorkerLine(size_t process, std::string_view line);
  void WorkerExited(size_t process, bool ok) { processes_[process].exited_ok = ok; }
  void WorkerLost(int rank, std::string how) { lost_[rank] = std::move(how); }
  void SchedulerLine(std::string_view line);

  std::string Finished(double seconds) const;
  std::string Failed(const std::string& reason) const;

 private:
  std::string LostWorkers() const;  // "; lost worker 2 (...)" each

  struct Process {
    int rank = 0;
    std::optional<WorkerSummary> summary;
    std::optional<uint64_t> bytes_up;  // the most it reported
    bool exited_ok = false;
  };

  int num_workers_;
  std::map<size_t, Process> processes_;  // ascending: a rank's later processes come later
  std::map<int, std::string> lost_;
  std::string scheduler_reason_;
};

}  // namespace sieve

#endif  // SIEVE_DEPLOY_LOCAL_JOB_RESULT_H_
