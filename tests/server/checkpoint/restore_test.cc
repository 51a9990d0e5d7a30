// ShardServer::Restore: the BSP resync rules of a restarted shard (shard_server.h) and ASP's dense
// next reply, checked against hand-computed values.
#include <gtest/gtest.h>

#include "server/shard/shard_server.h"

namespace sieve {
namespace {

constexpr uint32_t kN = 8;

std::unique_ptr<ShardServer> Restored(uint32_t workers, uint64_t round, Consistency c,
                                      std::vector<float>* restored) {
  ShardServerOptions o;
  o.num_workers = workers;
  o.consistency = c;
  auto s = ShardServer::Create(o, std::vector<float>(kN, 0.0f));
  EXPECT_TRUE(s.ok());
  restored->clear();
  for (uint32_t i = 0; i < kN; ++i) restored->push_back(1.0f + static_cast<float>(i));
  EXPECT_TRUE((*s)->Restore(round, *restored).ok());
  return std::move(s).value();
}

std::vector<float> Values(const Reply& r) { return r.buffer->values; }

TEST(RestoreTest, WrongLengthIsRefused) {
  ShardServerOptions o;
  auto s = ShardServer::Create(o, std::vector<float>(kN, 0.0f));
  ASSERT_TRUE(s.ok());
  EXPECT_EQ((*s)->Restore(3, std::vector<float>(kN + 1)).code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE((*s)->rounds()->resyncing());
}

TEST(RestoreTest, WorkersAheadOfCheckpointAdoptTheirRoundAndGetADenseReply) {
  std::vector<float> w0;
  auto s = Restored(2, 10, Consistency::kBsp, &w0);
  EXPECT_TRUE(s->rounds()->resyncing());
  const std::vector<uint32_t> i0 = {1, 3}, i1 = {3};
  const std::vector<float> v0 = {2.0f, 4.0f}, v1 = {6.0f};
  Outbox out;
  s->OnPush(0, 17, i0, v0, false, &out);
  EXPECT_TRUE(out.empty());  // held until every live worker pushed
  EXPECT_EQ(s->stats().pushes_applied, 0u);
  s->OnPush(1, 17, i1, v1, false, &out);
  EXPECT_FALSE(s->rounds()->resyncing());
  EXPECT_EQ(s->round(), 18u);
  ASSERT_EQ(out.size(), 2u);
  std::vector<float> expect = w0;
  expect[1] -= 2.0f / 2;
  expect[3] -= (4.0f + 6.0f) / 2;
  for (const Reply& r : out) {
    EXPECT_EQ(r.type, ReplyType::kUpdate);
    EXPECT_EQ(r.round, 17u);
    EXPECT_TRUE(r.dense);  // resynchronizes the whole replica
    EXPECT_EQ(Values(r), expect);
  }
  // The next round is ordinary (sparse).
  out.clear();
  s->OnPush(0, 18, i1, v1, false, &out);
  s->OnPush(1, 18, i1, v1, false, &out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_FALSE(out[0].dense);
  EXPECT_EQ(out[0].buffer->indices, i1);
}

TEST(RestoreTest, AWorkerOneRoundBehindGetsTheRestoredWeightsAndJoinsTheNextRound) {
  std::vector<float> w0;
  auto s = Restored(2, 10, Consistency::kBsp, &w0);
  const std::vector<uint32_t> idx = {2};
  const std::vector<float> a = {4.0f}, b = {8.0f};
  Outbox out;
  s->OnPush(0, 15, idx, a, false, &out);  // worker 0 already finished round 14
  s->OnPush(1, 14, idx, b, false, &out);  // worker 1 never got round 14's reply
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].worker, 1);
  EXPECT_EQ(out[0].round, 14u);
  EXPECT_TRUE(out[0].dense);
  EXPECT_EQ(Values(out[0]), w0);  // its push is dropped: restored weights unchanged
  EXPECT_EQ(s->round(), 15u);
  EXPECT_EQ(s->stats().resync_replies, 1u);
  out.clear();
  s->OnPush(1, 15, idx, b, false, &out);
  ASSERT_EQ(out.size(), 2u);
  std::vector<float> expect = w0;
  expect[2] -= (4.0f + 8.0f) / 2;
  for (const Reply& r : out) {
    EXPECT_EQ(r.round, 15u);
    EXPECT_TRUE(r.dense);
    EXPECT_EQ(Values(r), expect);
  }
}

TEST(RestoreTest, PushesOfTheCheckpointedRoundAreNotAppliedTwice) {
  // The snapshot was taken after round 9 completed (round 10 next); the workers never saw
  // round 9's replies and resend round 9.
  std::vector<float> w0;
  auto s = Restored(2, 10, Consistency::kBsp, &w0);
  const std::vector<uint32_t> idx = {0};
  const std::vector<float> v = {1.0f};
  Outbox out;
  s->OnPush(0, 9, idx, v, false, &out);
  s->OnPush(1, 9, idx, v, false, &out);
  ASSERT_EQ(out.size(), 2u);
  for (const Reply& r : out) {
    EXPECT_EQ(r.round, 9u);
    EXPECT_TRUE(r.dense);
    EXPECT_EQ(Values(r), w0);
  }
  EXPECT_EQ(s->round(), 10u);
  EXPECT_EQ(s->stats().pushes_applied, 0u);
}

TEST(RestoreTest, ResentPushDuringResyncIsHeldOnce) {
  std::vector<float> w0;
  auto s = Restored(2, 0, Consistency::kBsp, &w0);
  const std::vector<uint32_t> idx = {5};
  const std::vector<float> v = {2.0f};
  Outbox out;
  s->OnPush(0, 3, idx, v, false, &out);
  s->OnPush(0, 3, idx, v, false, &out);
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(s->stats().duplicates, 1u);
  s->OnPush(1, 3, {}, {}, false, &out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_FLOAT_EQ(Values(out[0])[5], w0[5] - 2.0f / 2);
  EXPECT_EQ(s->stats().pushes_applied, 2u);
}

TEST(RestoreTest, AWorkerDyingDuringResyncDoesNotBlockIt) {
  std::vector<float> w0;
  auto s = Restored(2, 4, Consistency::kBsp, &w0);
  const std::vector<uint32_t> idx = {5};
  const std::vector<float> v = {2.0f};
  Outbox out;
  s->OnPush(0, 6, idx, v, false, &out);
  EXPECT_TRUE(out.empty());
  s->OnWorkerDead(1, &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].worker, 0);
  EXPECT_EQ(out[0].round, 6u);
  EXPECT_FLOAT_EQ(Values(out[0])[5], w0[5] - 2.0f);
  EXPECT_EQ(s->round(), 7u);
}

TEST(RestoreTest, AspNextReplyIsDense) {
  std::vector<float> w0;
  auto s = Restored(2, 0, Consistency::kAsp, &w0);
  const std::vector<uint32_t> idx = {1};
  const std::vector<float> v = {2.0f};
  Outbox out;
  s->OnPush(0, 30, idx, v, false, &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(out[0].dense);
  std::vector<float> expect = w0;
  expect[1] -= 0.5f * 2.0f;
  EXPECT_EQ(Values(out[0]), expect);
}

}  // namespace
}  // namespace sieve
