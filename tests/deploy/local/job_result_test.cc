// The launcher's reading of the workers' summary lines (worker_summary.h, against the writer
// worker/trainer/summary.h itself) and its job-level result line (job_result.h).
#include "deploy/local/job_result.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "base/progress_line.h"
#include "deploy/local/worker_summary.h"
#include "worker/trainer/summary.h"

namespace sieve {
namespace {

TEST(WorkerSummaryLine, ReadsWhatTheWorkerWrites) {
  TrainSummary s;
  s.rank = 2;
  s.rounds = 1875;
  s.first_round = 100;
  s.epochs = 1;
  s.test_acc = 0.85123;
  s.bytes_up = 12345678;
  s.seconds = 21.25;
  s.straggler = "2:x3";
  auto parsed = ParseWorkerSummaryLine(FormatSummaryLine(s));
  ASSERT_TRUE(parsed.has_value()) << FormatSummaryLine(s);
  EXPECT_EQ(parsed->rank, 2);
  EXPECT_EQ(parsed->rounds, 1875u);
  ASSERT_TRUE(parsed->test_acc.has_value());
  EXPECT_DOUBLE_EQ(*parsed->test_acc, 0.8512);  // printed with 4 digits
  EXPECT_EQ(parsed->bytes_up, 12345678u);
  EXPECT_DOUBLE_EQ(parsed->seconds, 21.25);

  s.test_acc.reset();
  parsed = ParseWorkerSummaryLine(FormatSummaryLine(s));
  ASSERT_TRUE(parsed.has_value());
  EXPECT_FALSE(parsed->test_acc.has_value());
}

// Every field the worker itself writes (each optional group on) is its own, not a metric; what a
// Python worker appends after them (sieve.torch's summary_line(): " name=value" with "%.6g") is.
TEST(WorkerSummaryLine, KeepsTheScriptsOwnMetrics) {
  TrainSummary s;
  s.rank = 0;
  s.rounds = 100;
  s.test_acc = 0.1;  // near_chance=1 too
  s.bytes_up = 1000;
  s.seconds = 2;
  s.straggler = "0:x2";
  s.skipped_rounds = 1;
  s.barrier_probes = 3;
  const std::string line = FormatSummaryLine(s);
  auto parsed = ParseWorkerSummaryLine(line);
  ASSERT_TRUE(parsed.has_value()) << line;
  EXPECT_TRUE(parsed->metrics.empty()) << line << " gave " << parsed->metrics.front().first;

  parsed = ParseWorkerSummaryLine(line + " perplexity=3.46 bleu=27.5 tiny=1e-05");
  ASSERT_TRUE(parsed.has_value());
  using Metrics = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(parsed->metrics,
            (Metrics{{"perplexity", "3.46"}, {"bleu", "27.5"}, {"tiny", "1e-05"}}));
  EXPECT_DOUBLE_EQ(*parsed->test_acc, 0.1);

  // Fields that are not numbers (or not finite) are no metric, and no reason to refuse the line.
  parsed = ParseWorkerSummaryLine(line + " note=abc big=inf ppl=-2.5 odd=nan");
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(parsed->metrics, (Metrics{{"ppl", "-2.5"}}));
}

TEST(WorkerSummaryLine, RejectsOtherLines) {
  for (const char* line :
       {"", "progress: epoch 1/2 round 3/8 loss 0.5000 bytes_up 1",
        "sieve-worker summary: rank=1 rounds=2 bytes_up=3",  // no seconds
        "sieve-worker summary: rank=x rounds=2 bytes_up=3 seconds=1",
        "sieve-worker summary: rank=1 rounds=2 bytes_up=3 seconds=1 junk",
        "sieve-worker summary: rank=1 rounds=2 bytes_up=3 seconds=1 test_acc=",
        "[worker 1] sieve-worker summary: rank=1 rounds=2 bytes_up=3 seconds=1"}) {
    EXPECT_FALSE(ParseWorkerSummaryLine(line).has_value()) << line;
  }
}

std::string Summary(int rank, uint64_t rounds, uint64_t bytes, bool acc) {
  TrainSummary s;
  s.rank = rank;
  s.rounds = rounds;
  s.bytes_up = bytes;
  if (acc) s.test_acc = 0.8512;
  return FormatSummaryLine(s);
}

TEST(JobResult, FinishedLineGathersEveryWorker) {
  JobResult result(3);
  for (size_t p = 0; p < 3; ++p) result.WorkerStarted(10 + p, static_cast<int>(p));
  result.WorkerLine(10, "some other line");
  result.WorkerLine(11, Summary(1, 1870, 2000000, false));
  result.WorkerLine(10, Summary(0, 1875, 3000000, true));
  result.WorkerLine(12, Summary(2, 1875, 5000000, false));
  for (size_t p = 0; p < 3; ++p) result.WorkerExited(10 + p, true);
  EXPECT_EQ(result.Finished(21.34),
            "job finished: test_acc=0.8512 rounds=1875 time=21.3s pushed=10.0MB workers=3/3");
}

// A restarted worker's predecessor pushed for the job too (its last progress line says how
// much); its summary line may arrive after its exit was seen.
TEST(JobResult, RestartedAndLostWorkersCount) {
  JobResult result(3);
  result.WorkerStarted(1, 0);
  result.WorkerStarted(2, 1);
  result.WorkerStarted(3, 2);
  ProgressPoint point{1, 2, 5, 10, 0.5, 400000};
  result.WorkerLine(2, FormatProgressLine(point));
  result.WorkerExited(2, false);  // worker 1 killed, restarted as process 4
  result.WorkerStarted(4, 1);
  result.WorkerExited(4, true);
  result.WorkerLine(4, Summary(1, 10, 600000, false));
  result.WorkerLine(3, FormatProgressLine(point));
  result.WorkerExited(3, false);  // worker 2 lost for good
  result.WorkerLost(2, "killed by signal 9 (Killed)");
  result.WorkerExited(1, true);
  result.WorkerLine(1, Summary(0, 10, 1000000, true));
  EXPECT_EQ(result.Finished(5),
            "job finished: test_acc=0.8512 rounds=10 time=5.0s pushed=2.4MB workers=2/3; lost "
            "worker 2 (killed by signal 9 (Killed))");
}

// A Python worker's own metrics follow the known fields, each the lowest rank's; one named like
// a field of the result line itself is left out.
TEST(JobResult, FinishedLineShowsTheWorkersOwnMetrics) {
  JobResult result(3);
  for (size_t p = 0; p < 3; ++p) result.WorkerStarted(p, static_cast<int>(p));
  result.WorkerLine(2, Summary(2, 1875, 1000000, false) + " perplexity=4.1 wer=0.12");
  result.WorkerLine(1, Summary(1, 1875, 1000000, false) + " bleu=27.5 perplexity=3.9");
  result.WorkerLine(0, Summary(0, 1875, 1000000, true) + " perplexity=3.46 time=99 workers=7");
  for (size_t p = 0; p < 3; ++p) result.WorkerExited(p, true);
  EXPECT_EQ(result.Finished(21.34),
            "job finished: test_acc=0.8512 rounds=1875 time=21.3s pushed=3.0MB workers=3/3 "
            "perplexity=3.46 bleu=27.5 wer=0.12");

  // Only the ranks whose latest process exited 0 count, as for test_acc.
  JobResult failed_first(2);
  failed_first.WorkerStarted(0, 0);
  failed_first.WorkerStarted(1, 1);
  failed_first.WorkerLine(0, Summary(0, 10, 1000, false) + " perplexity=1");
  failed_first.WorkerLine(1, Summary(1, 10, 1000, false) + " perplexity=2");
  failed_first.WorkerExited(0, false);
  failed_first.WorkerExited(1, true);
  EXPECT_EQ(failed_first.Finished(1),
            "job finished: rounds=10 time=1.0s pushed=2.0kB workers=1/2 perplexity=2");
}

TEST(JobResult, WithoutSummariesOnlyWhatIsKnown) {
  JobResult result(2);
  result.WorkerStarted(1, 0);
  result.WorkerStarted(2, 1);
  result.WorkerExited(1, true);
  result.WorkerExited(2, true);
  EXPECT_EQ(result.Finished(0.04), "job finished: time=0.0s workers=2/2");
}

TEST(JobResult, FailedLineNamesTheSchedulersReason) {
  JobResult result(4);
  EXPECT_EQ(result.Failed("worker 1 (pid 7) failed: exited with code 3"),
            "job FAILED: worker 1 (pid 7) failed: exited with code 3");
  result.SchedulerLine("I1202 10:00:00.000000 1 scheduler.cc:1] worker registered from x");
  result.SchedulerLine(
      "sieve-scheduler: job failed: FAILED_PRECONDITION: only 2 of 4 workers finished");
  EXPECT_EQ(result.Failed("scheduler (pid 5) failed: exited with code 1"),
            "job FAILED: scheduler (pid 5) failed: exited with code 1 (scheduler: "
            "FAILED_PRECONDITION: only 2 of 4 workers finished)");
  result.WorkerLost(3, "killed by signal 9 (Killed)");
  EXPECT_EQ(result.Failed("scheduler (pid 5) failed: exited with code 1"),
            "job FAILED: scheduler (pid 5) failed: exited with code 1 (scheduler: "
            "FAILED_PRECONDITION: only 2 of 4 workers finished); lost worker 3 (killed by signal "
            "9 (Killed))");
}

}  // namespace
}  // namespace sieve
