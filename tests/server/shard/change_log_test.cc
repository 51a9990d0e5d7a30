// ChangeLog against a brute-force oracle: per worker, a map from index to the newest value
// appended since that worker's last take.
#include "server/shard/change_log.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>
#include <vector>

namespace sieve {
namespace {

TEST(ChangeLogTest, TakeIsTheNewestValueOfEveryIndexSinceTheLastTake) {
  const uint32_t workers = 3, n = 500;
  ChangeLog log(workers);
  std::vector<std::map<uint32_t, float>> oracle(workers);
  std::vector<bool> counted(workers, true);
  std::mt19937 rng(5);
  float next_value = 1.0f;  // every appended value distinct, so "newest" is observable
  for (int step = 0; step < 3000; ++step) {
    const uint32_t op = rng() % 10;
    if (op < 6) {  // append a change of 1..40 ascending indices
      std::set<uint32_t> s;
      const uint32_t k = 1 + rng() % 40;
      while (s.size() < k) s.insert(rng() % n);
      std::vector<uint32_t> idx(s.begin(), s.end());
      std::vector<float> val;
      for (uint32_t i : idx) {
        val.push_back(next_value);
        for (auto& m : oracle) m[i] = next_value;
        next_value += 1.0f;
      }
      uint64_t before = log.pending(0);
      log.Append(idx, val);
      EXPECT_EQ(log.pending(0), before + k);
    } else if (op < 9) {  // a worker takes its changes
      const uint32_t w = rng() % workers;
      std::vector<uint32_t> idx = {7};  // stale content must be replaced
      std::vector<float> val = {-1.0f};
      log.Take(w, &idx, &val);
      ASSERT_EQ(idx.size(), oracle[w].size());
      ASSERT_EQ(val.size(), idx.size());
      size_t j = 0;
      for (const auto& [i, v] : oracle[w]) {  // std::map iterates ascending
        ASSERT_EQ(idx[j], i);
        ASSERT_EQ(val[j], v) << "index " << i;
        ++j;
      }
      oracle[w].clear();
      EXPECT_EQ(log.pending(w), 0u);
      log.Trim(counted);
    } else {  // a worker skips (it gets the whole shard)
      const uint32_t w = rng() % workers;
      log.Skip(w);
      oracle[w].clear();
      EXPECT_EQ(log.pending(w), 0u);
      log.Trim(counted);
    }
  }
  // Once everyone has taken everything, nothing is kept.
  for (uint32_t w = 0; w < workers; ++w) log.Skip(w);
  log.Trim(counted);
  EXPECT_EQ(log.records(), 0u);
}

TEST(ChangeLogTest, AWorkerNotCountedHoldsNothingBack) {
  ChangeLog log(2);
  const std::vector<uint32_t> idx = {1, 2};
  const std::vector<float> val = {0.5f, 0.25f};
  log.Append(idx, val);
  log.Append(idx, val);
  std::vector<uint32_t> i;
  std::vector<float> v;
  log.Take(0, &i, &v);
  log.Trim({true, true});
  EXPECT_EQ(log.records(), 2u);  // worker 1 has not taken them
  log.Trim({true, false});       // worker 1 died
  EXPECT_EQ(log.records(), 0u);
  EXPECT_EQ(log.pending(1), 0u);  // what it missed is gone: it rejoins with a dense reply
}

}  // namespace
}  // namespace sieve
