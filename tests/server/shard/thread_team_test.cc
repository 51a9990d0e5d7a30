// ThreadTeam (base/thread_team.h), the shard server's fork/join team: coverage of every index
// exactly once, which thread runs what, and reuse across many regions. Part of
// server_shard_test, so scripts/tsan runs it under ThreadSanitizer.
#include "base/thread_team.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace sieve {
namespace {

TEST(ThreadTeamTest, ParallelForCoversEveryIndexExactlyOnceInThreadOrder) {
  for (uint32_t threads : {1u, 2u, 3u, 4u, 8u}) {
    ThreadTeam team(threads);
    EXPECT_EQ(team.size(), threads);
    for (size_t n : {size_t{0}, size_t{1}, size_t{2}, size_t{3}, size_t{7}, size_t{100},
                     size_t{1000}, size_t{12345}}) {
      for (size_t grain : {size_t{0}, size_t{1}, size_t{3}, size_t{100}}) {
        std::vector<std::atomic<int>> hits(n);
        const uint32_t used = team.ThreadsFor(n, grain);
        EXPECT_GE(used, 1u);
        EXPECT_LE(used, threads);
        std::vector<size_t> begins(threads, SIZE_MAX), ends(threads, SIZE_MAX);
        std::atomic<uint32_t> calls{0};
        team.ParallelFor(n, grain, [&](uint32_t t, size_t begin, size_t end) {
          calls.fetch_add(1);
          begins[t] = begin;  // each t is written by its own thread only
          ends[t] = end;
          for (size_t i = begin; i < end; ++i) hits[i].fetch_add(1);
        });
        EXPECT_EQ(calls.load(), used) << "n=" << n << " grain=" << grain;
        for (size_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "index " << i;
        // Contiguous ranges in thread order, from 0 to n.
        size_t at = 0;
        for (uint32_t t = 0; t < used; ++t) {
          EXPECT_EQ(begins[t], at);
          EXPECT_LE(begins[t], ends[t]);
          at = ends[t];
        }
        EXPECT_EQ(at, n);
        for (uint32_t t = used; t < threads; ++t) EXPECT_EQ(begins[t], SIZE_MAX);
      }
    }
  }
}

TEST(ThreadTeamTest, ThreadZeroIsTheCallerAndEveryOtherIndexItsOwnHelper) {
  ThreadTeam team(4);
  const std::thread::id caller = std::this_thread::get_id();
  for (uint32_t count : {0u, 1u, 2u, 3u, 4u, 9u}) {
    std::mutex mu;
    std::vector<std::thread::id> ran(4);
    std::vector<int> calls(4, 0);
    team.Run(count, [&](uint32_t t) {
      std::lock_guard<std::mutex> lock(mu);
      ran[t] = std::this_thread::get_id();
      ++calls[t];
    });
    const uint32_t used = std::clamp<uint32_t>(count, 1, 4);  // clamped to [1, size()]
    std::set<std::thread::id> distinct;
    for (uint32_t t = 0; t < 4; ++t) {
      EXPECT_EQ(calls[t], t < used ? 1 : 0) << "count " << count << " t " << t;
      if (t < used) distinct.insert(ran[t]);
    }
    EXPECT_EQ(ran[0], caller);
    EXPECT_EQ(distinct.size(), used);
  }
}

// Many regions in a row on one team: plain (non-atomic) data written by the caller before a
// region is read by the helpers, and what they write is read after Run returns; ThreadSanitizer
// reports a missing happens-before, and a lost or repeated region changes the sums.
TEST(ThreadTeamTest, ReusedAcrossManyRegionsWithoutLosingOrRepeatingOne) {
  ThreadTeam team(3);
  std::vector<uint64_t> input(3000), output(3000, 0);
  uint64_t expected = 0, got = 0, parallel = 0;
  for (int region = 0; region < 5000; ++region) {
    for (size_t i = 0; i < input.size(); ++i) input[i] = static_cast<uint64_t>(region) + i;
    const size_t n = 1 + static_cast<size_t>(region) % input.size();
    parallel += team.ThreadsFor(n, 1) > 1 ? 1 : 0;
    team.ParallelFor(n, 1, [&](uint32_t, size_t begin, size_t end) {
      for (size_t i = begin; i < end; ++i) output[i] = input[i] * 2;
    });
    for (size_t i = 0; i < n; ++i) {
      got += output[i];
      expected += (static_cast<uint64_t>(region) + i) * 2;
    }
  }
  EXPECT_EQ(got, expected);
  EXPECT_EQ(team.parallel_regions(), parallel);  // n = 1 runs on the caller alone
  EXPECT_GT(parallel, 4900u);
}

TEST(ThreadTeamTest, StartsAndStopsWithoutEverRunning) {
  for (int i = 0; i < 50; ++i) {
    ThreadTeam team(1 + static_cast<uint32_t>(i) % 5);
    EXPECT_EQ(team.parallel_regions(), 0u);
  }
  ThreadTeam one(1);  // no helper: everything on the caller
  const std::thread::id caller = std::this_thread::get_id();
  one.Run(4, [&](uint32_t t) {
    EXPECT_EQ(t, 0u);
    EXPECT_EQ(std::this_thread::get_id(), caller);
  });
  EXPECT_EQ(one.parallel_regions(), 0u);
}

}  // namespace
}  // namespace sieve
