// RestartBackoff against its closed form: a run shorter than healthy_run waits
// min(first · 2^(k-1), max) for the k-th short run in a row; a healthy run restarts at once and
// resets the count; names are counted apart.
#include "deploy/local/restart_backoff.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace sieve {
namespace {

using std::chrono::milliseconds;

TEST(RestartBackoff, ShortRunsDoubleTheDelayUpToTheCap) {
  RestartBackoff b({milliseconds(10000), milliseconds(500), milliseconds(8000)});
  for (int k = 1; k <= 8; ++k) {
    const int64_t expected = std::min<int64_t>(500LL << (k - 1), 8000);
    EXPECT_EQ(b.Failed("server 1", milliseconds(100)).count(), expected) << "short run " << k;
  }
}

TEST(RestartBackoff, AHealthyRunRestartsAtOnceAndResetsTheCount) {
  RestartBackoff b({milliseconds(10000), milliseconds(500), milliseconds(8000)});
  EXPECT_EQ(b.Failed("worker 0", milliseconds(0)).count(), 500);
  EXPECT_EQ(b.Failed("worker 0", milliseconds(9999)).count(), 1000);
  EXPECT_EQ(b.Failed("worker 0", milliseconds(10000)).count(), 0);
  EXPECT_EQ(b.Failed("worker 0", milliseconds(10)).count(), 500);
}

TEST(RestartBackoff, NamesAreCountedApart) {
  RestartBackoff b({milliseconds(10000), milliseconds(500), milliseconds(8000)});
  EXPECT_EQ(b.Failed("server 0", milliseconds(1)).count(), 500);
  EXPECT_EQ(b.Failed("server 0", milliseconds(1)).count(), 1000);
  EXPECT_EQ(b.Failed("server 1", milliseconds(1)).count(), 500);
  EXPECT_EQ(b.Failed("server 0", milliseconds(1)).count(), 2000);
}

}  // namespace
}  // namespace sieve
