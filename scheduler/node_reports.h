// NodeReports: what the job's nodes say of themselves (the reports on their HEARTBEATs and a
// worker's FINISHED, protocol 13), checked, kept per node id, and summed up as the job's progress.
//
// Contract:
// - Accept(id, role, instance, hb, now) takes the report part of a HEARTBEAT (or of a FINISHED:
//   only `worker` set) from node `id` of `role` whose current process is `instance`. It is
//   refused, changing nothing (InvalidArgument naming the fault), when it is out of range: a
//   worker's part from a server or the other way round; a loss that is negative or not finite; a
//   test accuracy outside [0, 1]; a straggle time negative or not finite; a round beyond the
//   total it declares, or more than kMaxRoundStep past the same process's last report (a first
//   report: past the furthest round any worker reported); a round,
//   byte or miss counter below the same process's last report; an epoch beyond its epochs; more
//   than 16 metrics, a metric name not of 1 to 64 characters [A-Za-z0-9_.-], a metric value not
//   finite. A report from a new process of the id (another instance) starts that node's counters
//   again; the bytes its predecessors moved are kept in the job's totals.
// - Progress(rows, now) sums the accepted worker reports up (JobProgress, sieve.proto): `rows` says
//   which worker ids count as live and which finished. Round, epoch and loss are those of the
//   workers still training; once none is, of the live (finished) ones; once none is live, of all.
//   It records (now, round) to measure the rate over the last 30 s, so call it at most a few times
//   a second.
// Times are passed in; no I/O. Thread-compatible: one thread (the scheduler's Run thread).
#ifndef SIEVE_SCHEDULER_NODE_REPORTS_H_
#define SIEVE_SCHEDULER_NODE_REPORTS_H_

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "base/status.h"
#include "proto/sieve.pb.h"

namespace sieve {

class NodeReports {
 public:
  using Clock = std::chrono::steady_clock;
  // The most a worker's round may move between two reports of one process.
  static constexpr uint64_t kMaxRoundStep = 1'000'000;
  static constexpr int kMaxMetrics = 16;

  Status Accept(int id, pb::Role role, uint64_t instance, const pb::Heartbeat& hb,
                Clock::time_point now);

  // Node `id` has a new process (a restart or a rejoin): its predecessor's report goes (its bytes
  // stay in the job's totals) until the new process reports.
  void Forget(int id);

  // The latest accepted report of node `id`, or nullptr.
  const pb::WorkerReport* Worker(int id) const;
  const pb::ServerReport* Server(int id) const;

  struct WorkerRow {
    int id;
    int rank;
    bool live;      // not declared dead
    bool finished;  // its training is done
  };
  pb::JobProgress Progress(const std::vector<WorkerRow>& rows, Clock::time_point now);

  uint64_t refused() const { return refused_; }

 private:
  struct Node {
    uint64_t instance = 0;
    bool has_worker = false;
    bool has_server = false;
    pb::WorkerReport worker;
    pb::ServerReport server;
    // Bytes earlier processes of this id pushed and pulled.
    uint64_t pushed_before = 0;
    uint64_t pulled_before = 0;
  };
  // `job_round`: the furthest round any worker reported, the bound of a process's first report.
  static Status CheckWorker(const pb::WorkerReport& r, const Node* last, uint64_t job_round);
  static Status CheckServer(const pb::ServerReport& r, const Node* last);

  std::map<int, Node> nodes_;
  std::deque<std::pair<Clock::time_point, uint64_t>> samples_;  // (when, the job's round)
  uint64_t refused_ = 0;
};

}  // namespace sieve

#endif  // SIEVE_SCHEDULER_NODE_REPORTS_H_
