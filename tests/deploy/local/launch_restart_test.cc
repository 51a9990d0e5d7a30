// `sieve launch --max_restarts` with the real daemons of the build tree (no stand-ins): a job of
// --model=synthetic (no data set) in which the test kills worker 1 with SIGKILL mid-run. With one
// restart allowed the launcher restarts it under its rank, it rejoins, and the job ends with exit
// 0; with none the job fails.
#include "tests/deploy/local/launch_fixture.h"

namespace sieve {
namespace {

class LaunchRestart : public LauncherIntegration {
 protected:
  // Runs a 2-worker synthetic BSP job and kills worker 1 once it printed its first progress
  // line; returns the run, with `killed` set when the kill was sent.
  RunResult RunKillingWorker1(int max_restarts, bool* killed) {
    return LauncherIntegration::RunKillingWorker1(
        {"launch", "--num_servers=1", "--num_workers=2",
         "--max_restarts=" + std::to_string(max_restarts), "--progress=off", "--",
         "--model=synthetic", "--num_params=20000", "--epochs=20", "--rounds_per_epoch=100",
         "--compressor=topk", "--density=0.01", "--heartbeat_interval_ms=200"},
        killed, std::chrono::seconds(120));
  }
};

TEST_F(LaunchRestart, KilledWorkerIsRestartedRejoinsAndTheJobSucceeds) {
  bool killed = false;
  RunResult r = RunKillingWorker1(/*max_restarts=*/1, &killed);
  ASSERT_FALSE(r.timed_out) << r.output;
  ASSERT_TRUE(killed) << r.output;
  EXPECT_EQ(ExitCode(r), 0) << r.output;
  EXPECT_NE(r.output.find("sieve launch: restarting worker 1 (killed by signal 9"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("restart 1 of 1"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("rejoined a running job"), std::string::npos) << r.output;
  // Both workers (the restarted one included) finished the whole run.
  EXPECT_EQ(CountOf(r.output, "sieve-worker summary: "), 2) << r.output;
}

TEST_F(LaunchRestart, WithoutRestartsTheKilledWorkerFailsTheJob) {
  bool killed = false;
  RunResult r = RunKillingWorker1(/*max_restarts=*/0, &killed);
  ASSERT_FALSE(r.timed_out) << r.output;
  ASSERT_TRUE(killed) << r.output;
  EXPECT_EQ(ExitCode(r), 1) << r.output;
  EXPECT_NE(r.output.find("worker 1 (pid "), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("restarting"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace sieve
