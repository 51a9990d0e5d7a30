// BSP with backup workers (ShardServerOptions::backup_workers, server/shard/bsp_shard.h): a round
// completes at max(1, live - b) pushes and every live worker gets its UPDATE; a late push is
// merged into the round being aggregated, once (late_pushes kApply, the default), or refused
// with nothing changed and the UPDATE flagged push_missed (kReturn); misses are counted per
// worker. The reference for the weights is the closed form w = w0 - Σ pushes / n of the pushes a
// round aggregated, computed here in the same float order.
#include <gtest/gtest.h>

#include <algorithm>
#include <initializer_list>
#include <map>
#include <memory>
#include <random>
#include <vector>

#include "server/shard/bsp_shard.h"
#include "server/shard/shard_server.h"

namespace sieve {
namespace {

constexpr size_t kShard = 8;

std::unique_ptr<ShardServer> Make(uint32_t workers, uint32_t backups, uint64_t part_pairs = 0,
                                  LatePushes late = LatePushes::kReturn) {
  ShardServerOptions o;
  o.num_workers = workers;
  o.backup_workers = backups;
  o.late_pushes = late;
  o.reply_part_pairs = part_pairs;
  auto s = ShardServer::Create(o, std::vector<float>(kShard, 1.0f));
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(s).value() : nullptr;
}

// Worker w's push: value (w + 1) at indices w and w + 4.
void PushOf(ShardServer* s, int w, uint64_t round, Outbox* out) {
  const uint32_t idx[] = {static_cast<uint32_t>(w), static_cast<uint32_t>(w + 4)};
  const float val[] = {static_cast<float>(w + 1), static_cast<float>(w + 1)};
  s->OnPush(w, round, idx, val, /*dense=*/false, out);
}

void PushEach(ShardServer* s, std::initializer_list<int> workers, uint64_t round, Outbox* out) {
  for (int w : workers) PushOf(s, w, round, out);
}

// The UPDATEs of `out` by worker, and whether each was flagged.
std::map<int, bool> Updates(const Outbox& out, uint64_t round) {
  std::map<int, bool> m;
  for (const Reply& r : out) {
    if (r.type == ReplyType::kUpdate && r.round == round) m[r.worker] = r.push_missed;
  }
  return m;
}

TEST(BackupWorkersTest, ARoundClosesAtAllButBPushesAndEveryWorkerGetsItsUpdate) {
  auto s = Make(4, 1);
  ASSERT_NE(s, nullptr);
  Outbox out;
  PushEach(s.get(), {0, 2}, 0, &out);
  EXPECT_TRUE(out.empty()) << "2 of 4 pushes: the round waits";
  PushOf(s.get(), 3, 0, &out);
  EXPECT_EQ(s->round(), 1u);
  const std::map<int, bool> want = {{0, false}, {1, true}, {2, false}, {3, false}};
  EXPECT_EQ(Updates(out, 0), want);
  // w = 1 - (w+1)/3 at the pushed indices of workers 0, 2 and 3; worker 1's stay 1.
  for (int w : {0, 2, 3}) {
    const float expect = 1.0f - static_cast<float>(w + 1) / 3.0f;
    EXPECT_EQ(s->weights()[w], expect);
    EXPECT_EQ(s->weights()[w + 4], expect);
  }
  EXPECT_EQ(s->weights()[1], 1.0f);
  EXPECT_EQ(s->stats().missed, 1u);
  EXPECT_EQ(s->stats().pushed_sum, 2.0 * (1 + 3 + 4));
}

TEST(BackupWorkersTest, ALatePushIsRefusedAndChangesNothing) {
  auto s = Make(3, 1);
  ASSERT_NE(s, nullptr);
  Outbox out;
  PushEach(s.get(), {0, 1}, 0, &out);
  ASSERT_EQ(s->round(), 1u);
  const std::vector<float> before(s->weights().begin(), s->weights().end());
  const ShardServerStats stats = s->stats();
  out.clear();
  PushOf(s.get(), 2, 0, &out);  // worker 2's push of the closed round
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].type, ReplyType::kError);
  EXPECT_EQ(out[0].code, pb::ERROR_LATE_PUSH);
  EXPECT_EQ(out[0].worker, 2);
  EXPECT_EQ(std::vector<float>(s->weights().begin(), s->weights().end()), before);
  EXPECT_EQ(s->stats().pushed_sum, stats.pushed_sum);
  EXPECT_EQ(s->stats().pushes_applied, stats.pushes_applied);
  EXPECT_EQ(s->stats().late_pushes, 1u);
  // A counted worker's resend of the closed round is still answered with its UPDATE.
  out.clear();
  PushOf(s.get(), 0, 0, &out);
  EXPECT_EQ(Updates(out, 0), (std::map<int, bool>{{0, false}}));
  EXPECT_EQ(s->stats().duplicates, 1u);
  // Worker 2 moves on to round 1 and is counted there.
  out.clear();
  PushEach(s.get(), {2, 1}, 1, &out);
  EXPECT_EQ(Updates(out, 1), (std::map<int, bool>{{0, true}, {1, false}, {2, false}}));
}

TEST(BackupWorkersTest, MissesAreCountedPerWorkerWithTheLongestRun) {
  auto s = Make(3, 1);
  ASSERT_NE(s, nullptr);
  Outbox out;
  // Worker 2 misses rounds 0-2, 4-5 and 7-8; worker 0 misses round 3, worker 1 round 6.
  for (uint64_t r = 0; r < 9; ++r) {
    if (r == 3) {
      PushOf(s.get(), 1, r, &out);
      PushOf(s.get(), 2, r, &out);
      continue;
    }
    if (r == 6) PushOf(s.get(), 2, r, &out);
    PushOf(s.get(), 0, r, &out);
    if (r != 6) PushOf(s.get(), 1, r, &out);
  }
  ASSERT_EQ(s->round(), 9u);
  const ShardServerStats& st = s->stats();
  EXPECT_EQ(st.missed_by_worker, (std::vector<uint64_t>{1, 1, 7}));
  EXPECT_EQ(st.longest_miss_run, (std::vector<uint64_t>{1, 1, 3}));
  EXPECT_EQ(st.missed, 9u);
}

TEST(BackupWorkersTest, ZeroBackupsWaitsForEveryLiveWorkerAndFlagsNone) {
  auto s = Make(3, 0);
  ASSERT_NE(s, nullptr);
  Outbox out;
  PushEach(s.get(), {0, 1}, 0, &out);
  EXPECT_TRUE(out.empty());
  PushOf(s.get(), 2, 0, &out);
  EXPECT_EQ(Updates(out, 0), (std::map<int, bool>{{0, false}, {1, false}, {2, false}}));
  EXPECT_TRUE(s->stats().missed_by_worker.empty());
  // An old round is ERROR_UNKNOWN_ROUND as before, not ERROR_LATE_PUSH.
  out.clear();
  PushOf(s.get(), 0, 5, &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].code, pb::ERROR_UNKNOWN_ROUND);
}

// b = 0 is today's BSP: the same pushes (random, overlapping, in the same order) into a shard
// with default options and into one with backup_workers = 0 (either late_pushes) give bitwise
// the same weights and the same replies, none flagged.
TEST(BackupWorkersTest, ZeroBackupsIsBitwiseTheDefaultShard) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  for (LatePushes late : {LatePushes::kApply, LatePushes::kReturn}) {
    ShardServerOptions a, b;
    a.num_workers = b.num_workers = 3;
    b.backup_workers = 0;
    b.late_pushes = late;
    auto sa = ShardServer::Create(a, std::vector<float>(64, 0.5f));
    auto sb = ShardServer::Create(b, std::vector<float>(64, 0.5f));
    ASSERT_TRUE(sa.ok() && sb.ok());
    for (uint64_t round = 0; round < 20; ++round) {
      for (int w : {2, 0, 1}) {
        std::vector<uint32_t> idx;
        for (uint32_t i = 0; i < 64; ++i) {
          if (rng() % 3 == 0) idx.push_back(i);
        }
        std::vector<float> val(idx.size());
        for (float& v : val) v = value(rng);
        Outbox oa, ob;
        (*sa)->OnPush(w, round, idx, val, false, &oa);
        (*sb)->OnPush(w, round, idx, val, false, &ob);
        ASSERT_EQ(oa.size(), ob.size());
        for (size_t j = 0; j < oa.size(); ++j) {
          EXPECT_EQ(oa[j].worker, ob[j].worker);
          EXPECT_FALSE(ob[j].push_missed);
          EXPECT_EQ(oa[j].buffer->indices, ob[j].buffer->indices);
          EXPECT_EQ(oa[j].buffer->values, ob[j].buffer->values);
        }
      }
    }
    EXPECT_TRUE(
        std::equal((*sa)->weights().begin(), (*sa)->weights().end(), (*sb)->weights().begin()));
    EXPECT_EQ((*sb)->stats().rounds_completed, 20u);
  }
}

TEST(BackupWorkersTest, ADeathLowersTheQuorumToOne) {
  auto s = Make(3, 1);
  ASSERT_NE(s, nullptr);
  Outbox out;
  s->OnWorkerDead(2, &out);
  PushOf(s.get(), 1, 0, &out);  // live 2, b 1: one push closes the round
  EXPECT_EQ(Updates(out, 0), (std::map<int, bool>{{0, true}, {1, false}}));
}

// A dead worker lowers the quorum; re-admitted and joined at round 3 it is counted again, and a
// round that closes without its first push still gives it the whole shard (flagged), so its
// replica is the server's; its late push is refused.
TEST(BackupWorkersTest, ARejoinedWorkerIsCountedAgainAndItsFirstUpdateIsWhole) {
  auto s = Make(3, 1);
  ASSERT_NE(s, nullptr);
  Outbox out;
  PushEach(s.get(), {0, 1}, 0, &out);
  s->OnWorkerDead(2, &out);
  PushEach(s.get(), {0}, 1, &out);  // live 2: one push closes it
  ASSERT_EQ(s->round(), 2u);
  s->OnWorkerRejoined(2);
  out.clear();
  s->OnJoin(2, 3, &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].type, ReplyType::kJoinAck);
  PushEach(s.get(), {0}, 2, &out);  // the joiner is not counted before round 3
  ASSERT_EQ(s->round(), 3u);
  out.clear();
  PushEach(s.get(), {0, 1}, 3, &out);  // live 3: two pushes close it
  ASSERT_EQ(s->round(), 4u);
  bool whole_to_2 = false;
  for (const Reply& r : out) {
    if (r.worker != 2) continue;
    whole_to_2 = r.dense && r.push_missed && r.buffer->values.size() == kShard;
  }
  EXPECT_TRUE(whole_to_2) << "the joiner's first UPDATE is the whole shard, flagged";
  out.clear();
  PushOf(s.get(), 2, 3, &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].code, pb::ERROR_LATE_PUSH);
  out.clear();
  PushEach(s.get(), {2, 0}, 4, &out);
  EXPECT_EQ(Updates(out, 4), (std::map<int, bool>{{0, false}, {1, true}, {2, false}}));
}

TEST(BackupWorkersTest, SplitRepliesCarryTheFlagOnEveryPart) {
  auto s = Make(3, 1, /*part_pairs=*/1);
  ASSERT_NE(s, nullptr);
  Outbox out;
  PushEach(s.get(), {0, 1}, 0, &out);
  size_t parts_to_2 = 0;
  for (const Reply& r : out) {
    ASSERT_EQ(r.type, ReplyType::kUpdate);
    EXPECT_GT(r.parts, 1u);
    EXPECT_EQ(r.push_missed, r.worker == 2);
    parts_to_2 += r.worker == 2;
  }
  EXPECT_EQ(parts_to_2, 4u);  // the union of 4 pairs, one per part
}

TEST(BackupWorkersTest, ApplyMergesALatePushIntoTheNextRoundOnce) {
  auto s = Make(3, 1, 0, LatePushes::kApply);
  ASSERT_NE(s, nullptr);
  Outbox out;
  PushEach(s.get(), {0, 1}, 0, &out);
  EXPECT_EQ(Updates(out, 0), (std::map<int, bool>{{0, false}, {1, false}, {2, false}}))
      << "kApply does not say the push is lost: it will be applied";
  for (const Reply& r : out) {
    if (r.type == ReplyType::kUpdate) {
      EXPECT_EQ(r.push_late, r.worker == 2) << r.worker;
    }
  }
  const float w2 = s->weights()[2];
  EXPECT_EQ(w2, 1.0f);
  out.clear();
  // Late: joins round 1's aggregate, acknowledged (the worker keeps it until then, for a
  // failover); its resend is a duplicate, acknowledged again.
  for (int copy = 0; copy < 2; ++copy) {
    PushOf(s.get(), 2, 0, &out);
    ASSERT_EQ(out.size(), 1u) << "copy " << copy;
    EXPECT_EQ(out[0].type, ReplyType::kLatePushAck);
    EXPECT_EQ(out[0].worker, 2);
    EXPECT_EQ(out[0].round, 0u);
    out.clear();
  }
  EXPECT_EQ(s->stats().duplicates, 1u);
  EXPECT_EQ(s->stats().late_pushes, 1u);
  EXPECT_EQ(s->rounds()->open_round_pushes(), 1u);
  EXPECT_EQ(s->round(), 1u) << "a late push does not count towards the quorum";
  PushEach(s.get(), {0, 1}, 1, &out);  // round 1: workers 0 and 1, plus worker 2's late push
  ASSERT_EQ(s->round(), 2u);
  // n = 3 pushes: w[2] = 1 - 3/3 (worker 2's value 3 at index 2); w[0] = (1 - 1/2) - 1/3.
  EXPECT_EQ(s->weights()[2], 1.0f - 3.0f / 3.0f);
  EXPECT_EQ(s->weights()[0], (1.0f - 1.0f / 2.0f) - 1.0f / 3.0f);
  EXPECT_EQ(s->stats().pushes_applied, 5u);
  EXPECT_EQ(s->stats().pushed_sum, 2.0 * (1 + 2 + 3 + 1 + 2));
  EXPECT_EQ(s->rounds()->open_round_pushes(), 0u);
  EXPECT_EQ(s->stats().missed, 2u);  // worker 2 in round 0, and in round 1 (its push was late)
}

TEST(BackupWorkersTest, BackupsMustBeFewerThanTheWorkersAndOnlyBsp) {
  ShardServerOptions o;
  o.num_workers = 3;
  o.backup_workers = 3;
  auto s = ShardServer::Create(o, std::vector<float>(4, 0.0f));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("must be below the job's 3 workers"), std::string::npos);
  o.backup_workers = 1;
  o.consistency = Consistency::kAsp;
  EXPECT_FALSE(ShardServer::Create(o, std::vector<float>(4, 0.0f)).ok());
}

}  // namespace
}  // namespace sieve
