// --staleness_lr (ShardServerOptions::staleness_lr, server/shard/consistency.h): a push of staleness τ,
// the pushes the shard applied since it built the reply the pushing worker last got, is applied
// with scale / τ when τ >= 1. The τ of each push below is derived by hand from that definition
// (closed form), and each push lands on an index of its own, so every weight shows the scale its
// push got, compared bitwise with the same float expression.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "server/shard/shard_server.h"

namespace sieve {
namespace {

struct Step {
  int worker;
  uint64_t round;
  uint64_t tau;  // by the definition, from the order of pushes and replies
};

constexpr float kValue = 6.0f;

std::unique_ptr<ShardServer> Make(Consistency c, int staleness, StalenessLr lr, float scale,
                                  uint32_t workers, size_t n) {
  auto s = ShardServer::Create({.num_workers = workers,
                                .consistency = c,
                                .staleness = staleness,
                                .async_scale = scale,
                                .staleness_lr = lr},
                               std::vector<float>(n, 0.0f));
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(s).value() : nullptr;
}

// Runs `steps` (push j writes kValue at index j) and checks every weight against scale_j · kValue
// with scale_j = scale / τ_j (inverse, τ_j >= 1) or scale, and the summary's staleness counts.
void RunAndCheck(ShardServer* s, const std::vector<Step>& steps, StalenessLr lr, float scale) {
  uint64_t sum = 0, max = 0;
  for (size_t j = 0; j < steps.size(); ++j) {
    const uint32_t idx[] = {static_cast<uint32_t>(j)};
    const float val[] = {kValue};
    Outbox out;
    s->OnPush(steps[j].worker, steps[j].round, idx, val, /*dense=*/false, &out);
    sum += steps[j].tau;
    max = std::max(max, steps[j].tau);
  }
  for (size_t j = 0; j < steps.size(); ++j) {
    const uint64_t tau = steps[j].tau;
    const float step_scale =
        lr == StalenessLr::kInverse && tau >= 1 ? scale / static_cast<float>(tau) : scale;
    EXPECT_EQ(s->weights()[j], 0.0f - step_scale * kValue) << "push " << j << ", tau " << tau;
  }
  EXPECT_EQ(s->stats().push_staleness_sum, sum);
  EXPECT_EQ(s->stats().max_push_staleness, max);
  EXPECT_EQ(s->stats().pushes_applied, steps.size());
}

// ASP answers each push at once, so a worker's reply is built right after its own push.
const std::vector<Step> kAspSteps = {
    {0, 0, 0},  // nothing applied yet
    {1, 0, 1},  // worker 0's push since worker 1's start
    {2, 0, 2},  // workers 0 and 1
    {0, 1, 2},  // workers 1 and 2 since worker 0's reply
    {0, 2, 0},  // its own previous push was in its reply
    {1, 1, 3},  // pushes 2, 3 and 4 since worker 1's reply
};

TEST(StalenessLrTest, AspInverseAppliesEachPushWithScaleOverItsStaleness) {
  for (float scale : {1.0f, 0.25f}) {
    auto s = Make(Consistency::kAsp, 0, StalenessLr::kInverse, scale, 3, kAspSteps.size());
    ASSERT_NE(s, nullptr);
    RunAndCheck(s.get(), kAspSteps, StalenessLr::kInverse, scale);
  }
}

TEST(StalenessLrTest, NoneAppliesEveryPushWithTheScaleAndStillCountsStaleness) {
  auto s = Make(Consistency::kAsp, 0, StalenessLr::kNone, 0.5f, 3, kAspSteps.size());
  ASSERT_NE(s, nullptr);
  RunAndCheck(s.get(), kAspSteps, StalenessLr::kNone, 0.5f);
}

// SSP(0) holds each reply until every worker pushed the round: the replies of a round are all
// built after its last push, so τ counts from there, not from the worker's own push.
TEST(StalenessLrTest, SspCountsFromWhenAHeldReplyIsReleased) {
  const std::vector<Step> steps = {
      {0, 0, 0}, {1, 0, 1}, {2, 0, 2},  // round 0: the replies wait for worker 2
      {0, 1, 0}, {1, 1, 1}, {2, 1, 2},  // round 1: every reply built after push 2
  };
  auto s = Make(Consistency::kSsp, 0, StalenessLr::kInverse, 1.0f, 3, steps.size());
  ASSERT_NE(s, nullptr);
  RunAndCheck(s.get(), steps, StalenessLr::kInverse, 1.0f);
}

TEST(StalenessLrTest, BspRefusesAStalenessScale) {
  ShardServerOptions o;
  o.consistency = Consistency::kBsp;
  o.staleness_lr = StalenessLr::kInverse;
  auto s = ShardServer::Create(o, std::vector<float>(4, 0.0f));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.status().message(), "staleness_lr applies to asp and ssp, not bsp");
}

TEST(StalenessLrTest, ParsesItsNames) {
  EXPECT_EQ(*ParseStalenessLr("none"), StalenessLr::kNone);
  EXPECT_EQ(*ParseStalenessLr("inverse"), StalenessLr::kInverse);
  EXPECT_FALSE(ParseStalenessLr("Inverse").ok());
}

}  // namespace
}  // namespace sieve
