// The Scheduler's job status (Scheduler::status(), SchedulerOptions::on_status) through a job's
// life, with real Nodes (net/node.h) on loopback whose heartbeats carry their reports.
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "net/node.h"
#include "proto/job_identity.h"
#include "scheduler/scheduler.h"

namespace sieve {
namespace {

using google::protobuf::util::MessageDifferencer;
using std::chrono::milliseconds;

// Bounds that only stop a hang: a loaded machine must not fail these tests.
constexpr milliseconds kHang{60000};

constexpr uint64_t kParams = 100;
// Node ids (proto/node_ids.h): server rank 0 -> 1; worker rank r -> 1 + S + r.
constexpr int kServer = 1;
constexpr int kWorker0 = 2;
constexpr int kWorker1 = 3;

TransportOptions Loopback() {
  TransportOptions t;
  t.bind_host = "127.0.0.1";
  t.job = JobDigest("");
  return t;
}

// A scheduler of 1 server and 2 workers running on its own thread; every status it hands to
// on_status is kept.
class JobUnderTest {
 public:
  explicit JobUnderTest(milliseconds heartbeat_timeout, uint32_t min_workers = 0) {
    SchedulerOptions o;
    o.num_servers = 1;
    o.num_workers = 2;
    o.num_params = kParams;
    o.transport = Loopback();
    o.heartbeat_timeout = heartbeat_timeout;
    o.min_workers = min_workers;
    o.job_name = "status-test";
    o.on_status = [this](const pb::JobStatus& st) {
      std::lock_guard<std::mutex> lock(mu_);
      published_.push_back(st);
    };
    auto s = Scheduler::Create(o);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    if (!s.ok()) return;
    sched_ = std::move(s).value();
  }
  ~JobUnderTest() {
    if (sched_ == nullptr) return;
    if (thread_.joinable()) {
      sched_->Stop("test over");
      thread_.join();
    }
  }

  bool ok() const { return sched_ != nullptr; }
  Scheduler& scheduler() { return *sched_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(sched_->port()); }
  void Run() {
    thread_ = std::thread([this] {
      Status result = sched_->Run();
      std::lock_guard<std::mutex> lock(mu_);
      result_ = std::move(result);
      ended_ = true;
      ended_cv_.notify_all();
    });
  }
  // Waits for Run() to return (the job ended) and gives its result; after kHang (a hang) the job
  // is stopped and the test fails.
  Status Join() {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (!ended_cv_.wait_for(lock, kHang, [this] { return ended_; })) {
        ADD_FAILURE() << "the job did not end";
        sched_->Stop("the job did not end");
      }
    }
    thread_.join();
    std::lock_guard<std::mutex> lock(mu_);
    return result_;
  }
  std::vector<pb::JobStatus> published() {
    std::lock_guard<std::mutex> lock(mu_);
    return published_;
  }

  // Polls status() until `pred` holds (kHang only bounds a hang); the status that satisfied it,
  // or the last one seen with a test failure.
  pb::JobStatus WaitFor(const std::string& what,
                        const std::function<bool(const pb::JobStatus&)>& pred) {
    const auto deadline = std::chrono::steady_clock::now() + kHang;
    pb::JobStatus st = sched_->status();
    while (!pred(st)) {
      if (std::chrono::steady_clock::now() > deadline) {
        ADD_FAILURE() << "status never showed " << what << "; last:\n" << st.DebugString();
        return st;
      }
      std::this_thread::sleep_for(milliseconds(20));
      st = sched_->status();
    }
    return st;
  }

 private:
  std::unique_ptr<Scheduler> sched_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable ended_cv_;
  bool ended_ = false;                    // guarded by mu_
  Status result_;                         // guarded by mu_
  std::vector<pb::JobStatus> published_;  // guarded by mu_
};

NodeOptions NodeFor(const std::string& address, pb::Role role, int rank) {
  NodeOptions o;
  o.role = role;
  o.rank = rank;
  o.scheduler = address;
  o.transport = Loopback();
  o.heartbeat_interval = milliseconds(50);
  o.heartbeat_timeout = kHang;
  o.register_retry = milliseconds(200);
  o.register_attempts = 300;
  o.startup_timeout = kHang;
  return o;
}

// Node::Start blocks until the node table: each node starts on a thread of its own.
class StartingNode {
 public:
  StartingNode(const std::string& address, pb::Role role, int rank)
      : thread_([this, o = NodeFor(address, role, rank)] { started_ = Node::Start(o); }) {}
  ~StartingNode() {
    if (thread_.joinable()) thread_.join();
  }
  std::unique_ptr<Node> Get() {
    thread_.join();
    EXPECT_TRUE(started_.ok()) << started_.status().ToString();
    return started_.ok() ? std::move(started_).value() : nullptr;
  }

 private:
  StatusOr<std::unique_ptr<Node>> started_ = UnavailableError("not started");
  std::thread thread_;
};

pb::Heartbeat Report(uint64_t round, uint64_t total, float loss) {
  pb::Heartbeat hb;
  hb.mutable_worker()->set_round(round);
  hb.mutable_worker()->set_total_rounds(total);
  hb.mutable_worker()->set_loss(loss);
  return hb;
}

bool Near(double a, double b) { return std::fabs(a - b) < 1e-6; }

const pb::JobNode* NodeOf(const pb::JobStatus& st, int id) {
  for (const pb::JobNode& n : st.nodes()) {
    if (n.id() == id) return &n;
  }
  return nullptr;
}

pb::NodeState StateOf(const pb::JobStatus& st, int id) {
  const pb::JobNode* n = NodeOf(st, id);
  return n == nullptr ? pb::NODE_STATE_UNSPECIFIED : n->state();
}

// Starts the server and both workers at once and waits for the running job.
struct Cluster {
  std::unique_ptr<Node> server;
  std::unique_ptr<Node> w[2];
};
Cluster StartAll(JobUnderTest& job) {
  Cluster c;
  StartingNode server(job.address(), pb::ROLE_SERVER, 0);
  StartingNode w0(job.address(), pb::ROLE_WORKER, 0);
  StartingNode w1(job.address(), pb::ROLE_WORKER, 1);
  c.server = server.Get();
  c.w[0] = w0.Get();
  c.w[1] = w1.Get();
  return c;
}

// Forming (registrations counted one by one), running with every node alive, the workers'
// reports summed up, a NaN loss refused, both workers finishing: the job's end in the last
// status handed to on_status and in status().
TEST(JobStatusTest, StatusThroughAFinishedJob) {
  JobUnderTest job(milliseconds(10000));
  ASSERT_TRUE(job.ok());
  pb::JobStatus st = job.scheduler().status();  // before Run(): forming, nobody registered
  EXPECT_EQ(st.phase(), pb::JOB_FORMING);
  EXPECT_EQ(st.job(), "status-test");
  EXPECT_EQ(st.instance(), 0u);
  EXPECT_EQ(st.num_servers(), 1u);
  EXPECT_EQ(st.num_workers(), 2u);
  EXPECT_EQ(st.servers_registered(), 0u);
  EXPECT_EQ(st.workers_registered(), 0u);
  EXPECT_EQ(st.nodes_size(), 0);
  job.Run();

  // The server first, without a requested rank.
  StartingNode server_start(job.address(), pb::ROLE_SERVER, -1);
  st = job.WaitFor("the server registered",
                   [](const pb::JobStatus& s) { return s.servers_registered() == 1; });
  EXPECT_EQ(st.phase(), pb::JOB_FORMING);
  EXPECT_EQ(st.workers_registered(), 0u);
  ASSERT_EQ(st.nodes_size(), 1);
  EXPECT_EQ(st.nodes(0).role(), pb::ROLE_SERVER);
  EXPECT_EQ(st.nodes(0).state(), pb::NODE_REGISTERED);
  EXPECT_EQ(st.nodes(0).rank(), -1);  // forming without a requested rank
  EXPECT_EQ(st.nodes(0).address().rfind("127.0.0.1:", 0), 0u) << st.nodes(0).address();

  StartingNode w0_start(job.address(), pb::ROLE_WORKER, 0);
  st = job.WaitFor("worker 0 registered",
                   [](const pb::JobStatus& s) { return s.workers_registered() == 1; });
  EXPECT_EQ(st.phase(), pb::JOB_FORMING);
  EXPECT_EQ(st.servers_registered(), 1u);
  ASSERT_EQ(st.nodes_size(), 2);
  EXPECT_EQ(st.nodes(0).role(), pb::ROLE_SERVER);  // servers, then workers
  EXPECT_EQ(st.nodes(1).role(), pb::ROLE_WORKER);
  EXPECT_EQ(st.nodes(1).rank(), 0);
  EXPECT_EQ(st.nodes(1).state(), pb::NODE_REGISTERED);

  StartingNode w1_start(job.address(), pb::ROLE_WORKER, 1);
  std::unique_ptr<Node> server = server_start.Get();
  std::unique_ptr<Node> w[2] = {w0_start.Get(), w1_start.Get()};
  ASSERT_TRUE(server != nullptr && w[0] != nullptr && w[1] != nullptr);
  EXPECT_EQ(w[0]->id(), kWorker0);
  EXPECT_EQ(w[1]->id(), kWorker1);

  st = job.WaitFor("the job running", [](const pb::JobStatus& s) {
    return s.phase() == pb::JOB_RUNNING && s.nodes_size() == 3;
  });
  EXPECT_EQ(st.servers_registered(), 1u);
  EXPECT_EQ(st.workers_registered(), 2u);
  EXPECT_EQ(st.num_params(), kParams);
  EXPECT_NE(st.instance(), 0u);
  EXPECT_EQ(st.instance(), w[0]->table().job_instance());
  EXPECT_EQ(st.scheduler(), job.address());
  ASSERT_EQ(st.nodes_size(), 3);
  EXPECT_EQ(st.nodes(0).id(), kServer);
  EXPECT_EQ(st.nodes(0).role(), pb::ROLE_SERVER);
  EXPECT_EQ(st.nodes(0).rank(), 0);
  EXPECT_EQ(st.nodes(0).state(), pb::NODE_ALIVE);
  ASSERT_EQ(st.nodes(0).primary_shards_size(), 1);
  EXPECT_EQ(st.nodes(0).primary_shards(0), 0);
  EXPECT_EQ(st.nodes(1).id(), kWorker0);
  EXPECT_EQ(st.nodes(1).state(), pb::NODE_ALIVE);
  EXPECT_EQ(st.nodes(2).id(), kWorker1);
  EXPECT_EQ(st.nodes(2).rank(), 1);
  EXPECT_EQ(st.nodes(2).state(), pb::NODE_ALIVE);
  EXPECT_EQ(st.workers_finished(), 0u);

  // Worker 0 at round 5 with loss 0.5, worker 1 at round 7 with loss 0.7: the job is at the
  // slowest one's round 5, loss (0.5 + 0.7) / 2.
  w[0]->SetReport(Report(5, 10, 0.5f));
  w[1]->SetReport(Report(7, 10, 0.7f));
  st = job.WaitFor("round 5, loss 0.6", [](const pb::JobStatus& s) {
    return s.progress().round() == 5 && s.progress().has_loss() &&
           Near(s.progress().loss(), (0.5 + static_cast<double>(0.7f)) / 2) &&
           NodeOf(s, kWorker1) != nullptr && NodeOf(s, kWorker1)->worker().round() == 7;
  });
  EXPECT_EQ(st.progress().total_rounds(), 10u);
  EXPECT_EQ(NodeOf(st, kWorker0)->worker().round(), 5u);
  EXPECT_EQ(st.reports_refused(), 0u);
  EXPECT_GT(st.heartbeats(), 0u);

  // A NaN loss from worker 1 is refused (on every heartbeat that carries it) and shown nowhere.
  w[1]->SetReport(Report(8, 10, std::numeric_limits<float>::quiet_NaN()));
  st = job.WaitFor("a refused report",
                   [](const pb::JobStatus& s) { return s.reports_refused() >= 1; });
  EXPECT_EQ(st.progress().round(), 5u);
  ASSERT_TRUE(st.progress().has_loss());
  EXPECT_NEAR(st.progress().loss(), (0.5 + static_cast<double>(0.7f)) / 2, 1e-6);
  EXPECT_EQ(NodeOf(st, kWorker1)->worker().round(), 7u);
  EXPECT_NEAR(NodeOf(st, kWorker1)->worker().loss(), 0.7f, 1e-7);

  // Both finish; their FINISHEDs carry the final reports.
  w[0]->SetReport(Report(10, 10, 0.25f));
  w[1]->SetReport(Report(10, 10, 0.75f));
  ASSERT_TRUE(w[0]->Finish().ok());
  ASSERT_TRUE(w[1]->Finish().ok());
  const Status result = job.Join();
  EXPECT_TRUE(result.ok()) << result.ToString();
  EXPECT_TRUE(w[0]->WaitShutdown(kHang).ok());

  const std::vector<pb::JobStatus> published = job.published();
  ASSERT_FALSE(published.empty());
  const pb::JobStatus& last = published.back();
  EXPECT_EQ(last.phase(), pb::JOB_FINISHED);
  EXPECT_TRUE(MessageDifferencer::Equals(last, job.scheduler().status()));
  EXPECT_EQ(last.workers_finished(), 2u);
  EXPECT_EQ(StateOf(last, kServer), pb::NODE_ALIVE);
  EXPECT_EQ(StateOf(last, kWorker0), pb::NODE_FINISHED);
  EXPECT_EQ(StateOf(last, kWorker1), pb::NODE_FINISHED);
  EXPECT_EQ(last.progress().round(), 10u);  // every worker finished: theirs count
  ASSERT_TRUE(last.progress().has_loss());
  EXPECT_NEAR(last.progress().loss(), (0.25 + 0.75) / 2, 1e-6);
  EXPECT_EQ(NodeOf(last, kWorker1)->worker().round(), 10u);
  // on_status saw the phases in order: forming, running, finished.
  EXPECT_EQ(published.front().phase(), pb::JOB_FORMING);
  int changes = 0;
  for (size_t i = 1; i < published.size(); ++i) {
    EXPECT_GE(published[i].phase(), published[i - 1].phase()) << i;
    changes += published[i].phase() != published[i - 1].phase();
  }
  EXPECT_EQ(changes, 2);
  // Only the last status is final.
  for (size_t i = 0; i + 1 < published.size(); ++i) {
    EXPECT_NE(published[i].phase(), pb::JOB_FINISHED) << i;
  }
}

// Worker 1's process goes away without finishing: after the heartbeat timeout its row is
// NODE_LOST with the reason; worker 0 goes on, alive.
void LoseWorker1(JobUnderTest& job, Cluster& c) {
  pb::JobStatus st = job.WaitFor("the job running", [](const pb::JobStatus& s) {
    return s.phase() == pb::JOB_RUNNING && s.nodes_size() == 3;
  });
  c.w[1]->SetReport(Report(3, 10, 0.5f));
  job.WaitFor("worker 1's report", [](const pb::JobStatus& s) {
    return NodeOf(s, kWorker1) != nullptr && NodeOf(s, kWorker1)->worker().round() == 3;
  });
  c.w[1].reset();  // closed without FINISHED: silent from now on
  st = job.WaitFor("worker 1 lost",
                   [](const pb::JobStatus& s) { return StateOf(s, kWorker1) == pb::NODE_LOST; });
  EXPECT_FALSE(NodeOf(st, kWorker1)->lost_reason().empty());
  EXPECT_EQ(st.phase(), pb::JOB_RUNNING);
  EXPECT_EQ(StateOf(st, kWorker0), pb::NODE_ALIVE);
  EXPECT_EQ(StateOf(st, kServer), pb::NODE_ALIVE);
  EXPECT_TRUE(NodeOf(st, kWorker0)->lost_reason().empty());
  EXPECT_EQ(job.scheduler().nodes_declared_dead(), 1u);
}

// Runs `job` with all its nodes in `c`, loses worker 1 (LoseWorker1), then worker 0 finishes with
// a 10-round report; `result` gets what Join() returned.
void FinishWorker0AfterLosingWorker1(JobUnderTest& job, Cluster* c, Status* result) {
  job.Run();
  *c = StartAll(job);
  ASSERT_TRUE(c->server != nullptr && c->w[0] != nullptr && c->w[1] != nullptr);
  ASSERT_NO_FATAL_FAILURE(LoseWorker1(job, *c));
  c->w[0]->SetReport(Report(10, 10, 0.25f));
  ASSERT_TRUE(c->w[0]->Finish().ok());
  *result = job.Join();
}

// With every worker needed (min_workers 0), a lost worker fails the job once the other finished:
// FAILED_PRECONDITION, as Run() says.
TEST(JobStatusTest, LostWorkerFailsTheJobThatNeedsEveryWorker) {
  JobUnderTest job(milliseconds(2000));
  ASSERT_TRUE(job.ok());
  Cluster c;
  Status result;
  ASSERT_NO_FATAL_FAILURE(FinishWorker0AfterLosingWorker1(job, &c, &result));
  EXPECT_EQ(result.code(), StatusCode::kFailedPrecondition) << result.ToString();

  const std::vector<pb::JobStatus> published = job.published();
  ASSERT_FALSE(published.empty());
  const pb::JobStatus& last = published.back();
  EXPECT_EQ(last.phase(), pb::JOB_FAILED);
  EXPECT_EQ(last.failure().code(), "FAILED_PRECONDITION");
  EXPECT_EQ(last.failure().message(), result.message());
  EXPECT_EQ(last.workers_finished(), 1u);
  EXPECT_EQ(StateOf(last, kWorker0), pb::NODE_FINISHED);
  EXPECT_EQ(StateOf(last, kWorker1), pb::NODE_LOST);
  EXPECT_TRUE(MessageDifferencer::Equals(last, job.scheduler().status()));
  // The node is told the job failed, as the status says.
  EXPECT_EQ(c.w[0]->WaitShutdown(kHang).code(), StatusCode::kAborted);
}

// With min_workers 1 the same job succeeds: JOB_FINISHED, the lost worker's row stays lost.
TEST(JobStatusTest, LostWorkerIsAcceptedWithMinWorkersOne) {
  JobUnderTest job(milliseconds(2000), /*min_workers=*/1);
  ASSERT_TRUE(job.ok());
  Cluster c;
  Status result;
  ASSERT_NO_FATAL_FAILURE(FinishWorker0AfterLosingWorker1(job, &c, &result));
  EXPECT_TRUE(result.ok()) << result.ToString();

  const std::vector<pb::JobStatus> published = job.published();
  ASSERT_FALSE(published.empty());
  const pb::JobStatus& last = published.back();
  EXPECT_EQ(last.phase(), pb::JOB_FINISHED);
  EXPECT_EQ(last.min_workers(), 1u);
  EXPECT_EQ(last.workers_finished(), 1u);
  EXPECT_EQ(StateOf(last, kWorker0), pb::NODE_FINISHED);
  EXPECT_EQ(StateOf(last, kWorker1), pb::NODE_LOST);
  EXPECT_FALSE(NodeOf(last, kWorker1)->lost_reason().empty());
  EXPECT_EQ(NodeOf(last, kWorker0)->worker().round(), 10u);  // the FINISHED's report
  EXPECT_TRUE(c.w[0]->WaitShutdown(kHang).ok());
}

}  // namespace
}  // namespace sieve
