// Test helper for the fault tests: a local sieve cluster of real daemons (scheduler, servers,
// workers) started one process at a time, so a test can kill -9 and restart any of them. Every
// wait is bounded; the destructor kills whatever is still running.
#ifndef SIEVE_TESTS_FAULT_CLUSTER_H_
#define SIEVE_TESTS_FAULT_CLUSTER_H_

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "proto/sieve.pb.h"
#include "tests/net/subprocess.h"
#include "tests/net/summary_file.h"

namespace sieve::testing {

// Whether Debian's dataset-fashion-mnist is installed (the real-process jobs train on it).
bool HaveFashionMnist();

// The row of `status` for the node of `role` and `rank`, or nullptr.
const pb::JobNode* FindNode(const pb::JobStatus& status, pb::Role role, int rank);

class FaultCluster {
 public:
  FaultCluster() = default;
  ~FaultCluster();  // kills what still runs, then removes the scheduler's files
  FaultCluster(const FaultCluster&) = delete;
  FaultCluster& operator=(const FaultCluster&) = delete;

  // Starts the scheduler with `flags` (after the port/bind/count flags, --port_file and
  // --status_file in a directory of the cluster's own); false (with why in Log()) if it did not
  // write its port file within 10 s.
  bool StartScheduler(int servers, int workers, const std::vector<std::string>& flags);
  // Starts a server / worker of `rank` with `flags` (scheduler, bind, host, rank and a
  // --summary_out of its own in the cluster's directory are added).
  Subprocess& StartServer(int rank, const std::vector<std::string>& flags);
  Subprocess& StartWorker(int rank, const std::vector<std::string>& flags);
  // Reads whatever output is ready from every process (so no pipe fills up).
  void Drain();
  // Waits until every process started exits (true) or `timeout` passes (false).
  bool WaitAll(std::chrono::milliseconds timeout);
  // Whether the scheduler and the latest process of every server and worker rank have exited 0.
  bool AllExitedZero();

  Subprocess& scheduler() { return *scheduler_; }
  Subprocess& server(int rank) { return *servers_.at(rank).back(); }
  Subprocess& worker(int rank) { return *workers_.at(rank).back(); }
  // The run summary (--summary_out's JSON fields, tests/net/summary_file.h) of the latest process
  // of that role and rank; empty when it wrote none (it was killed, or still runs).
  KeyValues ServerSummary(int rank);
  KeyValues WorkerSummary(int rank);
  // The shards the latest server of `rank` took over at failover (its summary's "shards").
  std::vector<KeyValues> ShardSummaries(int rank);
  // The scheduler's job status (its --status_file, docs/protocol.md "Job status"): the latest
  // one it wrote, or nullopt before the first. A running job's file is at most about a second
  // old; the final status is written just before the scheduler exits.
  std::optional<pb::JobStatus> JobStatus() const;
  // Polls JobStatus() (draining every process's output) until `done` holds for it, and returns
  // that status; nullopt when `timeout` passes first, or when the scheduler exited and its final
  // status does not satisfy `done`.
  std::optional<pb::JobStatus> WaitForStatus(const std::function<bool(const pb::JobStatus&)>& done,
                                             std::chrono::milliseconds timeout);
  // WaitForStatus until the job runs (phase JOB_RUNNING: every node registered and the node table
  // went out; the scheduler rewrites its status file at once on that change): false when
  // `timeout` passes first or the job ended before it was seen running.
  bool WaitForRunning(std::chrono::milliseconds timeout);
  // WaitForStatus until the node `role` `rank` is in `state` (e.g. NODE_LOST: declared dead).
  bool WaitForNodeState(pb::Role role, int rank, pb::NodeState state,
                        std::chrono::milliseconds timeout);
  // Every line every process printed, prefixed by its name, and the cluster's own notes.
  std::string Log() const;
  const std::string& address() const { return address_; }

 private:
  std::unique_ptr<Subprocess> scheduler_;
  std::map<int, std::vector<std::unique_ptr<Subprocess>>> servers_, workers_;
  std::string SummaryPath(std::string_view role, int rank, size_t process) const;
  // Starts `binary` as the `role` ("server" or "worker") of `rank` with `flags` after the flags
  // StartServer / StartWorker add, as the next of that rank's `processes`.
  Subprocess& StartDaemon(const std::string& binary, std::string_view role, int rank,
                          const std::vector<std::string>& flags,
                          std::vector<std::unique_ptr<Subprocess>>* processes);

  std::string address_;
  std::filesystem::path dir_;  // the scheduler's port and status files
  std::string notes_;          // what the cluster itself saw go wrong, for Log()
};

}  // namespace sieve::testing

#endif  // SIEVE_TESTS_FAULT_CLUSTER_H_
