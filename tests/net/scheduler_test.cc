// In-process tests of the scheduler's and the node runtime's error paths.
#include "scheduler/scheduler.h"

#include <gtest/gtest.h>

#include <thread>

#include "net/node.h"

namespace sieve {
namespace {

TransportOptions Loopback() {
  TransportOptions t;
  t.bind_host = "127.0.0.1";
  return t;
}

class RunningScheduler {
 public:
  RunningScheduler(uint32_t servers, uint32_t workers, uint64_t d) {
    SchedulerOptions o;
    o.num_servers = servers;
    o.num_workers = workers;
    o.num_params = d;
    o.transport = Loopback();
    o.heartbeat_timeout_ms = 0;
    auto s = Scheduler::Create(o);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    s_ = std::move(s).value();
    thread_ = std::thread([this] { result_ = s_->Run(); });
  }
  ~RunningScheduler() {
    s_->Stop("test over");
    thread_.join();
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(s_->port()); }

 private:
  std::unique_ptr<Scheduler> s_;
  std::thread thread_;
  Status result_;
};

NodeOptions NodeFor(const std::string& address, pb::Role role) {
  NodeOptions o;
  o.role = role;
  o.scheduler = address;
  o.transport = Loopback();
  o.heartbeat_interval_ms = 0;
  o.register_retry_ms = 200;
  o.startup_timeout_ms = 10000;
  return o;
}

TEST(NetSchedulerTest, VersionMismatchGetsErrorAndSchedulerKeepsServing) {
  RunningScheduler sched(1, 1, 10);
  // A raw peer that speaks protocol version 99.
  auto peer = CreateZmqTransport(Loopback());
  ASSERT_TRUE(peer.ok());
  std::string host;
  uint16_t port;
  ASSERT_TRUE(ParseHostPort(sched.address(), &host, &port).ok());
  ASSERT_TRUE((*peer)->Connect(0, host, port).ok());
  pb::Header h;
  h.set_type(pb::MSG_REGISTER);
  h.set_sender(-1);
  auto* r = h.mutable_register_();
  r->set_role(pb::ROLE_WORKER);
  r->set_host((*peer)->host());
  r->set_port((*peer)->port());
  r->set_protocol_version(99);
  r->set_rank(-1);
  r->set_instance(42);
  h.set_version(99);  // the header itself also carries the foreign version
  const std::string bytes = h.SerializeAsString();
  Frames frames;
  frames.emplace_back(bytes.data(), bytes.size());
  ASSERT_TRUE((*peer)->Send(0, std::move(frames)).ok());
  Frames reply;
  auto got = (*peer)->Recv(&reply, 10000);
  ASSERT_TRUE(got.ok() && *got) << "no ERROR reply";
  Message m;
  pb::ErrorCode code;
  ASSERT_TRUE(Decode(std::move(reply), {}, &m, &code).ok());
  ASSERT_EQ(m.type(), pb::MSG_ERROR);
  EXPECT_EQ(m.header.error().code(), pb::ERROR_VERSION_MISMATCH);

  // The scheduler is still up: a real server and worker complete registration.
  std::thread server([&] {
    auto n = Node::Start(NodeFor(sched.address(), pb::ROLE_SERVER));
    EXPECT_TRUE(n.ok()) << n.status().ToString();
  });
  auto w = Node::Start(NodeFor(sched.address(), pb::ROLE_WORKER));
  server.join();
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_EQ((*w)->num_params(), 10u);
}

TEST(NetSchedulerTest, RegistrationBeyondExpectedCountIsRefused) {
  RunningScheduler sched(1, 1, 10);
  std::thread server([&] {
    auto n = Node::Start(NodeFor(sched.address(), pb::ROLE_SERVER));
    EXPECT_TRUE(n.ok());
  });
  auto w = Node::Start(NodeFor(sched.address(), pb::ROLE_WORKER));
  server.join();
  ASSERT_TRUE(w.ok());
  auto extra = Node::Start(NodeFor(sched.address(), pb::ROLE_WORKER));
  ASSERT_FALSE(extra.ok());
  EXPECT_EQ(extra.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(extra.status().message().find("REGISTRATION_FULL"), std::string::npos)
      << extra.status().ToString();
}

TEST(NetSchedulerTest, DuplicateRankIsRefused) {
  RunningScheduler sched(1, 2, 10);
  NodeOptions a = NodeFor(sched.address(), pb::ROLE_WORKER);
  a.rank = 1;
  a.startup_timeout_ms = 3000;
  std::thread first([&] { (void)Node::Start(a); });  // waits for the table, then times out
  std::this_thread::sleep_for(
      std::chrono::milliseconds(300));  // let it register first (ordering only)
  auto dup = Node::Start(a);
  first.join();
  ASSERT_FALSE(dup.ok());
  EXPECT_NE(dup.status().message().find("DUPLICATE_RANK"), std::string::npos)
      << dup.status().ToString();
}

TEST(NetSchedulerTest, DTooSmallForServersIsRejected) {
  SchedulerOptions o;
  o.num_servers = 4;
  o.num_params = 3;
  o.transport = Loopback();
  auto s = Scheduler::Create(o);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
}

TEST(NetNodeTest, NoSchedulerGivesBoundedClearError) {
  NodeOptions o = NodeFor("127.0.0.1:1", pb::ROLE_WORKER);  // nothing listens on port 1
  o.register_attempts = 3;
  o.register_retry_ms = 100;
  const auto start = std::chrono::steady_clock::now();
  auto n = Node::Start(o);
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(n.status().message().find("did not answer"), std::string::npos);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST(NetTransportTest, PortZeroPicksAFreePortAndBadHostPortIsRejected) {
  auto t = CreateZmqTransport(Loopback());
  ASSERT_TRUE(t.ok());
  EXPECT_GT((*t)->port(), 0);
  std::string host;
  uint16_t port;
  EXPECT_FALSE(ParseHostPort("nohost", &host, &port).ok());
  EXPECT_FALSE(ParseHostPort("h:0", &host, &port).ok());
  EXPECT_FALSE(ParseHostPort("h:70000", &host, &port).ok());
  EXPECT_FALSE(ParseHostPort("h:12a", &host, &port).ok());
  ASSERT_TRUE(ParseHostPort("10.1.2.3:9310", &host, &port).ok());
  EXPECT_EQ(host, "10.1.2.3");
  EXPECT_EQ(port, 9310);
}

}  // namespace
}  // namespace sieve
