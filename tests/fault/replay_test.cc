// Replay safety end to end: a real sieve-server (BSP, one shard) and two hand-driven worker
// nodes. Worker 0 sends its round-0 push three times (before and after the round completes); the
// push is applied once: the shard equals the once-applied average and the server's weight
// checksum (CRC-32 in its summary) matches the one computed here.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <zlib.h>

#include <thread>

#include "net/node.h"
#include "scheduler/scheduler.h"
#include "tests/fault/cluster.h"

namespace sieve {
namespace {

using std::chrono::seconds;

class ReplayTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SchedulerOptions so;
    so.num_servers = 1;
    so.num_workers = 2;
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
    for (int w = 0; w < 2; ++w) {
      starting_.emplace_back([this, addr, w] {
        NodeOptions no;
        no.role = pb::ROLE_WORKER;
        no.rank = w;
        no.scheduler = addr;
        no.transport.bind_host = "127.0.0.1";
        no.num_params = 7850;
        no.heartbeat_interval_ms = 0;
        auto n = Node::Start(no);
        EXPECT_TRUE(n.ok()) << n.status().ToString();
        if (n.ok()) nodes_[w] = std::move(n).value();
      });
    }
    for (auto& t : starting_) t.join();
    ASSERT_TRUE(nodes_[0] && nodes_[1]);
  }
  void TearDown() override {
    scheduler_->Stop("test over");
    sched_thread_.join();
  }

  Frames Push(int w, uint64_t round, std::vector<uint32_t> idx, std::vector<float> val) {
    auto keep = std::make_shared<std::pair<std::vector<uint32_t>, std::vector<float>>>(
        std::move(idx), std::move(val));
    pb::Header h;
    h.set_type(pb::MSG_PUSH);
    h.set_sender(nodes_[w]->id());
    h.set_shard(0);
    h.set_round(round);
    DataPayload p;
    p.indices = keep->first;
    p.values = std::as_bytes(std::span<const float>(keep->second));
    p.keepalive = keep;
    auto f = EncodeData(h, p);
    EXPECT_TRUE(f.ok());
    return std::move(f).value();
  }

  Message Next(int w) {
    Message m;
    auto got = nodes_[w]->Receive(&m, 10000);
    EXPECT_TRUE(got.ok() && *got) << "no reply";
    return m;
  }

  // The first PULL_DENSE can reach the server before its own node table (it then cannot be
  // answered), so it is resent a bounded number of times.
  std::vector<float> PullShard(int w) {
    pb::Header h;
    h.set_type(pb::MSG_PULL_DENSE);
    h.set_sender(nodes_[w]->id());
    h.set_shard(0);
    for (int attempt = 0; attempt < 20; ++attempt) {
      EXPECT_TRUE(nodes_[w]->Send(1, *EncodeControl(h)).ok());
      Message m;
      auto got = nodes_[w]->Receive(&m, 1000);
      if (!got.ok()) break;
      if (*got && m.type() == pb::MSG_DENSE) return {m.values.begin(), m.values.end()};
    }
    ADD_FAILURE() << "no DENSE reply";
    return {};
  }

  std::unique_ptr<Scheduler> scheduler_;
  std::thread sched_thread_;
  std::unique_ptr<testing::Subprocess> server_;
  std::vector<std::thread> starting_;
  std::unique_ptr<Node> nodes_[2];
};

TEST_F(ReplayTest, AReplayedPushIsAppliedOnce) {
  std::vector<float> expect = PullShard(0);
  ASSERT_EQ(expect.size(), 7850u);
  // Worker 0 pushes round 0 twice before worker 1 pushes (the round is still open) ...
  ASSERT_TRUE(nodes_[0]->Send(1, Push(0, 0, {1, 2}, {0.5f, -1.0f})).ok());
  ASSERT_TRUE(nodes_[0]->Send(1, Push(0, 0, {1, 2}, {0.5f, -1.0f})).ok());
  ASSERT_TRUE(nodes_[1]->Send(1, Push(1, 0, {2, 3}, {2.0f, 4.0f})).ok());
  Message u1 = Next(1);
  ASSERT_EQ(u1.type(), pb::MSG_UPDATE);
  EXPECT_EQ(u1.header.round(), 0u);
  // ... and once more after it completed: the reply is resent, nothing applied.
  ASSERT_TRUE(nodes_[0]->Send(1, Push(0, 0, {1, 2}, {0.5f, -1.0f})).ok());
  for (int i = 0; i < 2; ++i) {
    Message u0 = Next(0);
    ASSERT_EQ(u0.type(), pb::MSG_UPDATE);
    EXPECT_EQ(u0.header.round(), 0u);
    ASSERT_EQ(u0.indices.size(), 3u);
  }
  expect[1] -= 0.5f / 2;
  expect[2] -= (-1.0f + 2.0f) / 2;
  expect[3] -= 4.0f / 2;
  EXPECT_EQ(PullShard(1), expect);

  for (auto& n : nodes_) ASSERT_TRUE(n->Finish().ok());
  auto st = server_->Wait(seconds(20));
  ASSERT_TRUE(st.has_value());
  testing::KeyValues summary;
  for (const auto& l : server_->lines()) {
    if (l.find("sieve-server summary: ") != std::string::npos)
      summary = testing::ParseSummary(l, "sieve-server summary: ");
  }
  const uint32_t crc = static_cast<uint32_t>(
      crc32(crc32(0, nullptr, 0), reinterpret_cast<const Bytef*>(expect.data()),
            static_cast<uInt>(expect.size() * sizeof(float))));
  char want[16];
  std::snprintf(want, sizeof(want), "%08x", crc);
  EXPECT_EQ(summary["checksum"], want);
  EXPECT_EQ(summary["applied"], "2");
  EXPECT_EQ(summary["duplicates"], "2");
  EXPECT_EQ(summary["rounds"], "1");
}

}  // namespace
}  // namespace sieve
