// RaiseFdLimit: the soft limit on open files goes up to the hard limit (or the cap), never down.
#include "base/fd_limit.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <algorithm>

namespace sieve {
namespace {

TEST(FdLimit, SoftLimitRisesToTheHardLimitOrTheCap) {
  rlimit before{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &before), 0);
  // A lower soft limit first, as a default shell gives (1024), so that there is something to raise.
  rlimit low = before;
  if (low.rlim_max == RLIM_INFINITY || low.rlim_max > 1024) low.rlim_cur = 512;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  const uint64_t cap = 4096;
  auto raised = RaiseFdLimit(cap);
  ASSERT_TRUE(raised.ok()) << raised.status().ToString();
  rlimit after{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &after), 0);
  const uint64_t want = low.rlim_max == RLIM_INFINITY ? cap : std::min<uint64_t>(low.rlim_max, cap);
  EXPECT_EQ(after.rlim_cur, want);
  EXPECT_EQ(*raised, want);
  // Never lowered: a smaller cap leaves the limit as it is.
  auto again = RaiseFdLimit(16);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, want);
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &before), 0);
}

}  // namespace
}  // namespace sieve
