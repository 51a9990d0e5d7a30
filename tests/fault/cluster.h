// Test helper for the fault tests: a local sieve cluster of real daemons (scheduler, servers,
// workers) started one process at a time, so a test can kill -9 and restart any of them. Every
// wait is bounded; the destructor kills whatever is still running.
#ifndef SIEVE_TESTS_FAULT_CLUSTER_H_
#define SIEVE_TESTS_FAULT_CLUSTER_H_

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tests/net/subprocess.h"
#include "tests/net/summary_line.h"

namespace sieve::testing {

// Whether Debian's dataset-fashion-mnist is installed (the real-process jobs train on it).
bool HaveFashionMnist();

class FaultCluster {
 public:
  // Starts the scheduler with `flags` (after the port/bind/count flags); false if it did not
  // print its address within 10 s.
  bool StartScheduler(int servers, int workers, const std::vector<std::string>& flags);
  // Starts a server / worker of `rank` with `flags` (scheduler, bind, host and rank are added).
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
  // The summary line (key=values) printed by the latest process of that role and rank.
  KeyValues ServerSummary(int rank);
  KeyValues WorkerSummary(int rank);
  // Every line every process printed, prefixed by its name.
  std::string Log() const;
  const std::string& address() const { return address_; }

 private:
  std::unique_ptr<Subprocess> scheduler_;
  std::map<int, std::vector<std::unique_ptr<Subprocess>>> servers_, workers_;
  std::string address_;
};

}  // namespace sieve::testing

#endif  // SIEVE_TESTS_FAULT_CLUSTER_H_
