#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <numeric>
#include <vector>

#include "worker/data/partition.h"
#include "worker/data/shuffle.h"

namespace sieve {
namespace {

TEST(WorkerDataPartition, CoversEverythingOnceAndIsBalanced) {
  for (int64_t n : {0, 1, 5, 7, 10, 60000, 60001}) {
    for (int world : {1, 2, 3, 4, 7, 16}) {
      std::vector<int> hits(static_cast<size_t>(n), 0);
      int64_t next = 0, smallest = n, largest = 0;
      for (int rank = 0; rank < world; ++rank) {
        StatusOr<IndexRange> r = PartitionRange(n, rank, world);
        ASSERT_TRUE(r.ok());
        EXPECT_EQ(r->lo, next) << "blocks are contiguous in rank order";
        for (int64_t i = r->lo; i < r->hi; ++i) ++hits[i];
        next = r->hi;
        smallest = std::min(smallest, r->size());
        largest = std::max(largest, r->size());
      }
      EXPECT_EQ(next, n);
      EXPECT_LE(largest - smallest, 1) << n << "/" << world;
      EXPECT_TRUE(std::all_of(hits.begin(), hits.end(), [](int h) { return h == 1; }));
    }
  }
}

TEST(WorkerDataPartition, RejectsBadArguments) {
  EXPECT_EQ(PartitionRange(10, 0, 0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(PartitionRange(10, 2, 2).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(PartitionRange(10, -1, 2).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(PartitionRange(-1, 0, 2).status().code(), StatusCode::kInvalidArgument);
}

TEST(WorkerDataShuffle, IsAPermutationOfTheRange) {
  const IndexRange range{100, 1100};
  std::vector<int64_t> order = EpochOrder(range, 1, 0, 0);
  ASSERT_EQ(order.size(), 1000u);
  std::vector<int64_t> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> expected(1000);
  std::iota(expected.begin(), expected.end(), 100);
  EXPECT_EQ(sorted, expected);
  EXPECT_NE(order, expected) << "not shuffled";
  EXPECT_TRUE(EpochOrder(IndexRange{5, 5}, 1, 0, 0).empty());
  EXPECT_EQ(EpochOrder(IndexRange{5, 6}, 1, 0, 0), std::vector<int64_t>{5});
}

TEST(WorkerDataShuffle, DeterministicPerSeedEpochRank) {
  const IndexRange range{0, 500};
  EXPECT_EQ(EpochOrder(range, 3, 4, 1), EpochOrder(range, 3, 4, 1));
  EXPECT_NE(EpochOrder(range, 3, 4, 1), EpochOrder(range, 3, 5, 1));
  EXPECT_NE(EpochOrder(range, 3, 4, 1), EpochOrder(range, 3, 4, 2));
  EXPECT_NE(EpochOrder(range, 3, 4, 1), EpochOrder(range, 4, 4, 1));
}

TEST(WorkerDataShuffle, PositionsAreRoughlyUniform) {
  // Where element 0 of a 4-element range lands, over many epochs: each slot ~1/4.
  std::array<int, 4> counts{};
  constexpr int kTrials = 8000;
  for (int e = 0; e < kTrials; ++e) {
    const std::vector<int64_t> order = EpochOrder(IndexRange{0, 4}, 11, e, 0);
    ++counts[std::find(order.begin(), order.end(), 0) - order.begin()];
  }
  for (int c : counts) EXPECT_NEAR(c, kTrials / 4, 150);
}

}  // namespace
}  // namespace sieve
