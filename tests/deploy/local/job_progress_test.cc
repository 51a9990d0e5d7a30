// The job progress line of `sieve launch`: the worker's progress line format round trip, and the
// text JobProgress derives from scheduler and worker lines, against values worked out by hand.
#include "deploy/local/job_progress.h"

#include <gtest/gtest.h>

#include "base/progress_line.h"

namespace sieve {
namespace {

using std::chrono::seconds;
using Clock = JobProgress::Clock;

ProgressPoint Point(uint64_t epoch, uint64_t round, double loss, uint64_t bytes) {
  return ProgressPoint{epoch, 10, round, 1000, loss, bytes};
}

TEST(ProgressLine, RoundTrips) {
  const ProgressPoint p{3, 10, 250, 1000, 0.43216, 123456789};
  const std::string line = FormatProgressLine(p);
  EXPECT_EQ(line, "progress: epoch 3/10 round 250/1000 loss 0.4322 bytes_up 123456789");
  auto parsed = ParseProgressLine(line);
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(parsed->epoch, 3u);
  EXPECT_EQ(parsed->epochs, 10u);
  EXPECT_EQ(parsed->round, 250u);
  EXPECT_EQ(parsed->rounds, 1000u);
  EXPECT_DOUBLE_EQ(parsed->loss, 0.4322);
  EXPECT_EQ(parsed->bytes_up, 123456789u);
}

TEST(ProgressLine, RejectsOtherLines) {
  EXPECT_FALSE(ParseProgressLine("epoch 3: loss 0.4 test_acc 0.8"));
  EXPECT_FALSE(ParseProgressLine("progress: epoch 3/10 round 250/1000 loss 0.4 bytes_up 1 extra"));
  EXPECT_FALSE(ParseProgressLine("progress: epoch 3/10 round 250/1000 loss 0.4"));
  EXPECT_FALSE(ParseProgressLine(" progress: epoch 3/10 round 250/1000 loss 0.4 bytes_up 1"));
  EXPECT_FALSE(ParseProgressLine(""));
}

TEST(ProgressLine, FormatsDurationsAndBytes) {
  EXPECT_EQ(FormatDuration(59.4), "59s");
  EXPECT_EQ(FormatDuration(3600), "1h00m00s");
  EXPECT_EQ(FormatBytes(999), "999 B");
  EXPECT_EQ(FormatBytes(1500), "1.5 kB");
  EXPECT_EQ(FormatBytes(12345678), "12.3 MB");
  EXPECT_EQ(FormatBytes(2000000000), "2.0 GB");
}

TEST(JobProgress, SaysWhoIsMissingWhileTheJobForms) {
  JobProgress job(2, 4);
  EXPECT_EQ(job.Text(), "");  // no scheduler address yet
  job.set_scheduler_address("127.0.0.1:9310");
  EXPECT_EQ(job.Text(),
            "waiting for 4 of 4 workers and 2 of 2 servers; scheduler at 127.0.0.1:9310");
  job.SchedulerLine(
      "I1201 10:40:00.123456 12345 scheduler.cc:252] server registered from "
      "127.0.0.1:40001 (1/6)");
  job.SchedulerLine(
      "I1201 10:40:00.223456 12345 scheduler.cc:252] worker registered from "
      "127.0.0.1:40002 (2/6)");
  job.SchedulerLine(
      "I1201 10:40:00.323456 12345 scheduler.cc:252] worker registered from "
      "127.0.0.1:40003 (3/6)");
  job.SchedulerLine("sieve-scheduler listening on 127.0.0.1:9310");  // ignored
  EXPECT_EQ(job.Text(),
            "waiting for 2 of 4 workers and 1 of 2 servers; scheduler at 127.0.0.1:9310");
  job.SchedulerLine(
      "I1201 10:40:00.4 1 scheduler.cc:252] server registered from 127.0.0.1:1 (4/6)");
  EXPECT_EQ(job.Text(), "waiting for 2 of 4 workers; scheduler at 127.0.0.1:9310");
  EXPECT_FALSE(job.formed());
  job.SchedulerLine(
      "I1201 10:40:01.0 1 scheduler.cc:311] node table sent: D = 7, 2 servers, 4 workers");
  EXPECT_TRUE(job.formed());
  EXPECT_EQ(job.Text(), "job formed (2 servers, 4 workers); waiting for the first round");
}

TEST(JobProgress, SumsUpTheWorkers) {
  JobProgress job(1, 2);
  job.set_scheduler_address("127.0.0.1:9310");
  const Clock::time_point t0{};
  job.WorkerProgress(0, Point(1, 100, 0.5, 1000000), t0);
  // One point in time: no rate or ETA yet.
  EXPECT_EQ(job.Text(), "epoch 1/10 round 100/1000 10% loss 0.5000 pushed 1.0 MB");
  job.WorkerProgress(1, Point(1, 90, 0.7, 2000000), t0 + seconds(1));
  // The slowest worker's round; mean loss; summed bytes; the job was at round 100 when the first
  // line came, at 90 one second later: no progress measured yet.
  EXPECT_EQ(job.Text(), "epoch 1/10 round 90/1000 9% loss 0.6000 pushed 3.0 MB");
  job.WorkerProgress(0, Point(3, 300, 0.3, 4000000), t0 + seconds(10));
  job.WorkerProgress(1, Point(3, 300, 0.1, 4000000), t0 + seconds(10));
  // (300 - 100) rounds in 10 s = 20 rounds/s; 700 rounds left: 35 s.
  EXPECT_EQ(job.Text(),
            "epoch 3/10 round 300/1000 30% loss 0.2000 20.0 rounds/s pushed 8.0 MB ETA 35s");
}

TEST(JobProgress, KeepsWhatARestartedWorkersPredecessorPushed) {
  JobProgress job(1, 1);
  job.set_scheduler_address("127.0.0.1:1");
  const Clock::time_point t0{};
  job.WorkerProgress(0, Point(1, 100, 0.5, 3000000), t0);
  job.WorkerProgress(0, Point(1, 110, 0.5, 500000), t0 + seconds(2));  // a new process
  EXPECT_EQ(job.Text(),
            "epoch 1/10 round 110/1000 11% loss 0.5000 5.0 rounds/s pushed 3.5 MB ETA 2m58s");
}

TEST(JobProgress, ShowsNoTotalWhenTheJobsLengthIsUnknown) {
  // A Python worker without steps_per_epoch writes its totals as 0: "epoch 0/0 round 16/0".
  JobProgress job(1, 1);
  job.set_scheduler_address("127.0.0.1:1");
  const Clock::time_point t0{};
  const auto point = [](uint64_t round) { return ProgressPoint{0, 0, round, 0, 0.5, 1000000}; };
  job.WorkerProgress(0, point(16), t0);
  EXPECT_EQ(job.Text(), "round 16 loss 0.5000 pushed 1.0 MB");
  // (36 - 16) rounds in 10 s: a rate, but no ETA.
  job.WorkerProgress(0, point(36), t0 + seconds(10));
  EXPECT_EQ(job.Text(), "round 36 loss 0.5000 2.0 rounds/s pushed 1.0 MB");
}

TEST(JobProgress, ShowsAKnownEpochCountWithoutARoundTotal) {
  JobProgress job(1, 1);
  job.set_scheduler_address("127.0.0.1:1");
  job.WorkerProgress(0, ProgressPoint{2, 3, 57, 0, 0.25, 2000}, Clock::time_point{});
  EXPECT_EQ(job.Text(), "epoch 2/3 round 57 loss 0.2500 pushed 2.0 kB");
}

}  // namespace
}  // namespace sieve
