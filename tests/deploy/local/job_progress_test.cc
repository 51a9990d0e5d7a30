// The job progress line of `sieve launch`: the worker's progress line format round trip, and the
// text JobProgressText derives from the scheduler's job status, against values worked out by hand.
#include "deploy/local/job_progress.h"

#include <gtest/gtest.h>

#include "proto/job_status_text.h"
#include "proto/progress_line.h"
#include "tests/deploy/local/job_status_rows.h"

namespace sieve {
namespace {

// A job of 2 servers and 4 workers at 127.0.0.1:9310 in `phase`.
pb::JobStatus Job(pb::JobPhase phase) {
  pb::JobStatus st;
  st.set_phase(phase);
  st.set_num_servers(2);
  st.set_num_workers(4);
  st.set_scheduler("127.0.0.1:9310");
  return st;
}

// A running Job whose worker 0 reported `round`, the round of its progress.
pb::JobStatus RunningAtRound(uint64_t round) {
  pb::JobStatus st = Job(pb::JOB_RUNNING);
  AddWorker(&st, 0, round);
  st.mutable_progress()->set_round(round);
  return st;
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
  pb::JobStatus st = Job(pb::JOB_FORMING);
  EXPECT_EQ(JobProgressText(st),
            "waiting for 4 of 4 workers and 2 of 2 servers; scheduler at 127.0.0.1:9310");
  st.set_servers_registered(2);
  st.set_workers_registered(1);
  EXPECT_EQ(JobProgressText(st), "waiting for 3 of 4 workers; scheduler at 127.0.0.1:9310");
  st.set_servers_registered(1);
  st.set_workers_registered(4);
  EXPECT_EQ(JobProgressText(st), "waiting for 1 of 2 servers; scheduler at 127.0.0.1:9310");
  st.set_servers_registered(2);
  EXPECT_EQ(JobProgressText(st), "waiting for the job to start; scheduler at 127.0.0.1:9310");
}

TEST(JobProgress, SaysTheJobFormedUntilAWorkerReports) {
  pb::JobStatus st = Job(pb::JOB_RUNNING);
  EXPECT_EQ(JobProgressText(st), "job formed (2 servers, 4 workers); waiting for the first round");
  st.set_num_servers(1);
  st.set_num_workers(1);
  EXPECT_EQ(JobProgressText(st), "job formed (1 server, 1 worker); waiting for the first round");
}

TEST(JobProgress, ShowsTheStatusProgress) {
  pb::JobStatus st = RunningAtRound(5000);
  pb::JobProgress* p = st.mutable_progress();
  p->set_epoch(3);
  p->set_epochs(10);
  p->set_total_rounds(18740);
  p->set_loss(0.43214);
  p->set_bytes_pushed(12345678);
  // No rate yet: no rate, no ETA.
  EXPECT_EQ(JobProgressText(st), "epoch 3/10 round 5000/18740 27% loss 0.4321 pushed 12.3 MB");
  p->set_rounds_per_second(52.3);
  p->set_eta_seconds(263);  // 4m23s
  EXPECT_EQ(JobProgressText(st),
            "epoch 3/10 round 5000/18740 27% loss 0.4321 52.3 rounds/s pushed 12.3 MB ETA 4m23s");
}

TEST(JobProgress, UnknownTotalsShowTheRoundAlone) {
  pb::JobStatus st = RunningAtRound(16);
  pb::JobProgress* p = st.mutable_progress();
  p->set_rounds_per_second(2.0);
  p->set_eta_seconds(5);  // never shown without a total
  p->set_bytes_pushed(1200000);
  EXPECT_EQ(JobProgressText(st), "round 16 2.0 rounds/s pushed 1.2 MB");  // no loss reported
  p->set_loss(0.43214);
  EXPECT_EQ(JobProgressText(st), "round 16 loss 0.4321 2.0 rounds/s pushed 1.2 MB");
}

TEST(JobProgress, AnEndedJobShowsItsBrief) {
  pb::JobStatus st = Job(pb::JOB_FAILED);
  st.mutable_failure()->set_code("UNAVAILABLE");
  st.mutable_failure()->set_message("every worker died");
  st.mutable_failure()->set_node_id(-1);
  EXPECT_EQ(JobProgressText(st), JobStatusBrief(st));
}

}  // namespace
}  // namespace sieve
