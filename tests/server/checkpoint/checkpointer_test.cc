// ShardCheckpointer::Init: when a shard is restored, and how a server restarted in a running job
// without a checkpoint resynchronizes from its initial weights instead of refusing the workers'
// rounds (reference: BspShard's resync rules, as restore_test.cc states them).
#include "server/checkpoint/checkpointer.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "tests/base/temp_dir.h"

namespace sieve {
namespace {

constexpr uint32_t kN = 6;

std::vector<float> Initial() { return {0.5f, -1.0f, 2.0f, 0.25f, 4.0f, -3.0f}; }

std::unique_ptr<ShardServer> Shard(Consistency c = Consistency::kBsp) {
  ShardServerOptions o;
  o.num_workers = 2;
  o.consistency = c;
  auto s = ShardServer::Create(o, Initial());
  EXPECT_TRUE(s.ok());
  return std::move(s).value();
}

class CheckpointerTest : public ::testing::Test {
 protected:
  void SetUp() override { config_ = {"test", kN, 0, kN, "bsp", 1}; }
  CheckpointerOptions Options(bool rejoining, const std::string& restore = "auto") const {
    CheckpointerOptions o;
    o.dir = (tmp_.path() / "checkpoints").string();  // the checkpointer creates it
    o.restore = restore;
    o.rejoining = rejoining;
    return o;
  }
  testing::TempDir tmp_{"sieve-ckptr"};  // each test's own, removed after it
  CheckpointConfig config_;
};

TEST_F(CheckpointerTest, AFirstStartRestoresNothingAndStaysAtRoundZero) {
  auto s = Shard();
  ShardCheckpointer c;
  ASSERT_TRUE(c.Init(Options(false), config_, 0, s.get()).ok());
  EXPECT_EQ(c.restored_round(), -1);
  EXPECT_FALSE(s->rounds()->resyncing());
}

TEST_F(CheckpointerTest, ARejoiningServerRestoresItsCheckpoint) {
  auto s = Shard();
  Outbox out;
  std::vector<uint32_t> idx = {1};
  std::vector<float> val = {2.0f};
  for (int w = 0; w < 2; ++w) s->OnPush(w, 0, idx, val, false, &out);  // round 0: w[1] -= 2
  ShardCheckpointer writer;
  ASSERT_TRUE(writer.Init(Options(false), config_, 0, s.get()).ok());
  ASSERT_TRUE(writer.Write(*s).ok());
  auto restarted = Shard();
  ShardCheckpointer c;
  ASSERT_TRUE(c.Init(Options(true), config_, 0, restarted.get()).ok());
  EXPECT_EQ(c.restored_round(), 1);
  EXPECT_TRUE(restarted->rounds()->resyncing());
  EXPECT_FLOAT_EQ(restarted->weights()[1], -3.0f);
}

// Restarted before the first checkpoint (or without a directory, or with --restore=never): the
// shard resynchronizes from its initial weights as of round 0. The workers' pushes of their
// round (97 here) are held, not refused; when every live worker's is in, round 97 is aggregated
// and its UPDATE is the whole shard.
TEST_F(CheckpointerTest, ARejoiningServerWithoutACheckpointResyncsFromItsInitialWeights) {
  for (const std::string how : {"no file", "no dir", "never"}) {
    auto s = Shard();
    ShardCheckpointer c;
    CheckpointerOptions o = Options(true, how == "never" ? "never" : "auto");
    if (how == "no dir") o.dir.clear();
    ASSERT_TRUE(c.Init(o, config_, 0, s.get()).ok()) << how;
    EXPECT_EQ(c.restored_round(), 0) << how;
    ASSERT_TRUE(s->rounds()->resyncing()) << how;
    Outbox out;
    std::vector<uint32_t> idx = {2};
    std::vector<float> val = {1.0f};
    s->OnPush(0, 97, idx, val, false, &out);
    EXPECT_TRUE(out.empty()) << how;  // held
    s->OnPush(1, 97, idx, val, false, &out);
    ASSERT_EQ(out.size(), 2u) << how;
    for (const Reply& r : out) {
      EXPECT_EQ(r.type, ReplyType::kUpdate);
      EXPECT_EQ(r.round, 97u);
      EXPECT_TRUE(r.dense);
    }
    std::vector<float> want = Initial();
    want[2] -= 1.0f;
    EXPECT_EQ(std::vector<float>(s->weights().begin(), s->weights().end()), want) << how;
  }
}

// A copy takes its state from its primary's snapshot; a shard that awaits worker 0's initial
// weights has none to restart from: neither is touched.
TEST_F(CheckpointerTest, ACopyOrAShardAwaitingItsWeightsIsLeftAsItIs) {
  auto s = Shard();
  ShardCheckpointer c;
  CheckpointerOptions o = Options(true);
  o.copy = true;
  ASSERT_TRUE(c.Init(o, config_, 0, s.get()).ok());
  EXPECT_EQ(c.restored_round(), -1);
  EXPECT_FALSE(s->rounds()->resyncing());

  ShardServerOptions so;
  so.num_workers = 2;
  so.await_initial_weights = true;
  auto awaiting = ShardServer::Create(so, std::vector<float>(kN, 0.0f));
  ASSERT_TRUE(awaiting.ok());
  ShardCheckpointer c2;
  ASSERT_TRUE(c2.Init(Options(true), config_, 0, awaiting->get()).ok());
  EXPECT_EQ(c2.restored_round(), -1);
  EXPECT_TRUE((*awaiting)->awaiting_initial_weights());
}

}  // namespace
}  // namespace sieve
