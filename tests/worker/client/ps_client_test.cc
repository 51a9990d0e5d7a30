// PsClient's reply collection, unit-tested: an in-process scheduler, one server the test plays
// with a bare Node, and a real PsClient, all on an InprocNetwork. The test server answers each
// PUSH as a faulty or hostile peer might (a stale round, duplicates, split parts, ERRORs, silence,
// a restart), and the client's results are checked against what a correct client must do: the
// replica holds exactly the values of the round's reply, and every failure is the documented one.
#include "worker/client/ps_client.h"

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "net/inproc_transport.h"
#include "net/node.h"
#include "proto/codec.h"
#include "proto/error_code.h"
#include "proto/messages.h"
#include "scheduler/scheduler.h"
#include "tests/proto/test_util.h"
#include "worker/client/ps_client_testing.h"

namespace sieve {
namespace {

constexpr uint64_t kD = 64;                       // one shard: server 0 owns [0, 64)
constexpr std::chrono::milliseconds kWait{5000};  // bounds a hang, never a race

class PsClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SchedulerOptions so;
    so.num_servers = servers_;
    so.num_workers = 1;
    so.num_params = kD;
    so.heartbeat_timeout = std::chrono::milliseconds(0);
    so.transport.factory = net_.factory();
    auto s = Scheduler::Create(so);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    scheduler_ = std::move(s).value();
    scheduler_thread_ = std::thread([this] { (void)scheduler_->Run(); });
    address_ = "inproc:" + std::to_string(scheduler_->port());

    // Each start returns once the whole job registered: start the servers beside the client.
    auto server = std::async(std::launch::async, [this] { return StartServer(); });
    std::future<std::unique_ptr<Node>> second;
    if (servers_ == 2) second = std::async(std::launch::async, [this] { return StartServer(1); });
    PsClientOptions co;
    co.scheduler = address_;
    co.num_params = kD;
    co.heartbeat_interval = std::chrono::milliseconds(0);
    co.resend_check = std::chrono::milliseconds(20);
    auto c = PsClientTesting::Connect(co, net_.factory());
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    client_ = std::move(c).value();
    server_ = server.get();
    ASSERT_NE(server_, nullptr);
    if (servers_ == 2) {
      server1_ = second.get();
      ASSERT_NE(server1_, nullptr);
    }
    weights_.assign(kD, -1.0f);
  }

  void TearDown() override {
    client_.reset();
    server_.reset();
    server1_.reset();
    if (scheduler_ != nullptr) scheduler_->Stop("test over");
    if (scheduler_thread_.joinable()) scheduler_thread_.join();
  }

  std::unique_ptr<Node> StartServer(int rank = 0) {
    NodeOptions no;
    no.role = pb::ROLE_SERVER;
    no.rank = rank;
    no.scheduler = address_;
    no.heartbeat_interval = std::chrono::milliseconds(0);
    no.transport.factory = net_.factory();
    auto n = Node::Start(no);
    EXPECT_TRUE(n.ok()) << n.status().ToString();
    return n.ok() ? std::move(n).value() : nullptr;
  }

  // The client's round in the background: push sel = {1: 0.5, 9: -2} and collect the UPDATE.
  std::future<Status> StartRound(uint64_t round, std::chrono::milliseconds timeout = kWait) {
    return std::async(std::launch::async, [this, round, timeout] {
      Selection sel;
      sel.dim = kD;
      sel.indices = {1, 9};
      sel.values = {0.5f, -2.0f};
      RoundStats stats;
      return client_->PushPull(round, &sel, weights_, &stats, timeout);
    });
  }

  // The next message the server receives (a test failure after kWait without one).
  Message ServerNext(Node& server) {
    Message m;
    auto got = server.Receive(&m, kWait);
    EXPECT_TRUE(got.ok() && *got) << "the server received nothing";
    return m;
  }

  // An UPDATE of `round` (part `part` of `parts`) from `server` to the worker that sent `push`.
  void SendUpdate(Node& server, const Message& push, uint64_t round, std::vector<uint32_t> idx,
                  std::vector<float> val, uint32_t part = 0, uint32_t parts = 1,
                  uint32_t flags = 0) {
    pb::Header h =
        MakeDataHeader(pb::MSG_UPDATE, server.id(), push.header.sender(), server.rank(), round);
    h.set_flags(flags);
    if (parts > 1) {
      h.set_part(part);
      h.set_parts(parts);
    }
    auto frames = testing::EncodePairs(h, std::move(idx), std::move(val));
    ASSERT_TRUE(frames.ok()) << frames.status().ToString();
    ASSERT_TRUE(server.Send(push.header.sender(), std::move(frames).value()).ok());
  }

  void SendError(Node& server, const Message& push, uint64_t round, pb::ErrorCode code,
                 pb::MsgType rejected = pb::MSG_PUSH) {
    ASSERT_TRUE(server.SendError(push.header.sender(), code, "test says no", rejected, round).ok());
  }

  // weights_ with the given (index, value) pairs set and every other entry still -1.
  static std::vector<float> Expect(const std::vector<std::pair<uint32_t, float>>& set) {
    std::vector<float> w(kD, -1.0f);
    for (auto [i, v] : set) w[i] = v;
    return w;
  }

  int servers_ = 1;  // a derived fixture sets 2: server 0 owns [0, 32), server 1 [32, 64)
  InprocNetwork net_;
  std::unique_ptr<Scheduler> scheduler_;
  std::thread scheduler_thread_;
  std::string address_;
  std::unique_ptr<Node> server_;
  std::unique_ptr<Node> server1_;
  std::unique_ptr<PsClient> client_;
  std::vector<float> weights_;
};

TEST_F(PsClientTest, PushCarriesTheSelectionAndTheReplyIsWrittenIntoTheReplica) {
  auto round = StartRound(0);
  Message push = ServerNext(*server_);
  ASSERT_EQ(push.type(), pb::MSG_PUSH);
  EXPECT_EQ(push.header.round(), 0u);
  EXPECT_EQ(std::vector<uint32_t>(push.indices.begin(), push.indices.end()),
            (std::vector<uint32_t>{1, 9}));
  EXPECT_EQ(std::vector<float>(push.values.begin(), push.values.end()),
            (std::vector<float>{0.5f, -2.0f}));
  SendUpdate(*server_, push, 0, {1, 9, 40}, {10.0f, 20.0f, 30.0f});
  ASSERT_EQ(round.wait_for(kWait), std::future_status::ready);
  ASSERT_TRUE(round.get().ok());
  EXPECT_EQ(weights_, Expect({{1, 10.0f}, {9, 20.0f}, {40, 30.0f}}));
}

TEST_F(PsClientTest, StaleRoundAndDuplicateRepliesAreIgnored) {
  auto round = StartRound(5);
  Message push = ServerNext(*server_);
  SendUpdate(*server_, push, 4, {2}, {444.0f});  // the previous round: stale
  SendUpdate(*server_, push, 6, {3}, {666.0f});  // a round not asked for
  SendUpdate(*server_, push, 5, {1}, {7.0f});
  ASSERT_EQ(round.wait_for(kWait), std::future_status::ready);
  ASSERT_TRUE(round.get().ok());
  EXPECT_EQ(weights_, Expect({{1, 7.0f}}));

  // A duplicate of round 5's reply arriving during round 6 changes nothing either.
  weights_.assign(kD, -1.0f);
  auto next = StartRound(6);
  Message push6 = ServerNext(*server_);
  SendUpdate(*server_, push6, 5, {1}, {555.0f});
  SendUpdate(*server_, push6, 6, {8}, {8.0f});
  ASSERT_EQ(next.wait_for(kWait), std::future_status::ready);
  ASSERT_TRUE(next.get().ok());
  EXPECT_EQ(weights_, Expect({{8, 8.0f}}));
}

TEST_F(PsClientTest, SplitReplyCompletesAfterEveryPartAndIgnoresRepeatedParts) {
  auto round = StartRound(2);
  Message push = ServerNext(*server_);
  SendUpdate(*server_, push, 2, {1}, {1.0f}, /*part=*/0, /*parts=*/3);
  SendUpdate(*server_, push, 2, {1}, {999.0f}, 0, 3);  // the same part again: ignored
  SendUpdate(*server_, push, 2, {20}, {2.0f}, 2, 3);
  // Two parts of three: the round is not over.
  EXPECT_EQ(round.wait_for(std::chrono::milliseconds(100)), std::future_status::timeout);
  SendUpdate(*server_, push, 2, {10}, {3.0f}, 1, 3);
  ASSERT_EQ(round.wait_for(kWait), std::future_status::ready);
  ASSERT_TRUE(round.get().ok());
  EXPECT_EQ(weights_, Expect({{1, 1.0f}, {10, 3.0f}, {20, 2.0f}}));
}

TEST_F(PsClientTest, ErrorAPeerCouldHaveCausedIsAnsweredByPushingAgain) {
  auto round = StartRound(3);
  Message push = ServerNext(*server_);
  SendError(*server_, push, 3, pb::ERROR_CHECKSUM);
  Message again = ServerNext(*server_);  // the same PUSH, sent again
  ASSERT_EQ(again.type(), pb::MSG_PUSH);
  EXPECT_EQ(again.header.round(), 3u);
  EXPECT_EQ(std::vector<uint32_t>(again.indices.begin(), again.indices.end()),
            (std::vector<uint32_t>{1, 9}));
  SendUpdate(*server_, again, 3, {9}, {4.5f});
  ASSERT_EQ(round.wait_for(kWait), std::future_status::ready);
  ASSERT_TRUE(round.get().ok());
  EXPECT_EQ(client_->errors_retried(), 1u);
  EXPECT_EQ(weights_, Expect({{9, 4.5f}}));
}

TEST_F(PsClientTest, ErrorsForAnotherRoundOrRequestAreIgnored) {
  auto round = StartRound(3);
  Message push = ServerNext(*server_);
  SendError(*server_, push, 2, pb::ERROR_NOT_REGISTERED);                      // another round
  SendError(*server_, push, 3, pb::ERROR_NOT_REGISTERED, pb::MSG_PULL_DENSE);  // another request
  SendUpdate(*server_, push, 3, {1}, {1.5f});
  ASSERT_EQ(round.wait_for(kWait), std::future_status::ready);
  ASSERT_TRUE(round.get().ok());
  EXPECT_EQ(weights_, Expect({{1, 1.5f}}));
  EXPECT_EQ(client_->errors_retried(), 0u);
}

TEST_F(PsClientTest, ARefusalFailsTheRoundNamingTheServerAndLeavesTheReplica) {
  auto round = StartRound(1);
  Message push = ServerNext(*server_);
  SendError(*server_, push, 1, pb::ERROR_NOT_REGISTERED);
  ASSERT_EQ(round.wait_for(kWait), std::future_status::ready);
  const Status s = round.get();
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s.ToString();
  EXPECT_EQ(WireCodeOf(s), pb::ERROR_NOT_REGISTERED) << s.ToString();
  EXPECT_NE(s.message().find("server 0"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("ERROR_NOT_REGISTERED"), std::string::npos) << s.message();
  EXPECT_EQ(weights_, Expect({}));
}

// A refusal the client does not retry comes back carrying the server's code, with the status
// code the one table gives it: a caller tells refusals apart by value.
TEST_F(PsClientTest, ARefusalCarriesTheServersWireCode) {
  const pb::ErrorCode codes[] = {pb::ERROR_NOT_INITIALIZED, pb::ERROR_WRONG_SHARD,
                                 pb::ERROR_UNEXPECTED_TYPE, pb::ERROR_RANK_TAKEN};
  uint64_t r = 1;
  for (pb::ErrorCode code : codes) {
    auto round = StartRound(r);
    Message push = ServerNext(*server_);
    SendError(*server_, push, r, code);
    ASSERT_EQ(round.wait_for(kWait), std::future_status::ready);
    const Status s = round.get();
    EXPECT_EQ(WireCodeOf(s), code) << s.ToString();
    EXPECT_TRUE(HasWireCode(s, code)) << s.ToString();
    EXPECT_EQ(s.code(), StatusCodeOf(code)) << s.ToString();
    ++r;
  }
}

TEST_F(PsClientTest, SilenceEndsAtTheDeadlineNamingWhatIsMissing) {
  auto round = StartRound(4, /*timeout=*/std::chrono::milliseconds(200));
  Message push = ServerNext(*server_);
  ASSERT_EQ(push.type(), pb::MSG_PUSH);
  ASSERT_EQ(round.wait_for(kWait), std::future_status::ready);
  const Status s = round.get();
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded) << s.ToString();
  EXPECT_NE(s.message().find("round 4"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("1 of 1 servers"), std::string::npos) << s.message();
  EXPECT_EQ(weights_, Expect({}));
}

TEST_F(PsClientTest, ARestartedServerGetsTheRoundsPushAgain) {
  auto round = StartRound(7);
  Message lost = ServerNext(*server_);  // received, never answered: the server "crashes"
  ASSERT_EQ(lost.type(), pb::MSG_PUSH);
  server_.reset();
  // Its replacement registers under the same rank; the new node table makes the client resend.
  std::unique_ptr<Node> restarted = StartServer();
  ASSERT_NE(restarted, nullptr);
  Message push = ServerNext(*restarted);
  ASSERT_EQ(push.type(), pb::MSG_PUSH);
  EXPECT_EQ(push.header.round(), 7u);
  SendUpdate(*restarted, push, 7, {1, 9}, {0.25f, 0.75f});
  ASSERT_EQ(round.wait_for(kWait), std::future_status::ready);
  ASSERT_TRUE(round.get().ok());
  EXPECT_EQ(client_->resends(), 1u);
  EXPECT_EQ(weights_, Expect({{1, 0.25f}, {9, 0.75f}}));
  server_ = std::move(restarted);
}

// Backup workers: UPDATEs of rounds that closed without this worker arrive before it pushes
// them. Queued before the call, round 5's and 6's: round 5 completes, 6 is applied as well and
// skipped (rounds_skipped = 1), and a flagged UPDATE hands the slice back (missed_*).
TEST_F(PsClientTest, RoundsThatClosedWithoutTheWorkerAreAppliedAndSkipped) {
  auto first = StartRound(4);
  Message push = ServerNext(*server_);
  SendUpdate(*server_, push, 4, {0}, {4.0f});
  ASSERT_EQ(first.wait_for(kWait), std::future_status::ready);
  ASSERT_TRUE(first.get().ok());
  SendUpdate(*server_, push, 5, {2}, {5.0f}, 0, 1, pb::FLAG_PUSH_MISSED);
  SendUpdate(*server_, push, 6, {3}, {6.0f});
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // both queued at the client
  Selection sel;
  sel.dim = kD;
  sel.indices = {1, 9};
  sel.values = {0.5f, -2.0f};
  RoundStats stats;
  ASSERT_TRUE(client_->PushPull(5, &sel, weights_, &stats, kWait).ok());
  EXPECT_EQ(weights_, Expect({{0, 4.0f}, {2, 5.0f}, {3, 6.0f}}));
  EXPECT_EQ(stats.rounds_skipped, 1u);
  EXPECT_EQ(stats.missed_shards, 1u);
  EXPECT_EQ(stats.missed_indices, (std::vector<uint32_t>{1, 9}));
  EXPECT_EQ(stats.missed_values, (std::vector<float>{0.5f, -2.0f}));
  Message late = ServerNext(*server_);  // the push still went out (the server decides)
  EXPECT_EQ(late.header.round(), 5u);
}

// Backup workers with --late_pushes=apply: a push whose round closed without it (FLAG_PUSH_LATE
// on the round's UPDATE) is kept until its LATE_PUSH_ACK and sent again, before the next round's
// push, to a server that took the shard over (a new node table): it is not lost with the server
// that never applied it. Once acknowledged it is no longer sent.
TEST_F(PsClientTest, ALatePushIsKeptUntilItsAcknowledgementAndSentAgainAfterAFailover) {
  auto first = StartRound(4);
  Message push = ServerNext(*server_);
  SendUpdate(*server_, push, 4, {0}, {4.0f}, 0, 1, pb::FLAG_PUSH_LATE);
  ASSERT_EQ(first.wait_for(kWait), std::future_status::ready);
  ASSERT_TRUE(first.get().ok());
  server_.reset();  // dies with the late push unapplied
  std::unique_ptr<Node> second = StartServer();
  ASSERT_NE(second, nullptr);
  auto next = StartRound(5);
  Message again = ServerNext(*second);
  ASSERT_EQ(again.type(), pb::MSG_PUSH);
  EXPECT_EQ(again.header.round(), 4u) << "the late push first";
  EXPECT_EQ(std::vector<uint32_t>(again.indices.begin(), again.indices.end()),
            (std::vector<uint32_t>{1, 9}));
  EXPECT_EQ(std::vector<float>(again.values.begin(), again.values.end()),
            (std::vector<float>{0.5f, -2.0f}));
  Message now = ServerNext(*second);
  EXPECT_EQ(now.header.round(), 5u);
  auto ack =
      EncodeControl(MakeDataHeader(pb::MSG_LATE_PUSH_ACK, second->id(), now.header.sender(), 0, 4));
  ASSERT_TRUE(ack.ok());
  ASSERT_TRUE(second->Send(now.header.sender(), std::move(ack).value()).ok());
  SendUpdate(*second, now, 5, {2}, {5.0f});
  ASSERT_EQ(next.wait_for(kWait), std::future_status::ready);
  ASSERT_TRUE(next.get().ok());
  second.reset();  // another failover: nothing is held any more
  server_ = StartServer();
  ASSERT_NE(server_, nullptr);
  auto third = StartRound(6);
  Message only = ServerNext(*server_);
  EXPECT_EQ(only.header.round(), 6u) << "an acknowledged late push was sent again";
  SendUpdate(*server_, only, 6, {3}, {6.0f});
  ASSERT_EQ(third.wait_for(kWait), std::future_status::ready);
  ASSERT_TRUE(third.get().ok());
}

class PsClientTwoServersTest : public PsClientTest {
 protected:
  PsClientTwoServersTest() { servers_ = 2; }
};

// Server 0 answers round 0 and then round 1 (closed without this worker) while server 1's answer
// to round 0 is still out: round 1's UPDATE from server 0 is applied, not dropped, so round 1
// completes with server 1's answer alone (before the fix it was dropped and round 1 hung).
TEST_F(PsClientTwoServersTest, ALaterRoundFromAServerAlreadyAnsweredIsKept) {
  auto round0 = StartRound(0);
  Message p0 = ServerNext(*server_);
  Message p1 = ServerNext(*server1_);
  SendUpdate(*server_, p0, 0, {1}, {10.0f});
  SendUpdate(*server_, p0, 1, {2}, {11.0f});
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  SendUpdate(*server1_, p1, 0, {0}, {20.0f});
  ASSERT_EQ(round0.wait_for(kWait), std::future_status::ready);
  ASSERT_TRUE(round0.get().ok());
  auto round1 = StartRound(1);
  Message q1 = ServerNext(*server1_);
  EXPECT_EQ(q1.header.round(), 1u);
  SendUpdate(*server1_, q1, 1, {1}, {21.0f});
  ASSERT_EQ(round1.wait_for(kWait), std::future_status::ready);
  ASSERT_TRUE(round1.get().ok());
  EXPECT_EQ(weights_, Expect({{1, 10.0f}, {2, 11.0f}, {32, 20.0f}, {33, 21.0f}}));
}

}  // namespace
}  // namespace sieve
