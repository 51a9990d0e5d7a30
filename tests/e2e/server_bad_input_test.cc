// A real sieve-server process fed malformed and semantically wrong pushes by a hand-driven worker
// node: every bad message gets an ERROR reply, the shard is unchanged (dense pull before/after),
// and the server keeps serving good pushes.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <limits>
#include <random>
#include <thread>

#include "net/node.h"
#include "scheduler/scheduler.h"
#include "tests/net/subprocess.h"

namespace sieve {
namespace {

using std::chrono::seconds;

class BadInputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SchedulerOptions so;
    so.num_servers = 1;
    so.num_workers = 1;
    so.transport.bind_host = "127.0.0.1";
    so.heartbeat_timeout_ms = 0;
    auto s = Scheduler::Create(so);
    ASSERT_TRUE(s.ok());
    scheduler_ = std::move(s).value();
    sched_thread_ = std::thread([this] { (void)scheduler_->Run(); });
    const std::string addr = "127.0.0.1:" + std::to_string(scheduler_->port());
    server_ = std::make_unique<testing::Subprocess>(
        std::vector<std::string>{testing::SelfDir() + "/../../server/sieve-server",
                                 "--scheduler=" + addr, "--bind=127.0.0.1", "--host=127.0.0.1",
                                 "--model=softmax", "--seed=3", "--heartbeat_interval_ms=0"});
    NodeOptions no;
    no.role = pb::ROLE_WORKER;
    no.scheduler = addr;
    no.transport.bind_host = "127.0.0.1";
    no.num_params = 7850;
    no.heartbeat_interval_ms = 0;
    auto n = Node::Start(no);
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    node_ = std::move(n).value();
  }
  void TearDown() override {
    if (node_) (void)node_->Finish();
    if (server_) {
      auto st = server_->Wait(seconds(20));
      EXPECT_TRUE(st.has_value());
    }
    scheduler_->Stop("test over");
    sched_thread_.join();
  }

  Frames Push(uint64_t round, int shard, std::vector<uint32_t> idx, std::vector<float> val) {
    auto keep = std::make_shared<std::pair<std::vector<uint32_t>, std::vector<float>>>(
        std::move(idx), std::move(val));
    pb::Header h;
    h.set_type(pb::MSG_PUSH);
    h.set_sender(node_->id());
    h.set_shard(shard);
    h.set_round(round);
    DataPayload p;
    p.indices = keep->first;
    p.values = std::as_bytes(std::span<const float>(keep->second));
    p.keepalive = keep;
    auto f = EncodeData(h, p);
    EXPECT_TRUE(f.ok());
    return std::move(f).value();
  }

  // Sends and returns the next data-plane reply.
  // Sends a push and returns the reply to it (skipping a late DENSE from a resent pull).
  Message Exchange(Frames frames) {
    EXPECT_TRUE(node_->Send(1, std::move(frames)).ok());
    Message m;
    do {
      auto got = node_->Receive(&m, 10000);
      EXPECT_TRUE(got.ok() && *got) << "no reply";
      if (!got.ok() || !*got) break;
    } while (m.type() == pb::MSG_DENSE);
    return m;
  }

  // The server may not have its node table yet when the test starts (it then drops messages from
  // nodes it does not know), so the pull is resent until a DENSE arrives (bounded).
  std::vector<float> PullShard() {
    pb::Header h;
    h.set_type(pb::MSG_PULL_DENSE);
    h.set_sender(node_->id());
    h.set_shard(0);
    for (int attempt = 0; attempt < 20; ++attempt) {
      EXPECT_TRUE(node_->Send(1, *EncodeControl(h)).ok());
      Message m;
      auto got = node_->Receive(&m, 500 * (attempt + 1));
      if (got.ok() && *got) {
        EXPECT_EQ(m.type(), pb::MSG_DENSE);
        return {m.values.begin(), m.values.end()};
      }
    }
    ADD_FAILURE() << "no DENSE reply after 20 pulls";
    return {};
  }

  std::unique_ptr<Scheduler> scheduler_;
  std::thread sched_thread_;
  std::unique_ptr<testing::Subprocess> server_;
  std::unique_ptr<Node> node_;
};

TEST_F(BadInputTest, EveryBadPushGetsAnErrorAndChangesNothing) {
  const std::vector<float> before = PullShard();
  ASSERT_EQ(before.size(), 7850u);
  const float nan = std::numeric_limits<float>::quiet_NaN();

  struct Case {
    const char* what;
    Frames frames;
    pb::ErrorCode want;
  };
  std::vector<Case> cases;
  cases.push_back({"index out of range", Push(0, 0, {1, 7850}, {1, 1}), pb::ERROR_INDEX_RANGE});
  cases.push_back({"unsorted", Push(0, 0, {5, 2}, {1, 1}), pb::ERROR_INDEX_ORDER});
  cases.push_back({"duplicate index", Push(0, 0, {5, 5}, {1, 1}), pb::ERROR_INDEX_ORDER});
  cases.push_back({"NaN", Push(0, 0, {1, 2}, {1, nan}), pb::ERROR_NON_FINITE});
  cases.push_back({"Inf", Push(0, 0, {1}, {INFINITY}), pb::ERROR_NON_FINITE});
  cases.push_back({"unknown shard", Push(0, 3, {1}, {1}), pb::ERROR_WRONG_SHARD});
  cases.push_back({"future round", Push(9, 0, {1}, {1}), pb::ERROR_UNKNOWN_ROUND});
  {
    Frames f = Push(0, 0, {1, 2}, {1, 2});
    f.pop_back();
    cases.push_back({"missing frame", std::move(f), pb::ERROR_BAD_FRAME_COUNT});
  }
  {
    Frames f = Push(0, 0, {1, 2}, {1, 2});
    f[2] = zmq::message_t(std::string(7, 'x'));
    cases.push_back({"truncated values", std::move(f), pb::ERROR_BAD_FRAME_SIZE});
  }
  {
    Frames f = Push(0, 0, {1, 2}, {1, 2});
    std::string bytes(static_cast<const char*>(f[2].data()), f[2].size());
    bytes[0] ^= 0x40;
    f[2] = zmq::message_t(bytes);
    cases.push_back({"corrupted payload", std::move(f), pb::ERROR_CHECKSUM});
  }
  for (Case& c : cases) {
    Message m = Exchange(std::move(c.frames));
    ASSERT_EQ(m.type(), pb::MSG_ERROR) << c.what;
    EXPECT_EQ(m.header.error().code(), c.want) << c.what << ": " << m.header.error().message();
  }
  EXPECT_EQ(PullShard(), before) << "a rejected push changed the shard";

  // Still serving: a good push completes round 0 (the only worker) and moves exactly w[1], w[2].
  Message ok = Exchange(Push(0, 0, {1, 2}, {0.5f, -0.25f}));
  ASSERT_EQ(ok.type(), pb::MSG_UPDATE);
  ASSERT_EQ(ok.indices.size(), 2u);
  EXPECT_FLOAT_EQ(ok.values[0], before[1] - 0.5f);
  EXPECT_FLOAT_EQ(ok.values[1], before[2] + 0.25f);
  std::vector<float> after = PullShard();
  for (size_t i = 0; i < after.size(); ++i) {
    if (i != 1 && i != 2) {
      ASSERT_EQ(after[i], before[i]) << i;
    }
  }
}

TEST_F(BadInputTest, RandomGarbageFramesNeverStopTheServer) {
  const std::vector<float> before = PullShard();
  std::mt19937 rng(99);
  for (int t = 0; t < 300; ++t) {
    Frames f;
    const int nframes = 1 + static_cast<int>(rng() % 3);
    for (int i = 0; i < nframes; ++i) {
      std::string bytes(rng() % 64, '\0');
      for (char& ch : bytes) ch = static_cast<char>(rng());
      f.emplace_back(bytes.data(), bytes.size());
    }
    ASSERT_TRUE(node_->Send(1, std::move(f)).ok());
  }
  // Garbage with no parsable sender cannot be answered; the server drops it and keeps going.
  EXPECT_EQ(PullShard(), before);
}

}  // namespace
}  // namespace sieve
