// NodeReports (scheduler/node_reports.h): every refusal rule of its contract, the restart of a
// node's counters by a new process, and the job's progress summed from the workers' reports.
#include "scheduler/node_reports.h"

#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace sieve {
namespace {

using google::protobuf::util::MessageDifferencer;
using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = NodeReports::Clock;

constexpr int kServerId = 1;
constexpr int kWorkerId = 2;
constexpr uint64_t kInstance = 77;

const Clock::time_point kT0 = Clock::time_point() + std::chrono::hours(1);

// A worker report that passes every check: round 10 of 100, epoch 1 of 4, loss 0.5.
pb::WorkerReport GoodWorker() {
  pb::WorkerReport r;
  r.set_round(10);
  r.set_total_rounds(100);
  r.set_epoch(1);
  r.set_epochs(4);
  r.set_loss(0.5f);
  r.set_test_accuracy(0.25f);
  r.set_bytes_pushed(1000);
  r.set_bytes_pulled(2000);
  r.set_skipped_rounds(1);
  r.set_missed_slices(2);
  r.set_straggle_seconds(0.5f);
  (*r.mutable_metrics())["lr"] = 0.1;
  return r;
}

// "m0", "m1", ... (appended, not "m" + ...: GCC 12's -Wrestrict misfires on the latter).
std::string MetricName(int i) {
  std::string name = "m";
  name.append(std::to_string(i));
  return name;
}

pb::Heartbeat WorkerHb(const pb::WorkerReport& r) {
  pb::Heartbeat hb;
  *hb.mutable_worker() = r;
  return hb;
}

// A fixture whose worker kWorkerId (instance kInstance) has GoodWorker() accepted, and whose
// server kServerId has a server report accepted: each refusal test sends one bad report and
// checks that it is refused, counted, and that the accepted report stays as it was.
class NodeReportsRefusalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    accepted_ = GoodWorker();
    ASSERT_TRUE(
        reports_.Accept(kWorkerId, pb::ROLE_WORKER, kInstance, WorkerHb(accepted_), kT0).ok());
    server_.set_rounds(5);
    server_.set_pushes_applied(10);
    server_.set_rejected(1);
    server_.set_duplicates(2);
    pb::Heartbeat hb;
    *hb.mutable_server() = server_;
    ASSERT_TRUE(reports_.Accept(kServerId, pb::ROLE_SERVER, kInstance, hb, kT0).ok());
    ASSERT_EQ(reports_.refused(), 0u);
  }

  // Sends `bad` as worker kWorkerId's next report of the same process and checks the refusal.
  void ExpectWorkerRefused(const pb::WorkerReport& bad) {
    const Status s = reports_.Accept(kWorkerId, pb::ROLE_WORKER, kInstance, WorkerHb(bad), kT0);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
    EXPECT_EQ(reports_.refused(), 1u);
    ExpectUnchanged();
  }

  void ExpectUnchanged() {
    const pb::WorkerReport* w = reports_.Worker(kWorkerId);
    ASSERT_NE(w, nullptr);
    EXPECT_TRUE(MessageDifferencer::Equals(*w, accepted_)) << w->DebugString();
    const pb::ServerReport* s = reports_.Server(kServerId);
    ASSERT_NE(s, nullptr);
    EXPECT_TRUE(MessageDifferencer::Equals(*s, server_)) << s->DebugString();
  }

  NodeReports reports_;
  pb::WorkerReport accepted_;
  pb::ServerReport server_;
};

// A bad worker report: GoodWorker() as the next round (11) of the same process, with one change.
struct BadWorkerCase {
  const char* name;
  void (*spoil)(pb::WorkerReport* r);
};

const BadWorkerCase kBadWorkerCases[] = {
    {"NegativeLoss", [](pb::WorkerReport* r) { r->set_loss(-0.25f); }},
    {"NanLoss", [](pb::WorkerReport* r) { r->set_loss(std::numeric_limits<float>::quiet_NaN()); }},
    {"InfiniteLoss",
     [](pb::WorkerReport* r) { r->set_loss(std::numeric_limits<float>::infinity()); }},
    {"AccuracyAboveOne", [](pb::WorkerReport* r) { r->set_test_accuracy(1.5f); }},
    {"NegativeAccuracy", [](pb::WorkerReport* r) { r->set_test_accuracy(-0.1f); }},
    {"NegativeStraggleTime", [](pb::WorkerReport* r) { r->set_straggle_seconds(-1.0f); }},
    {"RoundBeyondItsTotal", [](pb::WorkerReport* r) { r->set_round(101); }},  // total 100
    // The process reported 10 before.
    {"RoundGoingBackWithinOneProcess", [](pb::WorkerReport* r) { r->set_round(9); }},
    {"RoundJumpingMoreThanTheMaxStep",
     [](pb::WorkerReport* r) {
       r->set_total_rounds(0);  // unknown total: only the step bounds the round
       r->set_round(10 + NodeReports::kMaxRoundStep + 1);
     }},
    {"BytesPushedGoingBack", [](pb::WorkerReport* r) { r->set_bytes_pushed(999); }},
    {"BytesPulledGoingBack", [](pb::WorkerReport* r) { r->set_bytes_pulled(1999); }},
    {"MissCountersGoingBack", [](pb::WorkerReport* r) { r->set_missed_slices(1); }},
    {"EpochBeyondItsEpochs", [](pb::WorkerReport* r) { r->set_epoch(5); }},  // of 4
    {"SeventeenMetrics",
     [](pb::WorkerReport* r) {
       r->clear_metrics();
       for (int i = 0; i < 17; ++i) (*r->mutable_metrics())[MetricName(i)] = i;
     }},
    {"MetricNameWithASpace",
     [](pb::WorkerReport* r) { (*r->mutable_metrics())["bad name"] = 1.0; }},
    {"EmptyMetricName", [](pb::WorkerReport* r) { (*r->mutable_metrics())[""] = 1.0; }},
    {"MetricNameOf65Characters",
     [](pb::WorkerReport* r) { (*r->mutable_metrics())[std::string(65, 'a')] = 1.0; }},
    {"NanMetric", [](pb::WorkerReport* r) { (*r->mutable_metrics())["acc"] = std::nan(""); }},
};

class NodeReportsBadWorkerTest : public NodeReportsRefusalTest,
                                 public ::testing::WithParamInterface<BadWorkerCase> {};

TEST_P(NodeReportsBadWorkerTest, IsRefused) {
  pb::WorkerReport r = GoodWorker();
  r.set_round(11);
  GetParam().spoil(&r);
  ExpectWorkerRefused(r);
}

INSTANTIATE_TEST_SUITE_P(Reports, NodeReportsBadWorkerTest, ::testing::ValuesIn(kBadWorkerCases),
                         [](const ::testing::TestParamInfo<BadWorkerCase>& info) {
                           return std::string(info.param.name);
                         });

TEST_F(NodeReportsRefusalTest, WorkerPartFromAServerIsRefused) {
  pb::WorkerReport r = GoodWorker();
  r.set_round(20);
  const Status s = reports_.Accept(kServerId, pb::ROLE_SERVER, kInstance, WorkerHb(r), kT0);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_EQ(reports_.refused(), 1u);
  EXPECT_EQ(reports_.Worker(kServerId), nullptr);
  ExpectUnchanged();
}

TEST_F(NodeReportsRefusalTest, ServerPartFromAWorkerIsRefused) {
  pb::Heartbeat hb;
  hb.mutable_server()->set_rounds(50);
  const Status s = reports_.Accept(kWorkerId, pb::ROLE_WORKER, kInstance, hb, kT0);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_EQ(reports_.refused(), 1u);
  EXPECT_EQ(reports_.Server(kWorkerId), nullptr);
  ExpectUnchanged();
}

TEST_F(NodeReportsRefusalTest, RoundJumpingExactlyTheMaxStepIsAccepted) {
  pb::WorkerReport r = GoodWorker();
  r.set_total_rounds(0);
  r.set_round(10 + NodeReports::kMaxRoundStep);
  EXPECT_TRUE(reports_.Accept(kWorkerId, pb::ROLE_WORKER, kInstance, WorkerHb(r), kT0).ok());
  EXPECT_EQ(reports_.refused(), 0u);
  ASSERT_NE(reports_.Worker(kWorkerId), nullptr);
  EXPECT_EQ(reports_.Worker(kWorkerId)->round(), 10 + NodeReports::kMaxRoundStep);
}

TEST_F(NodeReportsRefusalTest, ServerCounterGoingBackIsRefused) {
  pb::Heartbeat hb;
  *hb.mutable_server() = server_;
  hb.mutable_server()->set_pushes_applied(9);
  const Status s = reports_.Accept(kServerId, pb::ROLE_SERVER, kInstance, hb, kT0);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_EQ(reports_.refused(), 1u);
  ExpectUnchanged();
}

TEST_F(NodeReportsRefusalTest, SixteenMetricsAreAccepted) {
  pb::WorkerReport r = GoodWorker();
  r.set_round(11);
  r.clear_metrics();
  for (int i = 0; i < 16; ++i) (*r.mutable_metrics())[MetricName(i)] = i;
  EXPECT_TRUE(reports_.Accept(kWorkerId, pb::ROLE_WORKER, kInstance, WorkerHb(r), kT0).ok());
  EXPECT_EQ(reports_.refused(), 0u);
}

TEST_F(NodeReportsRefusalTest, MetricNamesOfEveryAllowedCharacterAreAccepted) {
  pb::WorkerReport r = GoodWorker();
  r.set_round(11);
  (*r.mutable_metrics())[std::string(64, 'z')] = 1.0;
  (*r.mutable_metrics())["Az09_.-"] = 2.0;
  EXPECT_TRUE(reports_.Accept(kWorkerId, pb::ROLE_WORKER, kInstance, WorkerHb(r), kT0).ok());
  EXPECT_EQ(reports_.refused(), 0u);
}

TEST_F(NodeReportsRefusalTest, RefusalsAreCountedOneEach) {
  pb::WorkerReport nan_loss = GoodWorker();
  nan_loss.set_loss(std::numeric_limits<float>::quiet_NaN());
  pb::WorkerReport back = GoodWorker();
  back.set_round(3);
  EXPECT_FALSE(
      reports_.Accept(kWorkerId, pb::ROLE_WORKER, kInstance, WorkerHb(nan_loss), kT0).ok());
  EXPECT_FALSE(reports_.Accept(kWorkerId, pb::ROLE_WORKER, kInstance, WorkerHb(back), kT0).ok());
  EXPECT_EQ(reports_.refused(), 2u);
  ExpectUnchanged();
}

TEST_F(NodeReportsRefusalTest, ABareHeartbeatChangesNothing) {
  EXPECT_TRUE(reports_.Accept(kWorkerId, pb::ROLE_WORKER, kInstance, pb::Heartbeat(), kT0).ok());
  EXPECT_EQ(reports_.refused(), 0u);
  ExpectUnchanged();
}

// A new process of the id (another instance) starts its counters again: a round of 0 and fewer
// bytes are accepted, and its predecessor's bytes stay in the job's totals.
TEST(NodeReportsTest, NewProcessStartsAgainAndKeepsItsPredecessorsBytes) {
  NodeReports reports;
  pb::WorkerReport first = GoodWorker();  // round 10, pushed 1000, pulled 2000
  ASSERT_TRUE(reports.Accept(kWorkerId, pb::ROLE_WORKER, 1, WorkerHb(first), kT0).ok());
  pb::WorkerReport other;  // worker 3, one process: pushed 50, pulled 60
  other.set_round(12);
  other.set_bytes_pushed(50);
  other.set_bytes_pulled(60);
  ASSERT_TRUE(reports.Accept(3, pb::ROLE_WORKER, 9, WorkerHb(other), kT0).ok());

  pb::WorkerReport second;  // the restarted process: round 0, its own (smaller) byte counts
  second.set_round(0);
  second.set_total_rounds(100);
  second.set_bytes_pushed(300);
  second.set_bytes_pulled(400);
  const Status s = reports.Accept(kWorkerId, pb::ROLE_WORKER, 2, WorkerHb(second), kT0);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(reports.refused(), 0u);
  ASSERT_NE(reports.Worker(kWorkerId), nullptr);
  EXPECT_TRUE(MessageDifferencer::Equals(*reports.Worker(kWorkerId), second));

  // A third process, after the second moved more bytes.
  second.set_round(5);
  second.set_bytes_pushed(700);
  second.set_bytes_pulled(800);
  ASSERT_TRUE(reports.Accept(kWorkerId, pb::ROLE_WORKER, 2, WorkerHb(second), kT0).ok());
  pb::WorkerReport third;
  third.set_round(1);
  third.set_bytes_pushed(5);
  third.set_bytes_pulled(6);
  ASSERT_TRUE(reports.Accept(kWorkerId, pb::ROLE_WORKER, 3, WorkerHb(third), kT0).ok());

  const pb::JobProgress p =
      reports.Progress({{kWorkerId, 0, true, false}, {3, 1, true, false}}, kT0);
  EXPECT_EQ(p.bytes_pushed(), 1000u + 700u + 5u + 50u);
  EXPECT_EQ(p.bytes_pulled(), 2000u + 800u + 6u + 60u);
  EXPECT_EQ(p.round(), 1u);  // the third process's round is the slowest
}

// Forget (a new process took the rank): the old report no longer stands for the worker, so the
// job's round is the others' until the new process reports; the old bytes stay in the totals
// once, however the new process's reports come.
TEST(NodeReportsTest, ForgottenReportLeavesTheRoundToTheOthersAndKeepsItsBytes) {
  NodeReports reports;
  pb::WorkerReport old = GoodWorker();  // round 10, pushed 1000, pulled 2000
  ASSERT_TRUE(reports.Accept(kWorkerId, pb::ROLE_WORKER, 1, WorkerHb(old), kT0).ok());
  pb::WorkerReport other;
  other.set_round(50);
  other.set_bytes_pushed(5);
  ASSERT_TRUE(reports.Accept(3, pb::ROLE_WORKER, 9, WorkerHb(other), kT0).ok());
  const std::vector<NodeReports::WorkerRow> rows = {{kWorkerId, 0, true, false},
                                                    {3, 1, true, false}};
  EXPECT_EQ(reports.Progress(rows, kT0).round(), 10u);
  reports.Forget(kWorkerId);
  EXPECT_EQ(reports.Worker(kWorkerId), nullptr);
  pb::JobProgress p = reports.Progress(rows, kT0);
  EXPECT_EQ(p.round(), 50u);
  EXPECT_EQ(p.bytes_pushed(), 1005u);
  pb::WorkerReport fresh;
  fresh.set_round(40);
  fresh.set_bytes_pushed(7);
  ASSERT_TRUE(reports.Accept(kWorkerId, pb::ROLE_WORKER, 2, WorkerHb(fresh), kT0).ok());
  p = reports.Progress(rows, kT0);
  EXPECT_EQ(p.round(), 40u);
  EXPECT_EQ(p.bytes_pushed(), 1000u + 7u + 5u);
}

// The refusal rules of the same process apply to the new one from its own first report on.
TEST(NodeReportsTest, NewProcessIsCheckedAgainstItsOwnReports) {
  NodeReports reports;
  ASSERT_TRUE(reports.Accept(kWorkerId, pb::ROLE_WORKER, 1, WorkerHb(GoodWorker()), kT0).ok());
  pb::WorkerReport r;
  r.set_round(4);
  ASSERT_TRUE(reports.Accept(kWorkerId, pb::ROLE_WORKER, 2, WorkerHb(r), kT0).ok());
  r.set_round(3);
  EXPECT_FALSE(reports.Accept(kWorkerId, pb::ROLE_WORKER, 2, WorkerHb(r), kT0).ok());
  EXPECT_EQ(reports.refused(), 1u);
  EXPECT_EQ(reports.Worker(kWorkerId)->round(), 4u);
}

pb::WorkerReport Trained(uint64_t round, float loss) {
  pb::WorkerReport r;
  r.set_round(round);
  r.set_total_rounds(1000);
  r.set_loss(loss);
  return r;
}

// Workers ids 10..13, ranks 0..3.
TEST(NodeReportsProgressTest, SlowestLiveUnfinishedWorkerAndTheirMeanLoss) {
  NodeReports reports;
  pb::WorkerReport w0 = Trained(500, 0.1f);  // rank 0: finished
  w0.set_test_accuracy(0.75f);
  pb::WorkerReport w1 = Trained(20, 0.9f);  // rank 1: dead
  w1.set_test_accuracy(0.5f);
  pb::WorkerReport w2 = Trained(300, 0.25f);  // rank 2: training
  w2.set_test_accuracy(0.125f);
  pb::WorkerReport w3 = Trained(320, 0.75f);  // rank 3: training
  ASSERT_TRUE(reports.Accept(10, pb::ROLE_WORKER, 1, WorkerHb(w0), kT0).ok());
  ASSERT_TRUE(reports.Accept(11, pb::ROLE_WORKER, 1, WorkerHb(w1), kT0).ok());
  ASSERT_TRUE(reports.Accept(12, pb::ROLE_WORKER, 1, WorkerHb(w2), kT0).ok());
  ASSERT_TRUE(reports.Accept(13, pb::ROLE_WORKER, 1, WorkerHb(w3), kT0).ok());
  const std::vector<NodeReports::WorkerRow> rows = {
      {10, 0, true, true}, {11, 1, false, false}, {12, 2, true, false}, {13, 3, true, false}};
  const pb::JobProgress p = reports.Progress(rows, kT0);
  EXPECT_EQ(p.round(), 300u);
  EXPECT_EQ(p.total_rounds(), 1000u);
  ASSERT_TRUE(p.has_loss());
  EXPECT_NEAR(p.loss(), (0.25 + 0.75) / 2, 1e-6);
  ASSERT_TRUE(p.has_test_accuracy());
  EXPECT_NEAR(p.test_accuracy(), 0.75, 1e-6);  // rank 0's, finished or not
  EXPECT_EQ(p.rounds_per_second(), 0.0);       // one point only
  EXPECT_FALSE(p.has_eta_seconds());
}

TEST(NodeReportsProgressTest, TestAccuracyAndMetricsAreTheLowestRanks) {
  NodeReports reports;
  pb::WorkerReport hi = Trained(5, 0.5f);  // rank 1, listed first
  hi.set_test_accuracy(0.9f);
  (*hi.mutable_metrics())["f1"] = 0.9;
  pb::WorkerReport lo = Trained(6, 0.5f);  // rank 0
  lo.set_test_accuracy(0.5f);
  (*lo.mutable_metrics())["f1"] = 0.25;
  ASSERT_TRUE(reports.Accept(20, pb::ROLE_WORKER, 1, WorkerHb(hi), kT0).ok());
  ASSERT_TRUE(reports.Accept(21, pb::ROLE_WORKER, 1, WorkerHb(lo), kT0).ok());
  const pb::JobProgress p = reports.Progress({{20, 1, true, false}, {21, 0, true, false}}, kT0);
  ASSERT_TRUE(p.has_test_accuracy());
  EXPECT_NEAR(p.test_accuracy(), 0.5, 1e-6);
  ASSERT_EQ(p.metrics().count("f1"), 1u);
  EXPECT_EQ(p.metrics().at("f1"), 0.25);
  EXPECT_EQ(p.round(), 5u);
}

TEST(NodeReportsProgressTest, FinishedWorkersCountOnceEveryWorkerFinished) {
  NodeReports reports;
  ASSERT_TRUE(reports.Accept(10, pb::ROLE_WORKER, 1, WorkerHb(Trained(1000, 0.25f)), kT0).ok());
  ASSERT_TRUE(reports.Accept(11, pb::ROLE_WORKER, 1, WorkerHb(Trained(990, 0.5f)), kT0).ok());
  const pb::JobProgress p = reports.Progress({{10, 0, true, true}, {11, 1, true, true}}, kT0);
  EXPECT_EQ(p.round(), 990u);
  ASSERT_TRUE(p.has_loss());
  EXPECT_NEAR(p.loss(), (0.25 + 0.5) / 2, 1e-6);
}

TEST(NodeReportsProgressTest, NoLossUntilAWorkerReportsOne) {
  NodeReports reports;
  pb::WorkerReport r;
  r.set_round(3);
  ASSERT_TRUE(reports.Accept(10, pb::ROLE_WORKER, 1, WorkerHb(r), kT0).ok());
  const pb::JobProgress p = reports.Progress({{10, 0, true, false}}, kT0);
  EXPECT_EQ(p.round(), 3u);
  EXPECT_FALSE(p.has_loss());
  EXPECT_FALSE(p.has_test_accuracy());
  EXPECT_EQ(p.total_rounds(), 0u);
}

TEST(NodeReportsProgressTest, NoReportsGiveAnEmptyProgress) {
  NodeReports reports;
  const pb::JobProgress p = reports.Progress({{10, 0, true, false}, {11, 1, true, false}}, kT0);
  EXPECT_EQ(p.round(), 0u);
  EXPECT_FALSE(p.has_loss());
  EXPECT_EQ(p.bytes_pushed(), 0u);
}

// Round 100 at t0, round 300 at t0 + 10 s: 20 rounds/s; 700 rounds left of 1000: 35 s.
TEST(NodeReportsProgressTest, RateAndEtaFromTwoPoints) {
  NodeReports reports;
  const std::vector<NodeReports::WorkerRow> rows = {{10, 0, true, false}};
  ASSERT_TRUE(reports.Accept(10, pb::ROLE_WORKER, 1, WorkerHb(Trained(100, 1.0f)), kT0).ok());
  pb::JobProgress p = reports.Progress(rows, kT0);
  EXPECT_EQ(p.rounds_per_second(), 0.0);
  EXPECT_FALSE(p.has_eta_seconds());
  ASSERT_TRUE(reports.Accept(10, pb::ROLE_WORKER, 1, WorkerHb(Trained(300, 1.0f)), kT0).ok());
  p = reports.Progress(rows, kT0 + seconds(10));
  EXPECT_EQ(p.round(), 300u);
  EXPECT_NEAR(p.rounds_per_second(), 20.0, 1e-9);
  ASSERT_TRUE(p.has_eta_seconds());
  EXPECT_NEAR(p.eta_seconds(), 35.0, 1e-9);
}

TEST(NodeReportsProgressTest, NoRateBeforeOneSecondOfSpan) {
  NodeReports reports;
  const std::vector<NodeReports::WorkerRow> rows = {{10, 0, true, false}};
  ASSERT_TRUE(reports.Accept(10, pb::ROLE_WORKER, 1, WorkerHb(Trained(100, 1.0f)), kT0).ok());
  (void)reports.Progress(rows, kT0);
  ASSERT_TRUE(reports.Accept(10, pb::ROLE_WORKER, 1, WorkerHb(Trained(150, 1.0f)), kT0).ok());
  pb::JobProgress p = reports.Progress(rows, kT0 + milliseconds(900));
  EXPECT_EQ(p.round(), 150u);
  EXPECT_EQ(p.rounds_per_second(), 0.0);
  EXPECT_FALSE(p.has_eta_seconds());
  // From 1 s on: 100 rounds in 2 s.
  ASSERT_TRUE(reports.Accept(10, pb::ROLE_WORKER, 1, WorkerHb(Trained(200, 1.0f)), kT0).ok());
  p = reports.Progress(rows, kT0 + seconds(2));
  EXPECT_NEAR(p.rounds_per_second(), 50.0, 1e-9);
  ASSERT_TRUE(p.has_eta_seconds());
  EXPECT_NEAR(p.eta_seconds(), 800.0 / 50.0, 1e-9);
}

// The rate is measured over the points of the last 30 s: at t0 + 50 s only the points of t0 + 40 s
// and t0 + 50 s are that recent, 300 rounds in 10 s.
TEST(NodeReportsProgressTest, RateIsOverTheLast30Seconds) {
  NodeReports reports;
  const std::vector<NodeReports::WorkerRow> rows = {{10, 0, true, false}};
  auto at = [&](uint64_t round, Clock::time_point t) {
    pb::WorkerReport r = Trained(round, 1.0f);
    r.set_total_rounds(10000);
    EXPECT_TRUE(reports.Accept(10, pb::ROLE_WORKER, 1, WorkerHb(r), t).ok());
    return reports.Progress(rows, t);
  };
  (void)at(0, kT0);
  pb::JobProgress p = at(100, kT0 + seconds(10));
  EXPECT_NEAR(p.rounds_per_second(), 10.0, 1e-9);
  (void)at(400, kT0 + seconds(40));
  p = at(700, kT0 + seconds(50));
  EXPECT_NEAR(p.rounds_per_second(), 30.0, 1e-9);
  ASSERT_TRUE(p.has_eta_seconds());
  EXPECT_NEAR(p.eta_seconds(), (10000.0 - 700.0) / 30.0, 1e-9);
}

// sieve.proto: JobProgress.round is "the slowest live worker's rounds done" and loss "the mean of
// the live workers' last losses". Once every live worker finished, a worker lost earlier (at a
// lower round) is not live and must not hold the job's round back.
// DISABLED: fails against node_reports.cc (Progress counts every row, the lost ones too, once no
// worker is training: round 40, loss 0.5). Enable once Progress follows sieve.proto.
TEST(NodeReportsProgressTest, LostWorkerIsNotCountedOnceTheLiveOnesFinished) {
  NodeReports reports;
  ASSERT_TRUE(reports.Accept(10, pb::ROLE_WORKER, 1, WorkerHb(Trained(1000, 0.25f)), kT0).ok());
  ASSERT_TRUE(reports.Accept(11, pb::ROLE_WORKER, 1, WorkerHb(Trained(40, 0.75f)), kT0).ok());
  const pb::JobProgress p = reports.Progress({{10, 0, true, true}, {11, 1, false, false}}, kT0);
  EXPECT_EQ(p.round(), 1000u);
  ASSERT_TRUE(p.has_loss());
  EXPECT_NEAR(p.loss(), 0.25, 1e-6);
}

}  // namespace
}  // namespace sieve
