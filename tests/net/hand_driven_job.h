// A job a test speaks for: the scheduler runs in the test process, one real sieve-server runs as
// a subprocess (model softmax, D = 7850, seed 3, BSP, heartbeats off), and every worker is a bare
// Node started here, so the test can send any bytes as a worker and read every reply the server
// sends back. Shared by the e2e and fault tests that drive a server by hand.
//
// Thread-safety: none; one test thread drives a job. Ownership: the job owns the scheduler (and
// its thread), the server process and the worker nodes; destroying it finishes the workers that
// are not finished, waits (bounded) for the server to exit, then stops the scheduler.
#ifndef SIEVE_TESTS_NET_HAND_DRIVEN_JOB_H_
#define SIEVE_TESTS_NET_HAND_DRIVEN_JOB_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"
#include "net/node.h"
#include "scheduler/scheduler.h"
#include "tests/base/temp_dir.h"
#include "tests/net/subprocess.h"
#include "tests/net/summary_file.h"

namespace sieve::testing {

class HandDrivenJob {
 public:
  static constexpr uint64_t kNumParams = 7850;  // the softmax model's D

  // Starts the scheduler, the server (with `server_flags` after its own) and `num_workers` worker
  // nodes (ranks 0..W-1, started concurrently: each start returns once the whole job has
  // registered). Errors name the part.
  static StatusOr<std::unique_ptr<HandDrivenJob>> Start(
      int num_workers, const std::vector<std::string>& server_flags = {});
  ~HandDrivenJob();
  HandDrivenJob(const HandDrivenJob&) = delete;
  HandDrivenJob& operator=(const HandDrivenJob&) = delete;

  Node& worker(int w) { return *workers_[w]; }
  Subprocess& server() { return *server_; }

  // A PUSH from worker `w` for `round` to `shard` carrying (idx, val) as given (no checks: tests
  // build bad pushes with it).
  Frames Push(int w, uint64_t round, int shard, std::vector<uint32_t> idx,
              std::vector<float> val) const;

  // Worker `w`'s next message; a test failure (and an empty Message) after 10 s without one.
  Message Next(int w);

  // The whole shard through PULL_DENSE from worker `w`. The first pull can reach the server
  // before the server has its node table (it cannot answer it then), so it is resent with growing
  // waits, 20 times at most; any reply other than DENSE is a test failure.
  std::vector<float> PullShard(int w);

  // Finishes every worker, then waits up to 20 s for the server to exit: its wait status, or
  // nullopt when it did not exit.
  std::optional<int> FinishAndWaitForServer();

  // The server's run summary (its --summary_out, tests/net/summary_file.h) once it exited; empty
  // before.
  KeyValues ServerSummary() const;

 private:
  HandDrivenJob() = default;
  std::string summary_path() const { return (dir_.path() / "server.json").string(); }

  TempDir dir_;  // the server's summary file

  std::unique_ptr<Scheduler> scheduler_;
  std::thread scheduler_thread_;
  std::unique_ptr<Subprocess> server_;
  std::vector<std::unique_ptr<Node>> workers_;
  bool finished_ = false;
};

}  // namespace sieve::testing

#endif  // SIEVE_TESTS_NET_HAND_DRIVEN_JOB_H_
