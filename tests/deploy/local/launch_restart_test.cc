// `sieve launch --max_restarts` with the real daemons of the build tree (no stand-ins): a job of
// --model=synthetic (no data set) in which the test kills worker 1 with SIGKILL mid-run. With one
// restart allowed the launcher restarts it under its rank, it rejoins, and the job ends with exit
// 0; with none the job fails. The job's end is read from the scheduler's job status
// (--status_file).
#include "tests/deploy/local/launch_fixture.h"

namespace sieve {
namespace {

class LaunchRestart : public LauncherIntegration {
 protected:
  // Runs a 2-worker synthetic BSP job into *r and kills worker 1 once the job status shows a
  // round done (LauncherIntegration::RunKillingWorker1).
  void RunKillingWorker1(int max_restarts, RunResult* r) {
    LauncherIntegration::RunKillingWorker1(
        {"launch", "--num_servers=1", "--num_workers=2",
         "--max_restarts=" + std::to_string(max_restarts), "--progress=off", "--",
         "--model=synthetic", "--num_params=20000", "--epochs=20", "--rounds_per_epoch=100",
         "--compressor=topk", "--density=0.01", "--heartbeat_interval_ms=200",
         // At least 2 ms a round, so that the kill (paced by the job status, rewritten every
         // 250 ms) lands well inside the job.
         "--straggler=delay:2ms"},
        std::chrono::seconds(120), r);
  }

  fs::path StatusPath() const { return KillStatusPath(); }
};

TEST_F(LaunchRestart, KilledWorkerIsRestartedRejoinsAndTheJobSucceeds) {
  RunResult r;
  ASSERT_NO_FATAL_FAILURE(RunKillingWorker1(/*max_restarts=*/1, &r));
  EXPECT_EQ(ExitCode(r), 0) << r.output;
  EXPECT_NE(r.output.find("sieve launch: restarting worker 1 (killed by signal 9"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("restart 1 of 1"), std::string::npos) << r.output;
  // The scheduler's final status: a second process took worker 1's rank, rejoined the running
  // job and finished it.
  const std::optional<pb::JobStatus> status = ReadJobStatus(StatusPath());
  ASSERT_TRUE(status.has_value()) << "no job status in " << StatusPath() << "\n" << r.output;
  EXPECT_EQ(status->phase(), pb::JOB_FINISHED) << JobStatusToJson(*status);
  const pb::JobNode* w1 = NodeOf(*status, pb::ROLE_WORKER, 1);
  ASSERT_NE(w1, nullptr) << JobStatusToJson(*status);
  EXPECT_EQ(w1->restarts(), 1u) << JobStatusToJson(*status);
  EXPECT_EQ(w1->state(), pb::NODE_FINISHED) << JobStatusToJson(*status);
  EXPECT_EQ(status->workers_finished(), 2u) << JobStatusToJson(*status);
  // Both workers (the restarted one included) finished the whole run.
  EXPECT_EQ(WorkerSummaries(2), 2) << r.output;
}

TEST_F(LaunchRestart, WithoutRestartsTheKilledWorkerFailsTheJob) {
  RunResult r;
  ASSERT_NO_FATAL_FAILURE(RunKillingWorker1(/*max_restarts=*/0, &r));
  EXPECT_EQ(ExitCode(r), 1) << r.output;
  EXPECT_NE(r.output.find("worker 1 (pid "), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("restarting"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace sieve
