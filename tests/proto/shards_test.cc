// Properties of the balanced contiguous shard split over many (D, S), and the split of sorted
// indices by shard into shard-relative slices.
#include "proto/shards.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

namespace sieve {
namespace {

// Owner of `i` by a linear scan, independent of ShardOf's binary search.
int BruteOwner(const std::vector<ShardRange>& ranges, uint64_t i) {
  int owner = -1;
  for (size_t s = 0; s < ranges.size(); ++s) {
    if (ranges[s].lo <= i && i < ranges[s].hi) {
      EXPECT_EQ(owner, -1) << "index " << i << " owned twice";
      owner = static_cast<int>(s);
    }
  }
  return owner;
}

void CheckSplit(uint64_t d, uint32_t s, std::mt19937_64& rng) {
  SCOPED_TRACE(::testing::Message() << "D=" << d << " S=" << s);
  auto split = SplitShards(d, s);
  ASSERT_TRUE(split.ok()) << split.status().ToString();
  const std::vector<ShardRange>& r = *split;
  ASSERT_EQ(r.size(), s);
  // Contiguous from 0 to D: every index is owned, and by exactly one shard.
  ASSERT_EQ(r.front().lo, 0u);
  ASSERT_EQ(r.back().hi, d);
  uint64_t min_size = d, max_size = 0, total = 0;
  for (size_t k = 0; k < r.size(); ++k) {
    ASSERT_LT(r[k].lo, r[k].hi) << "empty shard " << k;
    if (k > 0) {
      ASSERT_EQ(r[k].lo, r[k - 1].hi);
      ASSERT_LE(r[k].size(), r[k - 1].size());  // the larger shards come first
    }
    min_size = std::min(min_size, r[k].size());
    max_size = std::max(max_size, r[k].size());
    total += r[k].size();
  }
  ASSERT_EQ(total, d);
  ASSERT_LE(max_size - min_size, 1u);
  ASSERT_EQ(min_size, d / s);
  // ShardOf agrees with a scan: on every index for small D, else on the boundaries and samples.
  std::vector<uint64_t> probe;
  if (d <= 4096) {
    for (uint64_t i = 0; i < d; ++i) probe.push_back(i);
  } else {
    for (const ShardRange& x : r) {
      probe.push_back(x.lo);
      probe.push_back(x.hi - 1);
    }
    for (int k = 0; k < 300; ++k) probe.push_back(rng() % d);
  }
  for (uint64_t i : probe) {
    const int owner = BruteOwner(r, i);
    ASSERT_GE(owner, 0) << "index " << i << " unowned";
    ASSERT_EQ(ShardOf(r, i), owner) << "index " << i;
  }
  // Outside [0, D): nobody.
  EXPECT_EQ(ShardOf(r, d), -1);
  EXPECT_EQ(ShardOf(r, d + 1), -1);
  EXPECT_EQ(ShardOf(r, ~uint64_t{0}), -1);
}

TEST(ProtoShardsTest, SplitPropertiesOverManySizes) {
  std::mt19937_64 rng(42);
  std::vector<uint64_t> sizes = {1,    2,    3,     5,     7,     10,     13,     31,     63,
                                 64,   65,   97,    100,   127,   128,    1000,   1009,   4096,
                                 4099, 7919, 65536, 65537, 99991, 199210, 524287, 999983, 1000000};
  for (int k = 0; k < 20; ++k) sizes.push_back(1 + rng() % 1000000);
  int checked = 0;
  for (uint64_t d : sizes) {
    for (uint32_t s = 1; s <= 64; ++s) {
      if (d < s) continue;
      ASSERT_NO_FATAL_FAILURE(CheckSplit(d, s, rng));
      ++checked;
    }
  }
  EXPECT_GT(checked, 2500);
}

TEST(ProtoShardsTest, KnownSplit) {
  // 10 over 3: the first D mod S shards get one extra index.
  auto r = SplitShards(10, 3);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, (std::vector<ShardRange>{{0, 4}, {4, 7}, {7, 10}}));
  // FNN-3's 199,210 parameters over 4 servers.
  auto f = SplitShards(199210, 4);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(
      *f, (std::vector<ShardRange>{{0, 49803}, {49803, 99606}, {99606, 149408}, {149408, 199210}}));
  // One shard per index.
  auto one = SplitShards(5, 5);
  ASSERT_TRUE(one.ok());
  for (uint32_t s = 0; s < 5; ++s) EXPECT_EQ((*one)[s], (ShardRange{s, s + 1u}));
}

TEST(ProtoShardsTest, RejectsImpossibleSplits) {
  auto zero = SplitShards(100, 0);
  ASSERT_FALSE(zero.ok());
  EXPECT_EQ(zero.status().code(), StatusCode::kInvalidArgument);
  for (auto [d, s] : std::vector<std::pair<uint64_t, uint32_t>>{{0, 1}, {1, 2}, {3, 4}, {63, 64}}) {
    auto r = SplitShards(d, s);
    ASSERT_FALSE(r.ok()) << "D=" << d << " S=" << s;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  }
  auto none = SplitShards(0, 0);
  EXPECT_FALSE(none.ok());
}

TEST(ProtoShardsTest, ShardLengthLimitedByUint32Indices) {
  const uint64_t two32 = uint64_t{1} << 32;
  // 2^33 parameters on one server: shard-relative indices would not fit uint32.
  auto one = SplitShards(uint64_t{1} << 33, 1);
  ASSERT_FALSE(one.ok());
  EXPECT_EQ(one.status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(SplitShards(two32 + 1, 1).ok());
  EXPECT_FALSE(SplitShards(2 * two32 + 1, 2).ok());  // one shard would hold 2^32 + 1
  // Over 4 servers each shard holds 2^31: fine.
  auto four = SplitShards(uint64_t{1} << 33, 4);
  ASSERT_TRUE(four.ok()) << four.status().ToString();
  ASSERT_EQ(four->size(), 4u);
  for (uint32_t s = 0; s < 4; ++s) {
    EXPECT_EQ((*four)[s].size(), uint64_t{1} << 31);
    EXPECT_EQ((*four)[s].lo, uint64_t{s} << 31);
  }
  EXPECT_EQ(ShardOf(*four, (uint64_t{1} << 33) - 1), 3);
  EXPECT_EQ(ShardOf(*four, (uint64_t{3} << 31) - 1), 2);
  EXPECT_EQ(ShardOf(*four, uint64_t{1} << 33), -1);
  // The largest index of every shard is below 2^32, so it is representable on the wire.
  for (const ShardRange& r : *four) EXPECT_LE(r.size() - 1, 0xFFFFFFFFull);
}

TEST(ProtoShardsTest, ShardOfOnEmptyTable) {
  EXPECT_EQ(ShardOf({}, 0), -1);
  EXPECT_EQ(ShardOf({}, 12345), -1);
}

TEST(ProtoShardSplit, EveryIndexLandsInExactlyOneShard) {
  std::mt19937_64 rng(7);
  for (uint32_t shards : {1u, 2u, 3u, 7u, 64u}) {
    const uint64_t d = 100003;
    auto ranges = SplitShards(d, shards);
    ASSERT_TRUE(ranges.ok());
    std::vector<uint64_t> bounds = {0};
    for (const ShardRange& r : *ranges) bounds.push_back(r.hi);
    ASSERT_EQ(bounds.back(), d);
    std::vector<uint32_t> idx;
    for (uint64_t i = 0; i < d; ++i) {
      if (rng() % 50 == 0) idx.push_back(static_cast<uint32_t>(i));
    }
    idx.push_back(static_cast<uint32_t>(d - 1));
    std::vector<size_t> off;
    std::vector<uint32_t> rel;
    ASSERT_TRUE(SplitByShard(idx, bounds, &off, &rel).ok());
    ASSERT_EQ(off.size(), shards + 1u);
    EXPECT_EQ(off.front(), 0u);
    EXPECT_EQ(off.back(), idx.size());
    for (uint32_t s = 0; s < shards; ++s) {
      for (size_t j = off[s]; j < off[s + 1]; ++j) {
        EXPECT_LT(rel[j], bounds[s + 1] - bounds[s]);
        EXPECT_EQ(rel[j] + bounds[s], idx[j]);
      }
    }
  }
}

TEST(ProtoShardSplit, EmptyShardsAndErrors) {
  const std::vector<uint64_t> bounds = {0, 10, 10, 20};
  const std::vector<uint32_t> idx = {0, 9, 10, 19};
  std::vector<size_t> off;
  std::vector<uint32_t> rel;
  ASSERT_TRUE(SplitByShard(idx, bounds, &off, &rel).ok());
  EXPECT_EQ(off, (std::vector<size_t>{0, 2, 2, 4}));
  EXPECT_EQ(rel, (std::vector<uint32_t>{0, 9, 0, 9}));
  EXPECT_FALSE(SplitByShard(std::vector<uint32_t>{3, 3}, bounds, &off, &rel).ok());
  EXPECT_FALSE(SplitByShard(std::vector<uint32_t>{5, 2}, bounds, &off, &rel).ok());
  EXPECT_EQ(SplitByShard(std::vector<uint32_t>{20}, bounds, &off, &rel).code(),
            StatusCode::kOutOfRange);
  EXPECT_FALSE(SplitByShard(idx, std::vector<uint64_t>{1, 20}, &off, &rel).ok());
  EXPECT_FALSE(SplitByShard(idx, std::vector<uint64_t>{0, 20, 10}, &off, &rel).ok());
}

}  // namespace
}  // namespace sieve
