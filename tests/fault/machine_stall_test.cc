// The whole machine stalls (every process of a job stopped with SIGSTOP for 2.5 x the heartbeat
// timeout, then continued, the scheduler first): nobody's own stall is taken for a peer's
// silence (net/loop_stall.h). The scheduler declares no node dead, no node takes the scheduler
// for lost, and the job finishes as if nothing had happened: every worker's replica equal, no
// restart, no loss in the job status. And one server stopped alone that long is declared dead,
// and leaves when it resumes.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tests/fault/cluster.h"

namespace sieve {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

std::vector<std::string> ServerFlags() {
  return {"--model=synthetic", "--num_params=20000", "--heartbeat_interval_ms=100",
          "--heartbeat_timeout_ms=1000"};
}

// A 2-server, 2-worker synthetic job (1200 rounds of 5 ms emulated compute, heartbeat timeout
// 1 s) with `scheduler_extra` and `worker_extra` flags, once it passed round 100. False when it
// did not in time.
bool StartJob(testing::FaultCluster& c, const std::vector<std::string>& scheduler_extra,
              const std::vector<std::string>& worker_extra) {
  std::vector<std::string> scheduler = {"--heartbeat_timeout_ms=1000",
                                        "--status_file_interval_ms=250"};
  scheduler.insert(scheduler.end(), scheduler_extra.begin(), scheduler_extra.end());
  if (!c.StartScheduler(2, 2, scheduler)) return false;
  for (int s = 0; s < 2; ++s) c.StartServer(s, ServerFlags());
  std::vector<std::string> worker = ServerFlags();
  for (const char* f : {"--epochs=4", "--rounds_per_epoch=300", "--compressor=topk",
                        "--density=0.01", "--straggler=delay:5ms", "--eval_every=0"}) {
    worker.push_back(f);
  }
  worker.insert(worker.end(), worker_extra.begin(), worker_extra.end());
  for (int w = 0; w < 2; ++w) c.StartWorker(w, worker);
  auto running = [](const pb::JobStatus& st) { return st.progress().round() >= 100; };
  return c.WaitForStatus(running, milliseconds(60000)).has_value();
}

TEST(MachineStallTest, EveryProcessStoppedPastTheTimeoutResumesWithoutADeath) {
  const fs::path dir = fs::temp_directory_path() / ("sieve-stall-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  testing::FaultCluster c;
  ASSERT_TRUE(StartJob(c, {}, {"--dump_weights=" + (dir / "w{rank}.bin").string()})) << c.Log();

  std::vector<testing::Subprocess*> all = {&c.scheduler(), &c.server(0), &c.server(1), &c.worker(0),
                                           &c.worker(1)};
  for (testing::Subprocess* p : all) p->Kill(SIGSTOP);
  std::this_thread::sleep_for(milliseconds(2500));
  for (testing::Subprocess* p : all) p->Kill(SIGCONT);

  ASSERT_TRUE(c.WaitAll(milliseconds(120000))) << c.Log();
  EXPECT_TRUE(c.AllExitedZero()) << c.Log();
  const std::optional<pb::JobStatus> status = c.JobStatus();
  ASSERT_TRUE(status.has_value()) << c.Log();
  EXPECT_EQ(status->phase(), pb::JOB_FINISHED) << c.Log();
  for (const pb::JobNode& n : status->nodes()) {
    EXPECT_EQ(n.restarts(), 0u) << n.ShortDebugString();
    EXPECT_TRUE(n.lost_reason().empty()) << n.ShortDebugString();
  }
  for (int w = 0; w < 2; ++w) EXPECT_EQ(c.WorkerSummary(w)["rounds"], "1200") << c.Log();
  std::ifstream a(dir / "w0.bin", std::ios::binary), b(dir / "w1.bin", std::ios::binary);
  const std::string ra((std::istreambuf_iterator<char>(a)), std::istreambuf_iterator<char>());
  const std::string rb((std::istreambuf_iterator<char>(b)), std::istreambuf_iterator<char>());
  EXPECT_EQ(ra.size(), 20000u * 4);
  EXPECT_TRUE(ra == rb);
  std::error_code ec;
  fs::remove_all(dir, ec);
}

// One server stopped past the timeout (a long SIGSTOP, as the chaos harness's pause_long): the
// scheduler declares it dead and its shard fails over to its copy (--replication=1). Resumed, the
// process does not count its own stall against the scheduler, so it learns of its death from the
// answer to its next HEARTBEAT (ERROR_NOT_REGISTERED) and exits non-zero instead of heartbeating
// for ever as a node the job no longer has; the new process started under its rank is rebuilt
// and the job finishes.
TEST(MachineStallTest, AServerStoppedPastTheTimeoutLeavesWhenItResumes) {
  testing::FaultCluster c;
  ASSERT_TRUE(StartJob(c, {"--replication=1"}, {})) << c.Log();

  c.server(1).Kill(SIGSTOP);
  const bool declared = c.WaitForNodeState(pb::ROLE_SERVER, 1, pb::NODE_LOST, milliseconds(20000));
  c.server(1).Kill(SIGCONT);
  ASSERT_TRUE(declared) << c.Log();
  const std::optional<int> left = c.server(1).Wait(milliseconds(15000));
  ASSERT_TRUE(left.has_value()) << "the resumed server did not leave\n" << c.Log();
  EXPECT_TRUE(WIFEXITED(*left) && WEXITSTATUS(*left) != 0 && WEXITSTATUS(*left) != 2) << *left;

  c.StartServer(1, ServerFlags());
  ASSERT_TRUE(c.WaitAll(milliseconds(120000))) << c.Log();
  EXPECT_TRUE(c.AllExitedZero()) << c.Log();
  for (int w = 0; w < 2; ++w) EXPECT_EQ(c.WorkerSummary(w)["rounds"], "1200") << c.Log();
}

}  // namespace
}  // namespace sieve
