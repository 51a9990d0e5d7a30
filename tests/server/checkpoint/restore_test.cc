// ShardServer::Restore: the BSP resync rules of a restarted shard (shard_server.h) and ASP's dense
// next reply, checked against hand-computed values.
#include <gtest/gtest.h>

#include <memory>
#include <span>
#include <vector>

#include "server/shard/shard_server.h"

namespace sieve {
namespace {

constexpr uint32_t kN = 8;

std::vector<float> Values(const Reply& r) { return r.buffer->values; }

class RestoreTest : public ::testing::Test {
 protected:
  // shard_: two workers' shard of kN zeros, restored at `round` to w0_ = 1, 2, ..., kN.
  void Restore(uint64_t round, Consistency c = Consistency::kBsp) {
    ShardServerOptions o;
    o.num_workers = 2;
    o.consistency = c;
    auto s = ShardServer::Create(o, std::vector<float>(kN, 0.0f));
    ASSERT_TRUE(s.ok());
    shard_ = std::move(s).value();
    for (uint32_t i = 0; i < kN; ++i) w0_.push_back(1.0f + static_cast<float>(i));
    ASSERT_TRUE(shard_->Restore(round, w0_).ok());
  }
  // Worker `worker`'s sparse push of `round`, the one pair (index, value); replies into out_.
  void PushOne(int worker, uint64_t round, uint32_t index, float value) {
    shard_->OnPush(worker, round, std::span<const uint32_t>(&index, 1),
                   std::span<const float>(&value, 1), false, &out_);
  }

  std::unique_ptr<ShardServer> shard_;
  std::vector<float> w0_;
  Outbox out_;
};

TEST_F(RestoreTest, WrongLengthIsRefused) {
  ShardServerOptions o;
  auto s = ShardServer::Create(o, std::vector<float>(kN, 0.0f));
  ASSERT_TRUE(s.ok());
  EXPECT_EQ((*s)->Restore(3, std::vector<float>(kN + 1)).code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE((*s)->rounds()->resyncing());
}

TEST_F(RestoreTest, WorkersAheadOfCheckpointAdoptTheirRoundAndGetADenseReply) {
  ASSERT_NO_FATAL_FAILURE(Restore(10));
  EXPECT_TRUE(shard_->rounds()->resyncing());
  const std::vector<uint32_t> i0 = {1, 3};
  const std::vector<float> v0 = {2.0f, 4.0f};
  shard_->OnPush(0, 17, i0, v0, false, &out_);
  EXPECT_TRUE(out_.empty());  // held until every live worker pushed
  EXPECT_EQ(shard_->stats().pushes_applied, 0u);
  PushOne(1, 17, 3, 6.0f);
  EXPECT_FALSE(shard_->rounds()->resyncing());
  EXPECT_EQ(shard_->round(), 18u);
  ASSERT_EQ(out_.size(), 2u);
  std::vector<float> expect = w0_;
  expect[1] -= 2.0f / 2;
  expect[3] -= (4.0f + 6.0f) / 2;
  for (const Reply& r : out_) {
    EXPECT_EQ(r.type, ReplyType::kUpdate);
    EXPECT_EQ(r.round, 17u);
    EXPECT_TRUE(r.dense);  // resynchronizes the whole replica
    EXPECT_EQ(Values(r), expect);
  }
  // The next round is ordinary (sparse).
  out_.clear();
  PushOne(0, 18, 3, 6.0f);
  PushOne(1, 18, 3, 6.0f);
  ASSERT_EQ(out_.size(), 2u);
  EXPECT_FALSE(out_[0].dense);
  EXPECT_EQ(out_[0].buffer->indices, std::vector<uint32_t>{3});
}

TEST_F(RestoreTest, AWorkerOneRoundBehindGetsTheRestoredWeightsAndJoinsTheNextRound) {
  ASSERT_NO_FATAL_FAILURE(Restore(10));
  PushOne(0, 15, 2, 4.0f);  // worker 0 already finished round 14
  PushOne(1, 14, 2, 8.0f);  // worker 1 never got round 14's reply
  ASSERT_EQ(out_.size(), 1u);
  EXPECT_EQ(out_[0].worker, 1);
  EXPECT_EQ(out_[0].round, 14u);
  EXPECT_TRUE(out_[0].dense);
  EXPECT_EQ(Values(out_[0]), w0_);  // its push is dropped: restored weights unchanged
  EXPECT_EQ(shard_->round(), 15u);
  EXPECT_EQ(shard_->stats().resync_replies, 1u);
  out_.clear();
  PushOne(1, 15, 2, 8.0f);
  ASSERT_EQ(out_.size(), 2u);
  std::vector<float> expect = w0_;
  expect[2] -= (4.0f + 8.0f) / 2;
  for (const Reply& r : out_) {
    EXPECT_EQ(r.round, 15u);
    EXPECT_TRUE(r.dense);
    EXPECT_EQ(Values(r), expect);
  }
}

TEST_F(RestoreTest, PushesOfTheCheckpointedRoundAreNotAppliedTwice) {
  // The snapshot was taken after round 9 completed (round 10 next); the workers never saw
  // round 9's replies and resend round 9.
  ASSERT_NO_FATAL_FAILURE(Restore(10));
  PushOne(0, 9, 0, 1.0f);
  PushOne(1, 9, 0, 1.0f);
  ASSERT_EQ(out_.size(), 2u);
  for (const Reply& r : out_) {
    EXPECT_EQ(r.round, 9u);
    EXPECT_TRUE(r.dense);
    EXPECT_EQ(Values(r), w0_);
  }
  EXPECT_EQ(shard_->round(), 10u);
  EXPECT_EQ(shard_->stats().pushes_applied, 0u);
}

TEST_F(RestoreTest, ResentPushDuringResyncIsHeldOnce) {
  ASSERT_NO_FATAL_FAILURE(Restore(0));
  PushOne(0, 3, 5, 2.0f);
  PushOne(0, 3, 5, 2.0f);
  EXPECT_TRUE(out_.empty());
  EXPECT_EQ(shard_->stats().duplicates, 1u);
  shard_->OnPush(1, 3, {}, {}, false, &out_);
  ASSERT_EQ(out_.size(), 2u);
  EXPECT_FLOAT_EQ(Values(out_[0])[5], w0_[5] - 2.0f / 2);
  EXPECT_EQ(shard_->stats().pushes_applied, 2u);
}

TEST_F(RestoreTest, AWorkerDyingDuringResyncDoesNotBlockIt) {
  ASSERT_NO_FATAL_FAILURE(Restore(4));
  PushOne(0, 6, 5, 2.0f);
  EXPECT_TRUE(out_.empty());
  shard_->OnWorkerDead(1, &out_);
  ASSERT_EQ(out_.size(), 1u);
  EXPECT_EQ(out_[0].worker, 0);
  EXPECT_EQ(out_[0].round, 6u);
  EXPECT_FLOAT_EQ(Values(out_[0])[5], w0_[5] - 2.0f);
  EXPECT_EQ(shard_->round(), 7u);
}

TEST_F(RestoreTest, AspNextReplyIsDense) {
  ASSERT_NO_FATAL_FAILURE(Restore(0, Consistency::kAsp));
  PushOne(0, 30, 1, 2.0f);
  ASSERT_EQ(out_.size(), 1u);
  EXPECT_TRUE(out_[0].dense);
  std::vector<float> expect = w0_;
  expect[1] -= 0.5f * 2.0f;
  EXPECT_EQ(Values(out_[0]), expect);
}

}  // namespace
}  // namespace sieve
