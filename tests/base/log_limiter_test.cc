// base/log_limiter.h with a hand-driven clock: bursts, windows, and the count of held-back lines.
#include "base/log_limiter.h"

#include <gtest/gtest.h>

namespace sieve {
namespace {

using std::chrono::seconds;

TEST(LogLimiter, BurstPerIntervalThenTheHeldBackCountIsReportedOnce) {
  LogLimiter limiter(3, seconds(10));
  const auto t0 = LogLimiter::Clock::time_point{} + seconds(100);
  uint64_t held = 99;
  int logged = 0;
  for (int i = 0; i < 1000; ++i) logged += limiter.Allow(t0 + std::chrono::milliseconds(i), &held);
  EXPECT_EQ(logged, 3);
  EXPECT_EQ(limiter.Flush(t0 + seconds(5)), 0u) << "not yet an interval";
  // Next window: the first line carries the 997 held back, the next ones nothing.
  ASSERT_TRUE(limiter.Allow(t0 + seconds(11), &held));
  EXPECT_EQ(held, 997u);
  ASSERT_TRUE(limiter.Allow(t0 + seconds(11), &held));
  EXPECT_EQ(held, 0u);
  ASSERT_TRUE(limiter.Allow(t0 + seconds(12), &held));
  EXPECT_FALSE(limiter.Allow(t0 + seconds(12), &held));
  EXPECT_FALSE(limiter.Allow(t0 + seconds(13), &held));
  // Nothing more comes: a periodic flush reports the 2 once the interval has passed.
  EXPECT_EQ(limiter.Flush(t0 + seconds(15)), 0u);
  EXPECT_EQ(limiter.Flush(t0 + seconds(22)), 2u);
  EXPECT_EQ(limiter.Flush(t0 + seconds(40)), 0u);
}

}  // namespace
}  // namespace sieve
