#include "worker/trainer/round_ledger.h"

#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <limits>

namespace sieve {
namespace {

TEST(WorkerTrainerRoundLedger, HintsKeepTheLastTwoFinitePositiveThresholds) {
  ThresholdHints h;
  EXPECT_EQ(h.prev(), 0.0f);
  EXPECT_EQ(h.older(), 0.0f);
  h.Observe(0.5f);
  EXPECT_EQ(h.prev(), 0.5f);
  EXPECT_EQ(h.older(), 0.0f);
  // NaN, ±inf, 0 and negative thresholds leave the hints as they are.
  for (float ignored :
       {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
        -std::numeric_limits<float>::infinity(), 0.0f, -0.0f, -1.0f}) {
    h.Observe(ignored);
    EXPECT_EQ(h.prev(), 0.5f) << ignored;
    EXPECT_EQ(h.older(), 0.0f) << ignored;
  }
  h.Observe(0.25f);
  EXPECT_EQ(h.prev(), 0.25f);
  EXPECT_EQ(h.older(), 0.5f);
  h.Observe(std::numeric_limits<float>::denorm_min());  // finite and > 0: kept
  EXPECT_EQ(h.prev(), std::numeric_limits<float>::denorm_min());
  EXPECT_EQ(h.older(), 0.25f);

  SelectOptions so;
  so.seed = 7;
  h.Fill(&so);
  EXPECT_EQ(so.prev_threshold, std::numeric_limits<float>::denorm_min());
  EXPECT_EQ(so.older_threshold, 0.25f);
  EXPECT_EQ(so.seed, 7u);  // the rest untouched

  h.Set(3.0f, 2.0f);  // a checkpoint's hints, as they were
  EXPECT_EQ(h.prev(), 3.0f);
  EXPECT_EQ(h.older(), 2.0f);
}

TEST(WorkerTrainerRoundLedger, CountsRoundsSkipsAndMissedValues) {
  RoundLedger l;
  Selection sel;
  sel.values = {1.0f, -0.5f, 0.25f};
  l.AfterSelect(sel);
  EXPECT_EQ(l.pushed_sum(), 0.75);

  RoundStats a;  // a plain round
  a.bytes_up = 100;
  a.bytes_down = 40;
  a.pairs_up = 3;
  EXPECT_EQ(l.AfterPushPull(a), 1u);

  RoundStats b;  // two rounds closed without this worker, one shard missed
  b.bytes_up = 50;
  b.bytes_down = 60;
  b.pairs_up = 2;
  b.rounds_skipped = 2;
  b.missed_shards = 1;
  b.missed_indices = {4, 9};
  b.missed_values = {0.5f, -2.0f};
  EXPECT_EQ(l.AfterPushPull(b), 3u);

  RoundStats c;  // three skipped, capped at one (the caller's run ends)
  c.rounds_skipped = 3;
  c.missed_shards = 2;
  c.missed_values = {1.5f};
  EXPECT_EQ(l.AfterPushPull(c, 1), 2u);

  l.AddTransfer(8, 12);
  EXPECT_EQ(l.rounds(), 1u + 3u + 2u);
  EXPECT_EQ(l.skipped_rounds(), 2u + 1u);
  EXPECT_EQ(l.missed_slices(), 3u);
  EXPECT_EQ(l.returned_sum(), 0.5 - 2.0 + 1.5);
  EXPECT_EQ(l.bytes_up(), 100u + 50u + 8u);
  EXPECT_EQ(l.bytes_down(), 40u + 60u + 12u);
  EXPECT_EQ(l.pairs_up(), 5u);
  EXPECT_EQ(l.pushed_sum(), 0.75);
}

TEST(WorkerTrainerRoundLedger, SumsValueByValueInFp64) {
  // The running total takes each value in turn (as sieve-worker always summed), not per round:
  // 1e16 + 1 + 1 in fp64 loses both ones, where the round's own sum (2) would not be lost.
  RoundLedger l;
  Selection big;
  big.values = {1e16f};
  l.AfterSelect(big);
  Selection ones;
  ones.values = {1.0f, 1.0f};
  l.AfterSelect(ones);
  double want = 0.0;
  for (float v : {1e16f, 1.0f, 1.0f}) want += v;
  EXPECT_EQ(std::bit_cast<uint64_t>(l.pushed_sum()), std::bit_cast<uint64_t>(want));

  RoundStats st;
  st.missed_shards = 1;
  st.missed_values = {1e16f, 1.0f, 1.0f};
  l.AfterPushPull(st);
  EXPECT_EQ(std::bit_cast<uint64_t>(l.returned_sum()), std::bit_cast<uint64_t>(want));
  // Values without a missed shard are not counted.
  RoundStats none;
  none.missed_values = {5.0f};
  l.AfterPushPull(none);
  EXPECT_EQ(std::bit_cast<uint64_t>(l.returned_sum()), std::bit_cast<uint64_t>(want));
}

}  // namespace
}  // namespace sieve
