// kill -9 of a worker in the middle of a BSP run (real processes, Fashion-MNIST softmax, 2 servers,
// 2 workers, 2 s heartbeat timeout): the scheduler declares it dead, the servers drop it from the
// round in progress, and the surviving worker stalls at most 2 × the heartbeat timeout before
// rounds complete again; the job then completes normally.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "tests/fault/cluster.h"

namespace sieve {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using testing::FaultCluster;

constexpr int kHeartbeatTimeoutMs = 2000;

// Round of server `rank`'s checkpoint in `dir`, or -1.
int64_t CheckpointRound(const fs::path& dir, int rank) {
  const std::string path = (dir / ("server-" + std::to_string(rank) + ".ckpt")).string();
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return -1;
  uint64_t round = 0;
  const bool ok = std::fseek(f, 24, SEEK_SET) == 0 && std::fread(&round, 8, 1, f) == 1;
  std::fclose(f);
  return ok ? static_cast<int64_t>(round) : -1;
}

// Polls (bounded) until server 0's checkpoint round is >= `round`; returns false on timeout.
bool WaitForCheckpoint(FaultCluster& c, const fs::path& dir, int64_t round, milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    c.Drain();
    if (CheckpointRound(dir, 0) >= round) return true;
    (void)c.scheduler().ReadLine(milliseconds(2));  // paces the poll
  }
  return false;
}

// The workers' flags: softmax, Top-k 5 %, `epochs` epochs, weights dumped to dir/w{rank}.bin.
std::vector<std::string> WorkerFlags(const fs::path& dir, int epochs) {
  return {"--model=softmax",
          "--seed=3",
          "--compressor=topk",
          "--density=0.05",
          "--batch_size=32",
          "--lr=0.01",
          "--epochs=" + std::to_string(epochs),
          "--eval_every=0",
          "--progress=log",
          "--heartbeat_interval_ms=200",
          "--dump_weights=" + (dir / "w{rank}.bin").string()};
}

// Starts the scheduler (2 servers, 2 workers, short heartbeat timeout) and two softmax servers
// checkpointing every round into `dir`; false if the scheduler did not come up.
// --min_workers=1: the job may lose a worker (these tests kill one) and still succeed.
bool StartSchedulerAndServers(FaultCluster& c, const fs::path& dir, int replication = 0) {
  if (!c.StartScheduler(2, 2,
                        {"--heartbeat_timeout_ms=" + std::to_string(kHeartbeatTimeoutMs),
                         "--min_workers=1", "--replication=" + std::to_string(replication)})) {
    return false;
  }
  for (int s = 0; s < 2; ++s) {
    c.StartServer(s, {"--model=softmax", "--seed=3", "--checkpoint_dir=" + dir.string(),
                      "--checkpoint_every=1", "--heartbeat_interval_ms=200"});
  }
  return true;
}

TEST(WorkerDeathTest, SurvivorsStallAtMostTwoHeartbeatTimeoutsAndFinish) {
  if (!fs::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "Fashion-MNIST not installed";
  const fs::path dir = fs::temp_directory_path() / ("sieve-wdeath-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  FaultCluster c;
  ASSERT_TRUE(StartSchedulerAndServers(c, dir)) << c.Log();
  for (int w = 0; w < 2; ++w) {
    c.StartWorker(w, {"--model=softmax", "--seed=3", "--compressor=topk", "--density=0.05",
                      "--batch_size=32", "--lr=0.01", "--epochs=1", "--eval_every=0",
                      "--progress=log", "--heartbeat_interval_ms=200"});
  }
  ASSERT_TRUE(WaitForCheckpoint(c, dir, 200, milliseconds(60000))) << c.Log();
  const int64_t at_kill = CheckpointRound(dir, 0);
  c.worker(1).Kill(SIGKILL);
  const auto killed = Clock::now();
  // Rounds complete again once the scheduler declared the worker dead.
  ASSERT_TRUE(WaitForCheckpoint(c, dir, at_kill + 5, milliseconds(30000))) << c.Log();
  const double stall_ms = std::chrono::duration<double, std::milli>(Clock::now() - killed).count();
  std::printf("worker killed at round %ld; rounds resumed after %.0f ms (heartbeat timeout %d)\n",
              static_cast<long>(at_kill), stall_ms, kHeartbeatTimeoutMs);
  RecordProperty("stall_ms", std::to_string(stall_ms));
  EXPECT_LE(stall_ms, 2.0 * kHeartbeatTimeoutMs);
  ASSERT_TRUE(c.WaitAll(milliseconds(120000))) << c.Log();
  auto st = c.scheduler().Wait(milliseconds(1));
  ASSERT_TRUE(st.has_value());
  EXPECT_TRUE(WIFEXITED(*st) && WEXITSTATUS(*st) == 0) << c.Log();
  EXPECT_EQ(c.WorkerSummary(0)["rounds"], "937") << c.Log();
  std::error_code ec;
  fs::remove_all(dir, ec);
}

std::vector<char> ReadFile(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

// kill -9 of a worker, then a new process under its rank: the scheduler re-admits it, it pulls
// the weights, joins at a round boundary, and the job finishes with both workers. At the end
// both replicas are bitwise equal (the rejoiner's first UPDATE was the whole shard), and every
// server counted one rejoin.
TEST(WorkerDeathTest, RestartedWorkerRejoinsAndTrainingFinishes) {
  if (!fs::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "Fashion-MNIST not installed";
  const fs::path dir = fs::temp_directory_path() / ("sieve-wrejoin-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  FaultCluster c;
  ASSERT_TRUE(StartSchedulerAndServers(c, dir)) << c.Log();
  const std::vector<std::string> worker_flags = WorkerFlags(dir, 4);
  for (int w = 0; w < 2; ++w) c.StartWorker(w, worker_flags);
  ASSERT_TRUE(WaitForCheckpoint(c, dir, 100, milliseconds(60000))) << c.Log();
  c.worker(1).Kill(SIGKILL);
  const int64_t at_kill = CheckpointRound(dir, 0);
  ASSERT_TRUE(WaitForCheckpoint(c, dir, at_kill + 5, milliseconds(30000))) << c.Log();
  c.StartWorker(1, worker_flags);  // the restart
  ASSERT_TRUE(c.WaitAll(milliseconds(240000))) << c.Log();
  auto st = c.scheduler().Wait(milliseconds(1));
  ASSERT_TRUE(st.has_value());
  EXPECT_TRUE(WIFEXITED(*st) && WEXITSTATUS(*st) == 0) << c.Log();
  const std::string total = std::to_string(4 * 937);
  EXPECT_EQ(c.WorkerSummary(0)["rounds"], total) << c.Log();
  testing::KeyValues rejoined = c.WorkerSummary(1);
  EXPECT_EQ(rejoined["rounds"], total) << c.Log();
  const int64_t first = std::stoll(rejoined["first_round"]);
  std::printf("worker killed at round %ld, rejoined at round %ld of %s\n",
              static_cast<long>(at_kill), static_cast<long>(first), total.c_str());
  // The scheduler's final job status: rank 1 was declared dead and taken again by one process,
  // which finished; rank 0 was never replaced.
  const std::optional<pb::JobStatus> status = c.JobStatus();
  ASSERT_TRUE(status.has_value()) << c.Log();
  EXPECT_EQ(status->phase(), pb::JOB_FINISHED) << c.Log();
  const pb::JobNode* w0_row = testing::FindNode(*status, pb::ROLE_WORKER, 0);
  const pb::JobNode* w1_row = testing::FindNode(*status, pb::ROLE_WORKER, 1);
  ASSERT_NE(w0_row, nullptr) << c.Log();
  ASSERT_NE(w1_row, nullptr) << c.Log();
  EXPECT_EQ(w0_row->restarts(), 0u) << c.Log();
  EXPECT_EQ(w1_row->restarts(), 1u) << c.Log();
  EXPECT_FALSE(w1_row->lost_reason().empty()) << c.Log();
  EXPECT_EQ(w1_row->state(), pb::NODE_FINISHED) << c.Log();
  std::printf("worker 1 was lost (%s) and rejoined\n", w1_row->lost_reason().c_str());
  EXPECT_GT(first, at_kill + 5);
  EXPECT_LT(first, 4 * 937);
  for (int s = 0; s < 2; ++s) EXPECT_EQ(c.ServerSummary(s)["rejoins"], "1") << c.Log();
  const std::vector<char> w0 = ReadFile(dir / "w0.bin"), w1 = ReadFile(dir / "w1.bin");
  EXPECT_EQ(w0.size(), 7850u * 4);
  EXPECT_TRUE(w0 == w1) << "replicas differ after the rejoin";
  std::error_code ec;
  fs::remove_all(dir, ec);
}

// Every worker killed at once (a lost node) and restarted: each rejoins a few rounds past the
// servers', and nobody is left to push the rounds in between. The servers pass them empty (their
// summaries count idle_rounds) instead of waiting for ever; the job finishes with both workers and
// equal replicas. With --replication=1 the copies, replicated by round results, pass the same
// rounds: the copies' checksums equal their primaries'.
class EveryWorkerDies : public ::testing::TestWithParam<int> {};

TEST_P(EveryWorkerDies, RestartedTogetherTheyRejoinAndTrainingFinishes) {
  if (!fs::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "Fashion-MNIST not installed";
  const int replication = GetParam();
  const fs::path dir = fs::temp_directory_path() / ("sieve-wall-" + std::to_string(replication) +
                                                    "-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  FaultCluster c;
  ASSERT_TRUE(StartSchedulerAndServers(c, dir, replication)) << c.Log();
  const std::vector<std::string> worker_flags = WorkerFlags(dir, 2);
  for (int w = 0; w < 2; ++w) c.StartWorker(w, worker_flags);
  ASSERT_TRUE(WaitForCheckpoint(c, dir, 100, milliseconds(60000))) << c.Log();
  for (int w = 0; w < 2; ++w) c.worker(w).Kill(SIGKILL);
  const int64_t at_kill = CheckpointRound(dir, 0);
  for (int w = 0; w < 2; ++w) c.StartWorker(w, worker_flags);
  ASSERT_TRUE(c.WaitAll(milliseconds(240000))) << c.Log();
  auto st = c.scheduler().Wait(milliseconds(1));
  ASSERT_TRUE(st.has_value());
  EXPECT_TRUE(WIFEXITED(*st) && WEXITSTATUS(*st) == 0) << c.Log();
  const std::string total = std::to_string(2 * 937);
  for (int w = 0; w < 2; ++w) {
    testing::KeyValues summary = c.WorkerSummary(w);
    EXPECT_EQ(summary["rounds"], total) << c.Log();
    EXPECT_GT(std::stoll(summary["first_round"]), at_kill) << c.Log();
  }
  uint64_t idle = 0;
  for (int s = 0; s < 2; ++s) {
    testing::KeyValues server = c.ServerSummary(s);
    EXPECT_EQ(server["rejoins"], "2") << c.Log();
    idle += server.count("idle_rounds") ? std::stoull(server["idle_rounds"]) : 0;
    if (replication > 0) {
      // "copies" is "shard:checksum": the copy this server holds of the other server's shard.
      const std::string other = c.ServerSummary(1 - s)["checksum"];
      EXPECT_EQ(server["copies"], std::to_string(1 - s) + ":" + other) << c.Log();
    }
  }
  std::printf("workers killed at round %ld; the servers passed %lu idle rounds\n",
              static_cast<long>(at_kill), static_cast<unsigned long>(idle));
  EXPECT_GE(idle, 2u);  // at least the join margin, on each server
  const std::vector<char> w0 = ReadFile(dir / "w0.bin"), w1 = ReadFile(dir / "w1.bin");
  EXPECT_EQ(w0.size(), 7850u * 4);
  EXPECT_TRUE(w0 == w1) << "replicas differ after the rejoin";
  std::error_code ec;
  fs::remove_all(dir, ec);
}

INSTANTIATE_TEST_SUITE_P(Replication, EveryWorkerDies, ::testing::Values(0, 1),
                         [](const ::testing::TestParamInfo<int>& i) {
                           return i.param == 0 ? "NoCopies" : "CopiesByRoundResults";
                         });

}  // namespace
}  // namespace sieve
