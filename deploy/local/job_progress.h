// JobProgress: the state of a launched job as the launcher reads it from its daemons' output, and
// the one-line text `sieve launch` shows for it.
//
// Contract:
// - SchedulerLine() takes every line the scheduler prints. Its glog lines "server registered from
//   ..." / "worker registered from ..." count registrations while the job forms; "node table
//   sent" marks the job formed. Other lines are ignored.
// - WorkerProgress() takes a worker's parsed progress line (base/progress_line.h) with the time it
//   arrived. A restarted worker's bytes start again from 0: what its predecessor pushed is kept.
// - Text() is:
//     before the scheduler's address is known: "" (nothing to show);
//     while forming: "waiting for 2 of 4 workers and 1 of 2 servers; scheduler at HOST:PORT";
//     formed, before any progress line: "job formed (2 servers, 4 workers); waiting for the
//       first round";
//     then: "epoch 3/10 round 5000/18740 27% loss 0.4321 52.3 rounds/s pushed 12.3 MB ETA 4m23s"
//   where the round is the slowest worker's (of those that reported), the loss the mean of the
//   workers' latest, the bytes the sum over workers (and their restarted predecessors), the rate
//   the job's rounds since the first progress line over the time since it, and the ETA the rounds
//   left at that rate (rate and ETA are left out until two points in time are known). A total of
//   0 is unknown (a Python worker without steps_per_epoch): then the round is shown alone, with
//   no total, percentage or ETA ("round 16 loss 0.4321 2.0 rounds/s pushed 1.2 MB"), and the
//   epoch is left out too when its total is 0.
// Pure state: no I/O, no clock reads (times are passed in), so it is unit-tested directly.
#ifndef SIEVE_DEPLOY_LOCAL_JOB_PROGRESS_H_
#define SIEVE_DEPLOY_LOCAL_JOB_PROGRESS_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "base/progress_line.h"

namespace sieve {

// "12.3 MB", "4.0 kB", "512 B" (decimal units).
std::string FormatBytes(uint64_t bytes);

class JobProgress {
 public:
  using Clock = std::chrono::steady_clock;

  JobProgress(int num_servers, int num_workers);

  void set_scheduler_address(std::string address) { scheduler_ = std::move(address); }
  void SchedulerLine(std::string_view line);
  void WorkerProgress(int rank, const ProgressPoint& point, Clock::time_point now);
  std::string Text() const;

  bool formed() const { return formed_; }

 private:
  struct Worker {
    ProgressPoint latest;
    uint64_t bytes_before = 0;  // pushed by earlier processes of this rank
  };
  uint64_t JobRound() const;

  int num_servers_;
  int num_workers_;
  std::string scheduler_;
  int servers_registered_ = 0;
  int workers_registered_ = 0;
  bool formed_ = false;
  std::map<int, Worker> workers_;
  // The job's round when the first progress line arrived, and when.
  std::optional<std::pair<uint64_t, Clock::time_point>> first_;
  Clock::time_point last_;
};

}  // namespace sieve

#endif  // SIEVE_DEPLOY_LOCAL_JOB_PROGRESS_H_
