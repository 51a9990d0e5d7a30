// LoopStall against its closed form: of each gap between passes, the part beyond `expected`.
#include "net/loop_stall.h"

#include <gtest/gtest.h>

namespace sieve {
namespace {

using std::chrono::milliseconds;

TEST(LoopStallTest, CountsOnlyTheTimeBeyondTheExpectedPass) {
  LoopStall stall(milliseconds(300));
  const LoopStall::Clock::time_point t0{};
  EXPECT_EQ(stall.Pass(t0), LoopStall::Clock::duration::zero());  // the first pass
  EXPECT_EQ(stall.Pass(t0 + milliseconds(100)), LoopStall::Clock::duration::zero());
  EXPECT_EQ(stall.Pass(t0 + milliseconds(400)), LoopStall::Clock::duration::zero());  // 300: due
  EXPECT_EQ(stall.Pass(t0 + milliseconds(2900)), milliseconds(2200));  // 2500 stalled, 300 due
  EXPECT_EQ(stall.Pass(t0 + milliseconds(2900)), LoopStall::Clock::duration::zero());
  EXPECT_EQ(stall.Pass(t0 + milliseconds(2800)), LoopStall::Clock::duration::zero());  // backwards
  EXPECT_EQ(stall.Pass(t0 + milliseconds(3101)), milliseconds(1));
}

// A loop stalled for good (every pass 2 s late) still sees `expected` of time pass per pass, so a
// peer silent for good is still found: a 1 s timeout after 4 such passes.
TEST(LoopStallTest, APermanentlySlowLoopStillSeesTimePass) {
  LoopStall stall(milliseconds(300));
  LoopStall::Clock::time_point now{}, last_seen{};
  (void)stall.Pass(now);
  int passes = 0;
  while (now - last_seen <= milliseconds(1000)) {
    now += milliseconds(2300);
    last_seen += stall.Pass(now);
    ++passes;
  }
  EXPECT_EQ(passes, 4);
}

}  // namespace
}  // namespace sieve
