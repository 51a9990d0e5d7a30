// The launcher's job-level result line (job_result.h) from a final job status, against lines
// worked out by hand from its contract.
#include "deploy/local/job_result.h"

#include <gtest/gtest.h>

#include <string>

#include "tests/deploy/local/job_status_rows.h"

namespace sieve {
namespace {

// A finished job of `workers` workers; AddWorker adds their rows.
pb::JobStatus Finished(uint32_t workers, uint32_t finished) {
  pb::JobStatus st;
  st.set_phase(pb::JOB_FINISHED);
  st.set_num_workers(workers);
  st.set_workers_finished(finished);
  return st;
}

TEST(JobResult, FinishedLineSumsTheStatusUp) {
  pb::JobStatus st = Finished(4, 4);
  for (int rank = 0; rank < 4; ++rank) AddWorker(&st, rank, rank == 2 ? 1874 : 1875);
  st.mutable_progress()->set_test_accuracy(0.85123);
  st.mutable_progress()->set_bytes_pushed(12345678);
  JobResult result(4);
  EXPECT_EQ(result.Finished(21.25, &st),
            "job finished: test_acc=0.8512 rounds=1875 time=21.2s pushed=12.3MB workers=4/4");
}

TEST(JobResult, LostWorkersAreNamed) {
  pb::JobStatus st = Finished(3, 2);
  AddWorker(&st, 0, 100);
  AddWorker(&st, 2, 100);
  st.mutable_progress()->set_bytes_pushed(1500);
  JobResult result(3);
  result.WorkerLost(1, "killed by signal 9 (Killed)");
  EXPECT_EQ(result.Finished(2.0, &st),
            "job finished: rounds=100 time=2.0s pushed=1.5kB workers=2/3; lost worker 1 (killed "
            "by signal 9 (Killed))");
}

TEST(JobResult, FinishedLineShowsTheWorkersOwnMetricsByName) {
  pb::JobStatus st = Finished(2, 2);
  AddWorker(&st, 0, 10);
  auto& metrics = *st.mutable_progress()->mutable_metrics();
  metrics["perplexity"] = 3.4567891;
  metrics["bleu"] = 0.25;
  metrics["time"] = 99;  // the line's own field: left out
  JobResult result(2);
  EXPECT_EQ(result.Finished(1.0, &st),
            "job finished: rounds=10 time=1.0s pushed=0B workers=2/2 bleu=0.25 perplexity=3.45679");
}

TEST(JobResult, WithoutReportsOnlyWhatIsKnown) {
  JobResult result(2);
  EXPECT_EQ(result.Finished(3.0, nullptr), "job finished: time=3.0s workers=0/2");
  pb::JobStatus st = Finished(2, 2);  // no worker reported
  EXPECT_EQ(result.Finished(3.0, &st), "job finished: time=3.0s workers=2/2");
}

TEST(JobResult, FailedLineNamesTheSchedulersReason) {
  JobResult result(2);
  EXPECT_EQ(result.Failed("worker 1 (pid 7) failed: exited with status 1", nullptr),
            "job FAILED: worker 1 (pid 7) failed: exited with status 1");
  pb::JobStatus st;
  st.set_phase(pb::JOB_FAILED);
  st.mutable_failure()->set_code("UNAVAILABLE");
  st.mutable_failure()->set_message("every worker died");
  result.WorkerLost(0, "exited with status 1");
  EXPECT_EQ(result.Failed("scheduler (pid 5) failed: exited with status 1", &st),
            "job FAILED: scheduler (pid 5) failed: exited with status 1 (scheduler: UNAVAILABLE: "
            "every worker died); lost worker 0 (exited with status 1)");
  st.set_phase(pb::JOB_RUNNING);  // not the scheduler's failure: nothing added
  EXPECT_EQ(result.Failed("interrupted by Interrupt", &st),
            "job FAILED: interrupted by Interrupt; lost worker 0 (exited with status 1)");
}

}  // namespace
}  // namespace sieve
