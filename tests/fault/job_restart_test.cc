// A job restarted whole (what a JobSet's failure policy does: a fresh scheduler, servers and
// workers) goes on from the servers' checkpoints: servers with --restore=always restore their
// shards, every worker starts at the round the servers report (worker/client/worker_start.h),
// and the weights at the end equal, bitwise, those of one uninterrupted job of the same rounds.
// Real processes, Fashion-MNIST softmax, 2 servers, 2 workers, BSP, dense pushes without momentum
// (so a worker carries no state between rounds and the comparison can be exact). Also with the
// scheduler's --replication=1: each server's copy of the other's shard restores that shard's
// checkpoint too, so the copies start equal to the primaries.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "tests/fault/cluster.h"

namespace sieve {
namespace {

namespace fs = std::filesystem;

struct Job {
  bool ok = false;
  testing::KeyValues worker0, server0;
  std::string log;
};

// One job of `max_rounds` rounds; servers get `server_flags` and dump their shards as
// <dump>-<rank>.bin; the scheduler gets --replication=`replication`.
Job RunJob(uint64_t max_rounds, const std::vector<std::string>& server_flags, const fs::path& dump,
           int replication) {
  Job j;
  testing::FaultCluster c;
  if (!c.StartScheduler(
          2, 2, {"--heartbeat_timeout_ms=20000", "--replication=" + std::to_string(replication)})) {
    j.log = c.Log();
    return j;
  }
  for (int s = 0; s < 2; ++s) {
    std::vector<std::string> f = {"--model=softmax", "--seed=3",
                                  "--dump_shard=" + dump.string() + "-{rank}.bin"};
    f.insert(f.end(), server_flags.begin(), server_flags.end());
    c.StartServer(s, f);
  }
  for (int w = 0; w < 2; ++w) {
    c.StartWorker(w,
                  {"--model=softmax", "--seed=3", "--compressor=none", "--momentum=0", "--lr=0.05",
                   "--batch_size=32", "--epochs=1", "--max_rounds=" + std::to_string(max_rounds),
                   "--eval_every=0", "--progress=log", "--round_timeout_ms=30000"});
  }
  const bool ended = c.WaitAll(std::chrono::minutes(2));
  j.log = c.Log();
  if (!ended) return j;
  j.ok = c.AllExitedZero();
  j.worker0 = c.WorkerSummary(0);
  j.server0 = c.ServerSummary(0);
  return j;
}

std::string Bytes(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

class JobRestartTest : public ::testing::TestWithParam<int> {};

TEST_P(JobRestartTest, AJobRestartedWholeGoesOnFromTheServersCheckpoints) {
  if (!testing::HaveFashionMnist()) GTEST_SKIP() << "Fashion-MNIST not installed";
  const int r = GetParam();
  const fs::path dir =
      fs::temp_directory_path() / ("sieve-job-restart-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string ckpt = "--checkpoint_dir=" + (dir / "ckpt").string();

  const Job whole = RunJob(200, {}, dir / "whole", r);
  ASSERT_TRUE(whole.ok) << whole.log;
  // The first attempt: 100 rounds, a checkpoint every 50 (the last at round 100).
  const Job first = RunJob(100, {ckpt, "--checkpoint_every=50"}, dir / "first", r);
  ASSERT_TRUE(first.ok) << first.log;
  // The restarted job: fresh processes, the same checkpoint directory.
  const Job second =
      RunJob(200, {ckpt, "--checkpoint_every=50", "--restore=always"}, dir / "second", r);
  ASSERT_TRUE(second.ok) << second.log;
  EXPECT_EQ(second.server0.at("restored_round"), "100") << second.log;
  EXPECT_EQ(second.worker0.at("first_round"), "100") << second.log;
  EXPECT_EQ(second.worker0.at("rounds"), "200") << second.log;
  for (int s = 0; s < 2; ++s) {
    const std::string want = Bytes(dir / ("whole-" + std::to_string(s) + ".bin"));
    ASSERT_FALSE(want.empty());
    EXPECT_EQ(Bytes(dir / ("second-" + std::to_string(s) + ".bin")), want)
        << "server " << s << "'s shard differs from the uninterrupted job's";
    EXPECT_NE(Bytes(dir / ("first-" + std::to_string(s) + ".bin")), want);
  }
  if (r > 0) {
    EXPECT_EQ(second.server0.at("backups"), "1") << second.log;
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
}

INSTANTIATE_TEST_SUITE_P(Replication, JobRestartTest, ::testing::Values(0, 1),
                         [](const ::testing::TestParamInfo<int>& i) {
                           return i.param == 0 ? std::string("r0") : std::string("r1");
                         });

}  // namespace
}  // namespace sieve
