// In-process tests of the scheduler's and the node runtime's error paths.
#include "scheduler/scheduler.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <thread>

#include "net/address.h"
#include "net/node.h"
#include "proto/error_code.h"
#include "proto/job_identity.h"
#include "proto/messages.h"
#include "proto/register_proof.h"

namespace sieve {
namespace {

// Loopback, in the job of `token` (empty: a job without a token).
TransportOptions Loopback(const std::string& token = "") {
  TransportOptions t;
  t.bind_host = "127.0.0.1";
  t.job = JobDigest(token);
  return t;
}

class RunningScheduler {
 public:
  RunningScheduler(uint32_t servers, uint32_t workers, uint64_t d, const std::string& token = "") {
    SchedulerOptions o;
    o.num_servers = servers;
    o.num_workers = workers;
    o.num_params = d;
    o.transport = Loopback(token);
    o.job_key = JobKey(token);
    o.heartbeat_timeout = std::chrono::milliseconds(0);
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

NodeOptions NodeFor(const std::string& address, pb::Role role, const std::string& token = "") {
  NodeOptions o;
  o.role = role;
  o.scheduler = address;
  o.transport = Loopback(token);
  o.job_key = JobKey(token);
  o.heartbeat_interval = std::chrono::milliseconds(0);
  // Generous bounds (60 s) that only stop a hang: a loaded machine must not fail these tests.
  o.register_retry = std::chrono::milliseconds(200);
  o.register_attempts = 300;
  o.startup_timeout = std::chrono::milliseconds(60000);
  return o;
}

// A raw peer on loopback, connected to the scheduler at `address` as node 0.
std::unique_ptr<Transport> RawPeer(const std::string& address, const std::string& token = "") {
  auto peer = CreateZmqTransport(Loopback(token));
  EXPECT_TRUE(peer.ok()) << peer.status().ToString();
  if (!peer.ok()) return nullptr;
  std::string host;
  uint16_t port;
  EXPECT_TRUE(ParseHostPort(address, &host, &port).ok());
  EXPECT_TRUE((*peer)->Connect(0, host, port).ok());
  return std::move(peer).value();
}

// Sends the scheduler a REGISTER from `peer` (instance 42) speaking protocol `version`.
void SendRegister(Transport& peer, pb::Role role, int rank, uint32_t version) {
  pb::Header h = MakeRegisterHeader(role, peer.host(), peer.port(), rank, 42, 0);
  h.mutable_register_()->set_protocol_version(version);
  h.set_version(version);  // the header itself also carries the version
  const std::string bytes = h.SerializeAsString();
  Frames frames;
  frames.emplace_back(bytes.data(), bytes.size());
  ASSERT_TRUE(peer.Send(0, std::move(frames)).ok());
}

// The scheduler's next message to `peer`, decoded (60 s only bound a hang).
Message Reply(Transport& peer, const std::string& token = "") {
  Frames reply;
  auto got = peer.Recv(&reply, std::chrono::milliseconds(60000));
  EXPECT_TRUE(got.ok() && *got) << "no reply from the scheduler";
  Message m;
  if (got.ok() && *got) {
    DecodeLimits limits;
    limits.job = limits.token_job = JobDigest(token);
    EXPECT_TRUE(Decode(std::move(reply), limits, &m).ok());
  }
  return m;
}

TEST(NetSchedulerTest, VersionMismatchGetsErrorAndSchedulerKeepsServing) {
  RunningScheduler sched(1, 1, 10);
  // A raw peer that speaks protocol version 99.
  std::unique_ptr<Transport> peer = RawPeer(sched.address());
  ASSERT_NE(peer, nullptr);
  ASSERT_NO_FATAL_FAILURE(SendRegister(*peer, pb::ROLE_WORKER, -1, 99));
  const Message m = Reply(*peer);
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

// A STATUS_QUERY from `peer` naming `host`:`port` for the answer, with `nonce`.
void SendStatusQuery(Transport& peer, const std::string& host, uint32_t port, uint64_t nonce) {
  pb::Header h = MakeHeader(pb::MSG_STATUS_QUERY, -1, kSchedulerId);
  h.mutable_status_query()->set_host(host);
  h.mutable_status_query()->set_port(port);
  h.mutable_status_query()->set_nonce(nonce);
  auto frames = EncodeControl(std::move(h));
  ASSERT_TRUE(frames.ok());
  ASSERT_TRUE(peer.Send(0, std::move(frames).value()).ok());
}

// Whether `peer` receives anything within `wait`.
bool AnythingWithin(Transport& peer, std::chrono::milliseconds wait) {
  Frames frames;
  auto got = peer.Recv(&frames, wait);
  return got.ok() && *got;
}

TEST(NetSchedulerTest, StatusQueriesAreAnsweredAtTheirAddressWhenWellFormedAndWithinTheRate) {
  const std::string token = "status-query-token";
  RunningScheduler sched(1, 2, 10, token);
  std::unique_ptr<Transport> peer = RawPeer(sched.address(), token);
  ASSERT_NE(peer, nullptr);
  // Malformed addresses are never answered (nor with an ERROR: the peer has no node id).
  ASSERT_NO_FATAL_FAILURE(SendStatusQuery(*peer, peer->host(), 0, 1));
  ASSERT_NO_FATAL_FAILURE(SendStatusQuery(*peer, peer->host(), 70000, 2));
  ASSERT_NO_FATAL_FAILURE(SendStatusQuery(*peer, "", peer->port(), 3));
  ASSERT_NO_FATAL_FAILURE(SendStatusQuery(*peer, std::string(300, 'h'), peer->port(), 4));
  // A query without its body does not decode: dropped.
  auto bare = EncodeControl(MakeHeader(pb::MSG_STATUS_QUERY, -1, kSchedulerId));
  ASSERT_TRUE(bare.ok());
  ASSERT_TRUE(peer->Send(0, std::move(bare).value()).ok());
  // A well-formed one is answered with the status and its nonce, stamped with the token's digest.
  ASSERT_NO_FATAL_FAILURE(SendStatusQuery(*peer, peer->host(), peer->port(), 5));
  const Message m = Reply(*peer, token);
  ASSERT_EQ(m.type(), pb::MSG_STATUS);
  EXPECT_EQ(m.header.round(), 5u);
  EXPECT_EQ(m.header.job_status().num_servers(), 1u);
  EXPECT_EQ(m.header.job_status().num_workers(), 2u);
  EXPECT_EQ(m.header.job_status().phase(), pb::JOB_FORMING);
  EXPECT_FALSE(AnythingWithin(*peer, std::chrono::milliseconds(300)))
      << "a malformed query was answered";
  // At most 50 answers per 10 s: a flood of 60 more gets at most the 49 left.
  for (uint64_t n = 100; n < 160; ++n)
    ASSERT_NO_FATAL_FAILURE(SendStatusQuery(*peer, peer->host(), peer->port(), n));
  int answered = 0;
  while (AnythingWithin(*peer, std::chrono::milliseconds(1000))) ++answered;
  EXPECT_GE(answered, 1);
  EXPECT_LE(answered, 49);
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
  EXPECT_EQ(WireCodeOf(extra.status()), pb::ERROR_REGISTRATION_FULL) << extra.status().ToString();
  EXPECT_EQ(extra.status().code(), StatusCode::kAlreadyExists);
  EXPECT_NE(extra.status().message().find("REGISTRATION_FULL"), std::string::npos)
      << extra.status().ToString();
}

TEST(NetSchedulerTest, DuplicateRankIsRefused) {
  RunningScheduler sched(1, 2, 10);
  // Worker rank 1 registers first, and the scheduler acknowledges it...
  std::unique_ptr<Transport> first = RawPeer(sched.address());
  ASSERT_NE(first, nullptr);
  ASSERT_NO_FATAL_FAILURE(SendRegister(*first, pb::ROLE_WORKER, 1, kProtocolVersion));
  ASSERT_EQ(Reply(*first).type(), pb::MSG_REGISTER_ACK);
  // ...so another process asking for the same rank before the job starts is refused.
  NodeOptions a = NodeFor(sched.address(), pb::ROLE_WORKER);
  a.rank = 1;
  auto dup = Node::Start(a);
  ASSERT_FALSE(dup.ok());
  EXPECT_NE(dup.status().message().find("DUPLICATE_RANK"), std::string::npos)
      << dup.status().ToString();
}

// A registered node that sends BARRIERs of ever new sequence numbers (a peer that never waits for
// a release) gets at most 4 pending entries; the others are refused with ERROR_BAD_BARRIER, and
// the barrier the job really waits in still completes.
TEST(NetSchedulerTest, PendingBarriersPerNodeAreBounded) {
  RunningScheduler sched(1, 2, 10);
  std::thread server(
      [&] { EXPECT_TRUE(Node::Start(NodeFor(sched.address(), pb::ROLE_SERVER)).ok()); });
  StatusOr<std::unique_ptr<Node>> w0 = UnavailableError("not started");
  std::thread worker([&] {
    NodeOptions o = NodeFor(sched.address(), pb::ROLE_WORKER);
    o.rank = 0;
    w0 = Node::Start(o);
  });
  std::unique_ptr<Transport> flood = RawPeer(sched.address());
  ASSERT_NE(flood, nullptr);
  ASSERT_NO_FATAL_FAILURE(SendRegister(*flood, pb::ROLE_WORKER, 1, kProtocolVersion));
  server.join();
  worker.join();
  ASSERT_TRUE(w0.ok()) << w0.status().ToString();
  const int id = (*w0)->WorkerId(1);  // the flooding worker's node id
  for (uint64_t seq = 1; seq <= 10; ++seq) {
    pb::Header h = MakeHeader(pb::MSG_BARRIER, id);
    h.mutable_barrier()->set_group(kGroupWorkers);
    h.mutable_barrier()->set_seq(seq);
    ASSERT_TRUE(flood->Send(0, std::move(EncodeControl(h)).value()).ok());
  }
  int refused = 0;
  for (int replies = 0; replies < 20 && refused < 6;) {
    const Message m = Reply(*flood);  // ACK, NODE_TABLE, then the refusals
    ++replies;
    if (m.type() == pb::MSG_ERROR) {
      EXPECT_EQ(m.header.error().code(), pb::ERROR_BAD_BARRIER);
      EXPECT_NE(m.header.error().message().find("already waits in 4 barriers"), std::string::npos)
          << m.header.error().message();
      ++refused;
    }
  }
  EXPECT_EQ(refused, 6);
  EXPECT_TRUE((*w0)->Barrier(kGroupWorkers, std::chrono::milliseconds(60000)).ok())
      << "seq 1 completes with the flooder's";
}

// Starts a server and workers 0 and 1 (ranks requested) at `sched`: the job forms.
void StartServerAndTwoWorkers(const RunningScheduler& sched, std::unique_ptr<Node> (&w)[2]) {
  std::thread server(
      [&] { EXPECT_TRUE(Node::Start(NodeFor(sched.address(), pb::ROLE_SERVER)).ok()); });
  StatusOr<std::unique_ptr<Node>> started[2] = {UnavailableError("not started"),
                                                UnavailableError("not started")};
  std::vector<std::thread> workers;
  for (int rank = 0; rank < 2; ++rank) {
    workers.emplace_back([&, rank] {
      NodeOptions o = NodeFor(sched.address(), pb::ROLE_WORKER);
      o.rank = rank;
      started[rank] = Node::Start(o);
    });
  }
  server.join();
  for (std::thread& t : workers) t.join();
  for (int rank = 0; rank < 2; ++rank) {
    ASSERT_TRUE(started[rank].ok()) << started[rank].status().ToString();
    w[rank] = std::move(started[rank]).value();
  }
}

// BARRIERs forged for worker 0 (a plaintext insider can claim any sender) fill its 4 pending slots
// before its real start barrier comes: the real one (the one after the group's last release)
// takes the slot of the furthest forgery and the barrier completes; before, it was refused with
// ERROR_BAD_BARRIER and worker 0 waited until its timeout. The forger's REGISTER, answered on
// the same connection after the forgeries, shows they were all handled before the real barrier.
TEST(NetSchedulerTest, ForgedBarriersDoNotKeepTheRealOneOut) {
  RunningScheduler sched(1, 2, 10);
  std::unique_ptr<Node> w[2];
  ASSERT_NO_FATAL_FAILURE(StartServerAndTwoWorkers(sched, w));
  std::unique_ptr<Transport> forger = RawPeer(sched.address());
  ASSERT_NE(forger, nullptr);
  for (uint64_t seq = 100; seq < 104; ++seq) {
    pb::Header h = MakeHeader(pb::MSG_BARRIER, w[0]->WorkerId(0));
    h.mutable_barrier()->set_group(kGroupWorkers);
    h.mutable_barrier()->set_seq(seq);
    ASSERT_TRUE(forger->Send(0, std::move(EncodeControl(h)).value()).ok());
  }
  ASSERT_NO_FATAL_FAILURE(SendRegister(*forger, pb::ROLE_WORKER, -1, kProtocolVersion));
  const Message full = Reply(*forger);
  ASSERT_EQ(full.type(), pb::MSG_ERROR);
  EXPECT_EQ(full.header.error().code(), pb::ERROR_REGISTRATION_FULL);
  Status barrier[2];
  std::vector<std::thread> entering;
  for (int rank = 0; rank < 2; ++rank) {
    entering.emplace_back([&, rank] {
      barrier[rank] = w[rank]->Barrier(kGroupWorkers, std::chrono::milliseconds(10000));
    });
  }
  for (std::thread& t : entering) t.join();
  EXPECT_TRUE(barrier[0].ok()) << barrier[0].ToString();
  EXPECT_TRUE(barrier[1].ok()) << barrier[1].ToString();
}

// Collectives through the scheduler (Node::Collective) against their closed forms: the sum of
// every worker's values (computed here in fp64 from the same inputs), rank 0's values for a
// broadcast, a refusal to every worker whose part disagrees with another's, and the local checks
// (size limit, non-finite values) before anything is sent; a restarted worker joins the
// collective the others are in.
TEST(NetSchedulerTest, CollectivesSumAndBroadcastAndRefuseDisagreement) {
  RunningScheduler sched(1, 2, 10);
  std::unique_ptr<Node> w[2];
  ASSERT_NO_FATAL_FAILURE(StartServerAndTwoWorkers(sched, w));
  const std::vector<float> mine[2] = {{1.0f, 1e8f, -2.5f}, {0.1f, 1.0f, 4.0f}};
  // Runs one collective on both workers at once; each worker's answer.
  auto both = [&](pb::CollectiveOp op, int root, const std::vector<float>(&in)[2]) {
    std::vector<StatusOr<Node::CollectiveResult>> out(2, InternalError("not run"));
    std::vector<std::thread> t;
    for (int rank = 0; rank < 2; ++rank) {
      t.emplace_back([&, rank] {
        out[rank] = w[rank]->Collective(op, root, in[rank], std::chrono::milliseconds(30000));
      });
    }
    for (std::thread& x : t) x.join();
    return out;
  };
  auto sums = both(pb::COLLECTIVE_SUM, 0, mine);
  std::vector<float> want(3);
  for (size_t j = 0; j < 3; ++j) {
    want[j] = static_cast<float>(static_cast<double>(mine[0][j]) + static_cast<double>(mine[1][j]));
  }
  for (int rank = 0; rank < 2; ++rank) {
    ASSERT_TRUE(sums[rank].ok()) << sums[rank].status().ToString();
    EXPECT_EQ(sums[rank]->values, want);
    EXPECT_EQ(sums[rank]->contributors, 2u);
  }
  auto from1 = both(pb::COLLECTIVE_BROADCAST, 1, mine);
  for (int rank = 0; rank < 2; ++rank) {
    ASSERT_TRUE(from1[rank].ok()) << from1[rank].status().ToString();
    EXPECT_EQ(from1[rank]->values, mine[1]);
  }
  // Sizes that differ: the collective fails for both workers, nothing is combined.
  const std::vector<float> uneven[2] = {{1.0f, 2.0f}, {1.0f, 2.0f, 3.0f}};
  auto refused = both(pb::COLLECTIVE_SUM, 0, uneven);
  int told = 0;
  for (int rank = 0; rank < 2; ++rank) {
    if (!refused[rank].ok()) {
      EXPECT_NE(refused[rank].status().message().find("BAD_COLLECTIVE"), std::string::npos)
          << refused[rank].status().ToString();
      ++told;
    }
  }
  EXPECT_EQ(told, 2);
  // The next collective goes on as usual.
  auto again = both(pb::COLLECTIVE_SUM, 0, mine);
  for (int rank = 0; rank < 2; ++rank) {
    ASSERT_TRUE(again[rank].ok()) << again[rank].status().ToString();
    EXPECT_EQ(again[rank]->values, want);
  }
  // Worker 1 restarts (a new process under its rank replaces the live one): until it sends its
  // first collective it takes no part, so worker 0 is not held up (alone: its own values, one
  // contributor); its first one (its seq 1) is the collective worker 0 is in or starts next.
  NodeOptions o = NodeFor(sched.address(), pb::ROLE_WORKER);
  o.rank = 1;
  auto restarted = Node::Start(o);
  ASSERT_TRUE(restarted.ok()) << restarted.status().ToString();
  w[1] = std::move(restarted).value();
  auto alone = w[0]->Collective(pb::COLLECTIVE_SUM, 0, mine[0], std::chrono::milliseconds(30000));
  ASSERT_TRUE(alone.ok()) << alone.status().ToString();
  EXPECT_EQ(alone->values, mine[0]);
  EXPECT_EQ(alone->contributors, 1u);
  StatusOr<Node::CollectiveResult> first = InternalError("not run");
  std::atomic<bool> first_done{false};
  std::thread rejoiner([&] {
    first = w[1]->Collective(pb::COLLECTIVE_SUM, 0, mine[1], std::chrono::milliseconds(30000));
    first_done = true;
  });
  int together = 0;
  for (int i = 0; i < 500 && !first_done; ++i) {  // worker 0 goes on with its collectives
    auto r = w[0]->Collective(pb::COLLECTIVE_SUM, 0, mine[0], std::chrono::milliseconds(30000));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    if (r->contributors == 2) {
      EXPECT_EQ(r->values, want);
      ++together;
    } else {
      EXPECT_EQ(r->values, mine[0]);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  rejoiner.join();
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->values, want);
  EXPECT_EQ(first->contributors, 2u);
  EXPECT_EQ(together, 1);
  auto after = both(pb::COLLECTIVE_SUM, 0, mine);  // in step from then on
  for (int rank = 0; rank < 2; ++rank) {
    ASSERT_TRUE(after[rank].ok()) << after[rank].status().ToString();
    EXPECT_EQ(after[rank]->values, want);
  }
  // Checked before sending: too many values, a NaN.
  std::vector<float> big(kMaxCollectiveValues + 1, 1.0f);
  auto too_big = w[0]->Collective(pb::COLLECTIVE_SUM, 0, big, std::chrono::milliseconds(1000));
  EXPECT_EQ(too_big.status().code(), StatusCode::kInvalidArgument);
  std::vector<float> nan = {std::nanf("")};
  auto not_finite = w[0]->Collective(pb::COLLECTIVE_SUM, 0, nan, std::chrono::milliseconds(1000));
  EXPECT_EQ(not_finite.status().code(), StatusCode::kInvalidArgument);
}

// A broadcast whose root finished before taking part (uneven inputs) fails for the workers that
// wait in it, with the reason, instead of waiting for it (or answering without its values).
TEST(NetSchedulerTest, ABroadcastFromAFinishedRootFailsWithTheReason) {
  RunningScheduler sched(1, 2, 10);
  std::unique_ptr<Node> w[2];
  ASSERT_NO_FATAL_FAILURE(StartServerAndTwoWorkers(sched, w));
  ASSERT_TRUE(w[1]->Finish().ok());
  const std::vector<float> mine = {1.0f, 2.0f};
  auto r = w[0]->Collective(pb::COLLECTIVE_BROADCAST, 1, mine, std::chrono::milliseconds(30000));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("BAD_COLLECTIVE"), std::string::npos)
      << r.status().ToString();
  EXPECT_NE(r.status().message().find("root of broadcast"), std::string::npos)
      << r.status().ToString();
}

// A worker that gets the node table before a server does may already send it PULL_DENSE (the
// scheduler's broadcast and the worker's request travel on different connections). The server
// cannot decode it yet (no shard lengths): it keeps it and delivers it once its table is in.
TEST(NetNodeTest, PeerMessageBeforeTheTableIsDeliveredAfterIt) {
  RunningScheduler sched(1, 2, 10);
  NodeOptions so = NodeFor(sched.address(), pb::ROLE_SERVER);
  {
    auto probe = CreateZmqTransport(Loopback());  // a port that was free a moment ago
    ASSERT_TRUE(probe.ok());
    so.transport.port = (*probe)->port();
  }
  StatusOr<std::unique_ptr<Node>> server = UnavailableError("not started");
  std::thread start([&] { server = Node::Start(so); });
  // Worker 1 (a raw peer; node id 3 in the table) registers, again until the scheduler's ACK says
  // only worker 0 is missing: the server is up and waits for its table.
  std::unique_ptr<Transport> early = RawPeer(sched.address());
  ASSERT_NE(early, nullptr);
  for (int waiting = 2; waiting > 1;) {
    ASSERT_NO_FATAL_FAILURE(SendRegister(*early, pb::ROLE_WORKER, 1, kProtocolVersion));
    const Message ack = Reply(*early);
    ASSERT_EQ(ack.type(), pb::MSG_REGISTER_ACK);
    waiting = ack.header.register_ack().waiting_for();
  }
  // It asks the server for its shard before the table exists (worker 0 has not registered).
  ASSERT_TRUE(early->Connect(1, "127.0.0.1", so.transport.port).ok());
  pb::Header pull = MakeHeader(pb::MSG_PULL_DENSE, 3, 1);
  pull.set_shard(0);
  auto frames = EncodeControl(pull);
  ASSERT_TRUE(frames.ok());
  ASSERT_TRUE(early->Send(1, std::move(frames).value()).ok());
  // Worker 0 completes the job; the table goes out.
  NodeOptions wo = NodeFor(sched.address(), pb::ROLE_WORKER);
  wo.rank = 0;
  auto worker = Node::Start(wo);
  start.join();
  ASSERT_TRUE(worker.ok()) << worker.status().ToString();
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  Message m;
  auto got = (*server)->Receive(&m, std::chrono::milliseconds(60000));  // 60 s only bound a hang
  ASSERT_TRUE(got.ok() && *got) << "the early PULL_DENSE was lost";
  EXPECT_EQ(m.type(), pb::MSG_PULL_DENSE);
  EXPECT_EQ(m.header.sender(), 3);
  EXPECT_EQ((*server)->rejected_messages(), 0u);
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
  o.register_retry = std::chrono::milliseconds(100);
  auto n = Node::Start(o);
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.status().code(), StatusCode::kUnavailable);
  // Bounded: it gave up after the 3 attempts asked for (a hang would hit ctest's timeout).
  EXPECT_NE(n.status().message().find("did not answer 3 registration attempts (100 ms apart)"),
            std::string::npos)
      << n.status().ToString();
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

// A peer that never reads: Send waits for queue space (here up to its 1 s timeout) while TrySend
// drops at once, so the I/O thread's ERROR replies can never stall on such a peer. The queue
// holds send_hwm messages (a connect()ed PUSH queues even before the peer is up).
TEST(NetTransportTest, TrySendDropsAtOnceWhenThePeersQueueIsFull) {
  TransportOptions o = Loopback();
  o.send_hwm = 4;
  o.send_timeout = std::chrono::milliseconds(1000);
  auto sender = CreateZmqTransport(o);
  auto probe = CreateZmqTransport(Loopback());  // a port that was free a moment ago
  ASSERT_TRUE(sender.ok() && probe.ok());
  const uint16_t nobody = (*probe)->port();
  probe->reset();
  ASSERT_TRUE((*sender)->Connect(7, "127.0.0.1", nobody).ok());
  auto message = [] {
    pb::Header h = MakeHeader(pb::MSG_ERROR, 1);
    return std::move(EncodeControl(h)).value();
  };
  int queued = 0;
  while (queued < 100 && (*sender)->TrySend(7, message()).ok()) ++queued;
  EXPECT_GE(queued, 1);
  EXPECT_LT(queued, 100) << "the queue never filled";
  Status dropped = (*sender)->TrySend(7, message());
  EXPECT_EQ(dropped.code(), StatusCode::kUnavailable) << dropped.ToString();
  EXPECT_NE(dropped.message().find("dropped"), std::string::npos) << dropped.message();
  Status waited = (*sender)->Send(7, message());
  EXPECT_EQ(waited.code(), StatusCode::kDeadlineExceeded) << waited.ToString();
  EXPECT_EQ((*sender)->TrySend(8, message()).code(), StatusCode::kNotFound);
}

// A frame over max_message_bytes never reaches the receiver (ZeroMQ drops the sender's
// connection before buffering it); frames within the limit, from a new connection, still do.
TEST(NetTransportTest, FramesOverTheSizeLimitAreRefused) {
  TransportOptions o = Loopback();
  o.max_message_bytes = 4096;
  auto receiver = CreateZmqTransport(o);
  ASSERT_TRUE(receiver.ok());
  auto frames_of = [](size_t bytes) {
    Frames f;
    f.emplace_back(bytes);
    return f;
  };
  auto big = CreateZmqTransport(Loopback());
  ASSERT_TRUE(big.ok());
  ASSERT_TRUE((*big)->Connect(1, "127.0.0.1", (*receiver)->port()).ok());
  ASSERT_TRUE((*big)->Send(1, frames_of(1 << 20)).ok());  // queued; refused on arrival
  Frames got;
  auto r = (*receiver)->Recv(&got, std::chrono::milliseconds(1000));
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(*r) << "an oversized frame was delivered";
  auto small = CreateZmqTransport(Loopback());
  ASSERT_TRUE(small.ok());
  ASSERT_TRUE((*small)->Connect(1, "127.0.0.1", (*receiver)->port()).ok());
  ASSERT_TRUE((*small)->Send(1, frames_of(4000)).ok());
  r = (*receiver)->Recv(&got, std::chrono::milliseconds(10000));
  ASSERT_TRUE(r.ok() && *r);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].size(), 4000u);
  EXPECT_EQ(MaxFrameBytes(1000), 4000 + (1 << 20));
}

// A raw TCP connection to a node's receive port on loopback, with reads bounded by 20 s (a hang
// only: shorter than libzmq's default handshake limit, 30 s, and far beyond the limits the tests
// set). -1 on failure.
int ConnectRaw(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval bound{20, 0};
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &bound, sizeof(bound)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Reads everything the node sends until it closes the connection (OK) or the read bound passes
// (an error saying the connection is still open); `got` receives the bytes.
::testing::AssertionResult ReadUntilClosed(int fd, std::string* got) {
  char buf[256];
  ssize_t n;
  while ((n = ::recv(fd, buf, sizeof(buf), 0)) > 0) got->append(buf, static_cast<size_t>(n));
  const int err = errno;
  if (n == 0 || err == ECONNRESET) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "still open: " << std::strerror(err);
}

// A peer that opens a TCP connection to a node's port and never completes the ZeroMQ handshake
// is disconnected after handshake_timeout_ms, so it cannot hold connections (and the node's file
// descriptors) open by sending nothing. The read only ends on the node's close: EOF.
TEST(NetTransportTest, ConnectionWithoutAHandshakeIsClosed) {
  TransportOptions o = Loopback();
  o.handshake_timeout = std::chrono::milliseconds(200);
  auto node = CreateZmqTransport(o);
  ASSERT_TRUE(node.ok());
  const int fd = ConnectRaw((*node)->port());
  ASSERT_GE(fd, 0);
  std::string greeting;  // the node's; this peer answers nothing
  EXPECT_TRUE(ReadUntilClosed(fd, &greeting));
  ::close(fd);
}

// A peer that completes the ZeroMQ handshake (ZMTP 3.1, NULL mechanism, as a PUSH socket) and
// then answers nothing: the node's heartbeat PINGs go unanswered and it closes the connection
// after the idle timeout. The handshake limit is set far beyond the wait, so only the idle limit
// can be what closes it; the PING seen proves the handshake was complete.
TEST(NetTransportTest, SilentPeerAfterTheHandshakeIsClosed) {
  TransportOptions o = Loopback();
  o.handshake_timeout = std::chrono::milliseconds(600000);
  o.idle_timeout = std::chrono::milliseconds(300);
  auto node = CreateZmqTransport(o);
  ASSERT_TRUE(node.ok());
  const int fd = ConnectRaw((*node)->port());
  ASSERT_GE(fd, 0);
  std::string hello(64, '\0');  // greeting: signature, version 3.1, "NULL", as-server 0
  hello[0] = '\xff';
  hello[9] = '\x7f';
  hello[10] = 3;
  hello[11] = 1;
  hello.replace(12, 4, "NULL");
  const std::string ready_body = std::string("\x05READY\x0bSocket-Type\0\0\0\x04PUSH", 26);
  hello += std::string("\x04") + static_cast<char>(ready_body.size()) + ready_body;
  ASSERT_EQ(::send(fd, hello.data(), hello.size(), 0), static_cast<ssize_t>(hello.size()));
  std::string got;
  EXPECT_TRUE(ReadUntilClosed(fd, &got));
  EXPECT_NE(got.find("\x04PING"), std::string::npos) << "the handshake never completed";
  ::close(fd);
}

// The registration proof (proto/register_proof.h) against live schedulers: in a job with a token
// a REGISTER is challenged, counts only with the token's proof for this scheduler's challenge, and
// a REGISTER recorded in another job with the same token (another scheduler, so another challenge)
// takes no slot there. Nodes answer the challenge by themselves.
constexpr char kToken[] = "a-token-two-jobs-share";

void Send(Transport& peer, const pb::Header& h) {
  auto frames = EncodeControl(h);
  ASSERT_TRUE(frames.ok());
  ASSERT_TRUE(peer.Send(0, std::move(frames).value()).ok());
}

TEST(NetRegisterProofTest, ChallengedThenAdmittedWithTheProofAndNotWithAnother) {
  RunningScheduler sched(1, 2, 10, kToken);
  std::unique_ptr<Transport> peer = RawPeer(sched.address(), kToken);
  pb::Header h = MakeRegisterHeader(pb::ROLE_WORKER, peer->host(), peer->port(), 1, 42, 0);
  ASSERT_NO_FATAL_FAILURE(Send(*peer, h));
  const Message c = Reply(*peer, kToken);
  ASSERT_EQ(c.type(), pb::MSG_REGISTER_CHALLENGE);
  EXPECT_EQ(c.header.register_challenge().register_instance(), 42u);
  ASSERT_NE(c.header.register_challenge().challenge(), 0u);
  pb::Register* r = h.mutable_register_();
  r->set_challenge(c.header.register_challenge().challenge());
  // A proof made with another token is not answered (the address a REGISTER names may be another
  // node's: an answer there could end that node's registration), and neither is a proof of other
  // fields (rank 0 claimed with rank 1's proof).
  r->set_proof(RegisterProof(JobKey("another token"), *r));
  ASSERT_NO_FATAL_FAILURE(Send(*peer, h));
  const uint64_t rank1_proof = RegisterProof(JobKey(kToken), *r);
  r->set_rank(0);
  r->set_proof(rank1_proof);
  ASSERT_NO_FATAL_FAILURE(Send(*peer, h));
  Frames unexpected;
  auto got = peer->Recv(&unexpected, std::chrono::milliseconds(1000));
  ASSERT_TRUE(got.ok());
  EXPECT_FALSE(*got) << "an unproven REGISTER was answered";
  // The token's proof of exactly this REGISTER is admitted.
  r->set_rank(1);
  r->set_proof(rank1_proof);
  ASSERT_NO_FATAL_FAILURE(Send(*peer, h));
  EXPECT_EQ(Reply(*peer, kToken).type(), pb::MSG_REGISTER_ACK);
}

TEST(NetRegisterProofTest, ARegisterRecordedInOneJobTakesNoSlotInTheNext) {
  pb::Header recorded;
  std::unique_ptr<Transport> peer;
  {
    // Job 1: the REGISTER of worker rank 0 that job 1's scheduler admitted, as recorded.
    RunningScheduler job1(1, 1, 10, kToken);
    peer = RawPeer(job1.address(), kToken);
    recorded = MakeRegisterHeader(pb::ROLE_WORKER, peer->host(), peer->port(), 0, 77, 0);
    ASSERT_NO_FATAL_FAILURE(Send(*peer, recorded));
    const Message c = Reply(*peer, kToken);
    ASSERT_EQ(c.type(), pb::MSG_REGISTER_CHALLENGE);
    recorded.mutable_register_()->set_challenge(c.header.register_challenge().challenge());
    recorded.mutable_register_()->set_proof(RegisterProof(JobKey(kToken), recorded.register_()));
    ASSERT_NO_FATAL_FAILURE(Send(*peer, recorded));
    ASSERT_EQ(Reply(*peer, kToken).type(), pb::MSG_REGISTER_ACK);
  }
  // Job 1's end reached the recorded peer as an ERROR to its pending REGISTER: drop it.
  Frames leftover;
  while (true) {
    auto got = peer->Recv(&leftover, std::chrono::milliseconds(500));
    if (!got.ok() || !*got) break;
  }
  // Job 2, same token, one worker slot: the replayed REGISTER is only challenged again...
  RunningScheduler job2(1, 1, 10, kToken);
  peer->Disconnect(0);
  std::string host;
  uint16_t port;
  ASSERT_TRUE(ParseHostPort(job2.address(), &host, &port).ok());
  ASSERT_TRUE(peer->Connect(0, host, port).ok());
  ASSERT_NO_FATAL_FAILURE(Send(*peer, recorded));
  const Message again = Reply(*peer, kToken);
  ASSERT_EQ(again.type(), pb::MSG_REGISTER_CHALLENGE);
  EXPECT_NE(again.header.register_challenge().challenge(), recorded.register_().challenge());
  // ...and the job's real worker 0 and server form the job (the replay held no slot).
  std::thread server([&] {
    auto n = Node::Start(NodeFor(job2.address(), pb::ROLE_SERVER, kToken));
    EXPECT_TRUE(n.ok()) << n.status().ToString();
  });
  NodeOptions w = NodeFor(job2.address(), pb::ROLE_WORKER, kToken);
  w.rank = 0;
  auto worker = Node::Start(w);
  server.join();
  ASSERT_TRUE(worker.ok()) << worker.status().ToString();
  EXPECT_EQ((*worker)->rank(), 0);
}

TEST(NetRegisterProofTest, ANodeWithoutTheTokensKeyIsNotAdmitted) {
  RunningScheduler sched(1, 1, 10, kToken);
  NodeOptions o = NodeFor(sched.address(), pb::ROLE_WORKER, kToken);
  o.job_key = JobKey("a guess");
  o.register_attempts = 3;
  // Its proofs are not answered (an answer could be aimed at another node's address), so it
  // runs out of attempts.
  auto n = Node::Start(o);
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.status().code(), StatusCode::kUnavailable) << n.status().ToString();
  EXPECT_NE(n.status().message().find("did not answer"), std::string::npos)
      << n.status().ToString();
}

}  // namespace
}  // namespace sieve
